"""``bdl sample MODEL --kernel NAME``: run a kernel on a model file and summarise the draws."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import numpy as np

from bdl.cli.options import parse_options
from bdl.compile.compiled_model import CompiledModel
from bdl.evaluation import test_metrics
from bdl.kernels import registry
from bdl.model_files import load_spec
from bdl.sampling import Samples, check_output_path, sample
from bdl.utils.trees import leaf_paths


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sample", help="draw samples of MODEL with a kernel")
    p.add_argument("model", help="a model name from models/ or a path to a .py file")
    p.add_argument("--kernel", required=True, help="kernel name (see `bdl kernels`)")
    p.add_argument("--steps", type=int, default=None, help="total steps per chain")
    p.add_argument("--burn-in", type=int, default=None, help="steps discarded first")
    p.add_argument("--thin", type=int, default=None, help="keep every THIN-th step")
    p.add_argument("--chains", type=int, default=4, help="chains run in parallel (vmap)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--init",
        default=None,
        help="start: auto, network, prior, map or fixed (default: the model file's, else auto)",
    )
    p.add_argument(
        "--tuned",
        action="store_true",
        help="use the model file's validated hyper-parameters for the kernel instead of "
        "adapting step size, mass and friction during burn-in",
    )
    p.add_argument("--out", type=Path, default=None, help="save draws (.npz, or .nc for ArviZ)")
    p.add_argument(
        "--hyper",
        action="append",
        metavar="KEY=VALUE",
        help="kernel hyper-parameter (repeatable), e.g. --hyper step_size=1e-3",
    )
    p.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="model option passed to build() (repeatable), e.g. --option depth=3",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_output_path(args.out)  # before any work: a bad --out must not cost the run
    spec = load_spec(args.model, **parse_options(args.option, "--option"))
    hyper = parse_options(args.hyper, "--hyper")
    if args.tuned:
        hyper = {**spec.kernel_hyper(args.kernel), **hyper}
    kernel = registry.get(args.kernel, **hyper)
    target = spec.compile()
    steps = args.steps or spec.num_steps
    burn_in = spec.burn_in if args.burn_in is None else args.burn_in
    thin = args.thin or spec.thin
    print(
        f"{target.name}: {args.kernel} {hyper or registry.defaults(args.kernel)}, "
        f"{args.chains} chains x {steps} steps (burn-in {burn_in}, thin {thin})"
    )
    start = time.perf_counter()
    samples = sample(
        target,
        kernel,
        num_steps=steps,
        burn_in=burn_in,
        thin=thin,
        num_chains=args.chains,
        seed=args.seed,
        init=spec.init if args.init is None else args.init,
        progress=True,
    )
    print(f"{samples} in {time.perf_counter() - start:.1f} s")
    if samples.adapted is not None:
        print("adapted (per chain): " + adapted_line(samples.adapted))
    if samples.healthy_chains.size:
        summarise(target, samples)
    if args.out is not None:
        samples.save(args.out)
        print(f"draws written to {args.out}")
    if np.any(samples.diverged):
        print(f"bdl sample: warning: {samples.divergence_report()}", file=sys.stderr)
        return 3
    return 1 if samples.interrupted else 0


def adapted_line(adapted: dict) -> str:
    """The adapted step sizes and frictions, and the mass's range, on one line."""
    parts = [
        f"{k} " + " ".join(f"{v:.3g}" for v in np.asarray(adapted[k]))
        for k in ("step_size", "friction")
        if k in adapted
    ]
    if "mass" in adapted:
        m = np.concatenate([np.ravel(x) for x in jax.tree.leaves(adapted["mass"])])
        parts.append(f"mass from {m.min():.3g} to {m.max():.3g}")
    return "; ".join(parts)


def summarise(target: object, samples: Samples) -> None:
    """Posterior summary of the first parameters, and test metrics for data models."""
    import numpyro.diagnostics as diag

    positions = jax.tree.map(lambda a: a[samples.healthy_chains], samples.positions)
    names = leaf_paths(positions)
    rows = []
    for name, leaf in zip(names, jax.tree.leaves(positions), strict=True):
        flat = np.asarray(leaf).reshape(leaf.shape[0], leaf.shape[1], -1)
        for j in range(min(flat.shape[2], max(0, 8 - len(rows)))):
            x = flat[:, :, j]
            ess = float(diag.effective_sample_size(x)) if x.shape[1] > 3 else float("nan")
            rhat = float(diag.split_gelman_rubin(x)) if x.shape[1] > 3 else float("nan")
            label = f"{name}[{j}]" if flat.shape[2] > 1 else name
            rows.append((label, x.mean(), x.std(), ess, rhat))
    print(f"{'parameter':<28}{'mean':>10}{'sd':>10}{'ESS':>9}{'R-hat':>8}")
    for label, m, s, e, r in rows:
        print(f"{label[:27]:<28}{m:>10.4f}{s:>10.4f}{e:>9.0f}{r:>8.3f}")
    if isinstance(target, CompiledModel) and target.x_test is not None:
        metrics = test_metrics(target, samples.flat(healthy=True))
        print("test " + "  ".join(f"{k} {v:.4f}" for k, v in metrics.items()))

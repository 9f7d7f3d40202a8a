"""``bdl sample MODEL --kernel NAME``: run a kernel on a model file and summarise the draws.

Every argument is checked before anything is compiled. Ctrl-C at any moment ends the command
with status 130; once sampling has started, the draws collected so far are first summarised
(and saved with ``--out``).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import jax
import numpy as np

from bdl.cli.options import check_init, check_kernel, check_seed, parse_options, run_lengths
from bdl.utils.trees import leaf_paths

if TYPE_CHECKING:
    from bdl.sampling import Samples


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
    from bdl.cli.summary import summary_lines
    from bdl.kernels import registry
    from bdl.model_files import load_spec
    from bdl.sampling import sample

    check_seed(args.seed)
    check_kernel(args.kernel)
    hyper = parse_options(args.hyper, "--hyper")
    spec = load_spec(args.model, **parse_options(args.option, "--option"))
    lengths = run_lengths(args, spec)
    check_init(args.init, spec)
    if args.tuned:
        hyper = {**spec.kernel_hyper(args.kernel), **hyper}
    kernel = registry.get(args.kernel, **hyper)
    target = spec.compile()
    steps, burn_in, thin = lengths.steps, lengths.burn_in, lengths.thin
    print(
        f"{target.name}: {args.kernel} {hyper or registry.defaults(args.kernel)}, "
        f"{lengths.chains} chains x {steps} steps (burn-in {burn_in}, thin {thin})"
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        # an interruption is reported below, with what was kept
        warnings.filterwarnings("ignore", "sampling interrupted", UserWarning)
        samples = sample(
            target,
            kernel,
            num_steps=steps,
            burn_in=burn_in,
            thin=thin,
            num_chains=lengths.chains,
            seed=args.seed,
            init=spec.init if args.init is None else args.init,
            progress=True,
        )
    print(f"{samples} in {time.perf_counter() - start:.1f} s")
    if samples.interrupted:
        print(f"bdl sample: {interruption(samples, steps, burn_in)}", file=sys.stderr)
    if samples.num_draws == 0:
        if not samples.interrupted:
            print("no draws were kept (every step was marked as a non-sample); run longer.")
        return 130 if samples.interrupted else 0
    if samples.adapted is not None:
        print("adapted (per chain): " + adapted_line(samples.adapted))
    if samples.healthy_chains.size:
        print("\n".join(summary_lines(target, samples, spec.parameter_labels)))
    if args.out is not None:
        save(samples, args.out)
        print(f"draws written to {args.out}")
    if samples.interrupted:
        return 130
    if np.any(samples.diverged):
        print(f"bdl sample: warning: {samples.divergence_report()}", file=sys.stderr)
        return 3
    return 0


def interruption(samples: Samples, steps: int, burn_in: int) -> str:
    """One line saying where Ctrl-C stopped the run and what is kept."""
    where = f"interrupted after {samples.steps_done} of {steps} steps"
    if samples.num_draws:
        return f"{where}; summarising the {samples.num_draws} draws per chain collected."
    phase = " (during burn-in)" if samples.steps_done < burn_in else ""
    return f"{where}{phase}: no draws yet, nothing to summarise or save."


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


def save(samples: Samples, path: Path) -> None:
    if path.suffix == ".nc":
        samples.to_arviz().to_netcdf(str(path))
        return
    arrays = {
        f"position/{k}": np.asarray(v)
        for k, v in zip(
            leaf_paths(samples.positions), jax.tree.leaves(samples.positions), strict=True
        )
    }
    arrays.update({f"info/{k}": v for k, v in samples.info.items()})
    arrays["steps"] = samples.steps
    np.savez(path, **arrays)

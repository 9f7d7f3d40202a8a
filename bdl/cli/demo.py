"""``bdl demo``: the embedded demonstration, offline on 2 CPU cores in a few minutes.

Bayesian logistic regression on the breast-cancer data (scikit-learn): NumPyro NUTS gives the
reference posterior (float64, 4 chains, trusted only if R̂ < 1.01 and bulk ESS ≥ 400); SGHMC and
SGLD are validated against it in parameter space, and their BMA test accuracy and NLL are shown
beside NUTS's and an SGD point estimate.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bdl.cli.options import check_seed
from bdl.utils.files import can_create_in

if TYPE_CHECKING:
    from bdl.compile.compiled_model import CompiledModel

#: SGLD's (steps, thin) in the demo: at the model file's validated step size (3e-3, posterior sds
#: 0.14–1.06 along the principal axes) it needs 2e5 steps for an ESS of ~1000 along the flattest
#: axis; SGHMC runs with the model file's own settings (docs/validation.md).
SGLD_RUN = (200_000, 50)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the embedded demonstration")
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the NUTS reference and the kernel runs"
    )
    p.add_argument(
        "--out-dir",
        type=Path,
        default=Path("bdl-output"),
        help="directory for the figures (default bdl-output)",
    )
    p.set_defaults(run=run)


def sgd_point_estimate(target: CompiledModel, steps: int, seed: int) -> dict[str, float]:
    """MAP by ``optax.sgd`` with momentum on the mean minibatch loss, for comparison."""
    import jax
    import optax

    from bdl.evaluation import test_metrics
    from bdl.optimise import minimise

    opt = optax.sgd(0.02, momentum=0.9)
    run = jax.jit(lambda p, k: minimise(target, opt, p, k, steps))
    params = run(target.initial_position, jax.random.key(seed))
    return test_metrics(target, jax.tree.map(lambda a: a[None], params))


def run(args: argparse.Namespace) -> int:
    from bdl.evaluation import test_metrics
    from bdl.kernels import registry
    from bdl.model_files import load_spec
    from bdl.validation import nuts_reference, validate

    check_seed(args.seed)
    if args.out_dir.exists() and not args.out_dir.is_dir():
        raise NotADirectoryError(
            f"--out-dir {args.out_dir} is a file; pass a directory for the demo's figures."
        )
    # the figures are written at the end: find out now whether they can be
    with contextlib.suppress(OSError):
        args.out_dir.mkdir(parents=True, exist_ok=True)
    if not can_create_in(args.out_dir):
        raise ValueError(
            f"--out-dir {args.out_dir}: cannot write there; pass a directory you can write to."
        )
    spec = load_spec("logistic_breast_cancer")
    target = spec.compile()
    print(f"bdl demo: {spec.description}; prior N(0, 1), T = 1, minibatch {spec.batch_size}\n")
    start = time.perf_counter()
    reference = nuts_reference(target, seed=args.seed)
    print(
        f"NUTS reference: 4 chains x 1000 draws, max R̂ {reference.max_rhat:.3f}, "
        f"min bulk ESS {reference.min_ess:.0f} ({time.perf_counter() - start:.0f} s)\n"
    )
    rows = [("NUTS (reference)", test_metrics(target, _flat(reference.positions)))]
    rows.append(("SGD point estimate", sgd_point_estimate(target, spec.num_steps, args.seed)))
    status = 0
    for name in ("sghmc", "sgld"):
        kernel = registry.get(name, **spec.kernel_hyper(name))
        num_steps, thin = SGLD_RUN if name == "sgld" else (spec.num_steps, spec.thin)
        report = validate(
            target,
            kernel,
            num_steps=num_steps,
            burn_in=spec.burn_in,
            thin=thin,
            num_chains=4,
            seed=args.seed,
            reference=reference,
            plot=args.out_dir / f"demo_{name}.png",
            parameter_labels=spec.parameter_labels,
        )
        print(report.table())
        print(f"plot: {report.plot}  ({report.seconds['kernel']:.0f} s)\n")
        rows.append((f"{name.upper()} (4 chains)", test_metrics(target, report.samples.flat())))
        status |= 0 if report.passed else 1
    print(f"{'test-set BMA':<22}{'accuracy':>10}{'NLL':>9}")
    for label, m in rows:
        print(f"{label:<22}{m['accuracy']:>10.4f}{m['nll']:>9.4f}")
    return status


def _flat(tree: object) -> object:
    import jax
    import jax.numpy as jnp

    return jax.tree.map(lambda a: jnp.asarray(a).reshape(-1, *a.shape[2:]), tree)

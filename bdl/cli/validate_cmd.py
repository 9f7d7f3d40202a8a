"""``bdl validate MODEL --kernel NAME``: NUTS reference vs kernel; table, plot, exit code."""

from __future__ import annotations

import argparse
from pathlib import Path

from bdl.cli.options import parse_options
from bdl.kernels import registry
from bdl.model_files import load_spec
from bdl.validation import UntrustedReferenceError, validate


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate", help="compare a kernel with NumPyro NUTS (exit 1 if outside the thresholds)"
    )
    p.add_argument("model", help="a model name from models/ or a path to a .py file")
    p.add_argument("--kernel", required=True, help="kernel name (see `bdl kernels`)")
    p.add_argument("--hyper", action="append", metavar="KEY=VALUE")
    p.add_argument("--option", action="append", metavar="KEY=VALUE")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--burn-in", type=int, default=None)
    p.add_argument("--thin", type=int, default=None)
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init", default=None, help="start: auto, network, prior, map or fixed")
    p.add_argument(
        "--tuned", action="store_true", help="use the model file's validated hyper-parameters"
    )
    p.add_argument("--nuts-warmup", type=int, default=1_000)
    p.add_argument("--nuts-samples", type=int, default=1_000)
    p.add_argument(
        "--plot",
        type=Path,
        default=None,
        help="figure path (default: bdl-output/validate_MODEL_KERNEL.png)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.model, **parse_options(args.option, "--option"))
    hyper = parse_options(args.hyper, "--hyper")
    if args.tuned:
        hyper = {**spec.kernel_hyper(args.kernel), **hyper}
    kernel = registry.get(args.kernel, **hyper)
    target = spec.compile()
    plot = args.plot or Path("bdl-output") / f"validate_{target.name}_{args.kernel}.png"
    try:
        report = validate(
            target,
            kernel,
            num_steps=args.steps or spec.num_steps,
            burn_in=spec.burn_in if args.burn_in is None else args.burn_in,
            thin=args.thin or spec.thin,
            num_chains=args.chains,
            seed=args.seed,
            init=spec.init if args.init is None else args.init,
            nuts={"num_warmup": args.nuts_warmup, "num_samples": args.nuts_samples},
            plot=plot,
            progress=True,
        )
    except UntrustedReferenceError as err:
        print(f"bdl validate: {err}")
        return 2
    print(report)
    print(f"plot: {report.plot}")
    return 0 if report.passed else 1

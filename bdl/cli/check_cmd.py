"""``bdl check NAME``: run the stationarity checker; exit 0 if exact, 1 if not."""

from __future__ import annotations

import argparse

from bdl.cli.options import check_finite, check_kernel, check_seed, parse_options


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="check a kernel for stationarity (exit 0 if exact)")
    p.add_argument("name", help="kernel name (see `bdl kernels`)")
    p.add_argument(
        "--hyper", action="append", metavar="KEY=VALUE", help="kernel hyper-parameter (repeatable)"
    )
    p.add_argument("--temperature", type=float, default=0.7, help="T at which to check (>= 0.01)")
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the random states checked (default 0)"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bdl.kernels import check, registry
    from bdl.kernels.checker import MIN_TEMPERATURE

    check_kernel(args.name, "kernel")
    check_finite("--temperature", args.temperature, MIN_TEMPERATURE)
    check_seed(args.seed)
    kernel = registry.get(args.name, **parse_options(args.hyper, "--hyper"))
    report = check(kernel, temperature=args.temperature, seed=args.seed)
    print(report)
    return 0 if report.exact else 1

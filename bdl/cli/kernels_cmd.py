"""``bdl kernels``: every registered kernel, one line each, with the stationarity checker's
verdict (exact or approximate, and why) at its registered defaults.

By default the verdicts are the ones shipped with bdl (``bdl/kernels/verdicts.json``), so the
listing is immediate; ``--check`` re-runs the stationarity checker (seconds per kernel) and says
where it disagrees with the shipped verdict.
"""

from __future__ import annotations

import argparse

from bdl.cli.options import check_kernel


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kernels", help="list the registered kernels with their checker verdicts")
    p.add_argument("names", nargs="*", metavar="NAME", help="only these kernels (default: all)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--check",
        action="store_true",
        help="re-run the stationarity checker (a few seconds per kernel) instead of showing "
        "the shipped verdicts",
    )
    mode.add_argument("--no-check", action="store_true", help="names and summaries only")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bdl.kernels import registry, verdicts

    for name in args.names:
        check_kernel(name, "kernel")
    for name in args.names or registry.names():
        summary = registry.summary(name)
        if args.no_check:
            print(f"{name:<14}{summary}")
            continue
        shipped = verdicts.shipped_verdict(name)
        if args.check:
            result, reasons = verdicts.fresh(name)
            if shipped is not None and shipped[0] != result:
                reasons = [*reasons, f"the shipped verdict says {shipped[0]}"]
        elif shipped is None:
            result, reasons = "unchecked", [f"no shipped verdict; bdl kernels --check {name}"]
        else:
            result, reasons = shipped
        why = f" ({'; '.join(reasons)})" if reasons else ""
        print(f"{name:<14}{result:<12}{summary}{why}", flush=args.check)
    return 0

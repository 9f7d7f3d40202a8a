"""``bdl kernels``: every registered kernel, one line each, with its checker verdict."""

from __future__ import annotations

import argparse

from bdl.kernels import registry
from bdl.kernels.verdicts import verdict


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kernels", help="list the registered kernels with their checker verdicts")
    p.add_argument("--no-check", action="store_true", help="list without running the checker")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    for name in registry.names():
        if args.no_check:
            print(f"{name:<14}{registry.summary(name)}")
            continue
        result, reasons = verdict(name)
        why = f" ({'; '.join(reasons)})" if reasons else ""
        print(f"{name:<14}{result:<12}{registry.summary(name)}{why}", flush=True)
    return 0

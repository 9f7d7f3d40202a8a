"""``bdl kernels``: every registered kernel, one line each."""

from __future__ import annotations

import argparse

from bdl.kernels import registry


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kernels", help="list the registered kernels")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    for name in registry.names():
        print(f"{name:<14}{registry.summary(name)}")
    return 0

"""``bdl meta-train {l2e,kinetic-l2e,nnsghmc}``: train a learned kernel's meta-parameters.

With the shipped configuration, or ``--config FILE``; the run checkpoints every few iterations
into ``--out`` and continues from there with ``--resume``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bdl.meta import TRAINERS


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("meta-train", help="meta-train a learned kernel (l2e, kinetic-l2e, nnsghmc)")
    p.add_argument("kernel", choices=sorted(TRAINERS), help="the learned kernel to train")
    p.add_argument("--config", default=None, help="TOML config (default: the shipped one)")
    p.add_argument("--out", default=None, help="run directory (default: bdl-output/meta/KERNEL)")
    p.add_argument("--resume", action="store_true", help="continue from the run directory")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bdl.meta import trainer
    from bdl.meta.config import load_config

    out = Path(args.out) if args.out else Path("bdl-output") / "meta" / args.kernel
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {out} is a file; pass a directory for the run.")
    config = load_config(args.config, args.kernel)
    result = trainer(args.kernel)(config, out, resume=args.resume, progress=not args.quiet)
    last = result.history[-1]["loss"] if result.history else float("nan")
    print(
        f"{args.kernel}: {result.iterations} iterations in {result.wall_time_s:.0f} s, "
        f"final loss {last:.4g}; meta-parameters written to {result.meta_params_path}"
    )
    return 0

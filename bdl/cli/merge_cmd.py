"""``bdl merge PART... --out PATH``: join the per-process draws of a multi-process run."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("merge", help="join the draws the processes of one run wrote into one file")
    p.add_argument("parts", nargs="+", type=Path, help="the processes' files (any order)")
    p.add_argument(
        "--out", type=Path, required=True, help="the merged draws (.npz, or .nc for ArviZ)"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bdl.sampling import check_output_path, merge_samples

    check_output_path(args.out)
    missing = [str(p) for p in args.parts if not p.is_file()]
    if missing:
        raise ValueError(f"no such file: {', '.join(missing)}.")
    samples = merge_samples(args.parts)
    samples.save(args.out)
    print(f"{samples} from {len(args.parts)} parts written to {args.out}")
    return 0

"""Entry point of the ``bdl`` console script."""

from __future__ import annotations

import argparse
import os
import sys

from bdl.cli import check_cmd, demo, kernels_cmd, meta_train_cmd, sample_cmd, validate_cmd


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bdl", description="Bayesian deep learning with stochastic-gradient MCMC."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (demo, sample_cmd, kernels_cmd, check_cmd, validate_cmd, meta_train_cmd):
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, TypeError, FileNotFoundError) as err:
        print(f"bdl {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # commands save what they collected before re-raising (checkpoints, draws)
        print(f"bdl {args.command}: interrupted.", file=sys.stderr)
        return 130


def console_main() -> int:
    """The ``bdl`` console script: :func:`main` with the persistent XLA compilation cache
    (``bdl.enable_compilation_cache``) unless ``BDL_XLA_CACHE=0``."""
    if os.environ.get("BDL_XLA_CACHE", "1") != "0":
        from bdl.compilation_cache import enable_compilation_cache

        enable_compilation_cache()
    return main()


if __name__ == "__main__":
    sys.exit(console_main())

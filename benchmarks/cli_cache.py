"""The ``bdl sample`` command from a fresh process, with an empty and a warm compilation cache.

Runs ``bdl sample MODEL --kernel sghmc --steps 2000 --burn-in 1000 --thin 100 --chains 4``
(adapted: warm-up tunes h, M and γ during burn-in) and, with ``--tuned``, the same command with
the model file's fixed step, each as its own process (``python -c "from bdl.cli.main import
console_main; console_main()"``: what the ``bdl`` console script runs, the persistent XLA cache
included) with ``BDL_CACHE_DIR`` a fresh directory: first with the cache empty (cold: compiles
and writes), then ``--repeats`` times warm. It prints each process's wall seconds from outside
(interpreter start, imports, the model's data, tracing, the run and its checks, the exit) and
the ratio warm adapted ÷ warm fixed. The targets (docs/design.md, *Performance targets*): warm
adapted ≤ 5 s on a GPU, ≤ 1.5× warm fixed on the CPU.

``--profile`` runs one more warm adapted process under ``cProfile`` and prints the 25 functions
with the largest cumulative time: where a warm command's seconds go.

    python benchmarks/cli_cache.py [--model mlp_digits] [--repeats 2] [--variants adapted,fixed]
        [--profile]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment

RUN = "import sys; from bdl.cli.main import console_main; sys.argv[0] = 'bdl'; console_main()"
PROFILED = (
    "import cProfile, pstats, sys; from bdl.cli.main import console_main; sys.argv[0] = 'bdl'\n"
    "p = cProfile.Profile(); p.enable()\n"
    "try:\n    console_main()\nexcept SystemExit:\n    pass\n"
    "p.disable(); pstats.Stats(p, stream=sys.stderr).sort_stats('cumulative').print_stats(25)"
)


def command(model: str, variant: str) -> list[str]:
    """The ``bdl sample`` arguments of one variant (``adapted`` or ``fixed``)."""
    args = [model, "--kernel", "sghmc", "--steps", "2000", "--burn-in", "1000", "--thin", "100"]
    args += ["--chains", "4"]
    return ["sample", *args, *(["--tuned"] if variant == "fixed" else [])]


def timed(code: str, argv: list[str], cache: str) -> tuple[float, str]:
    """Wall seconds of one process running ``code`` with ``sys.argv[1:] = argv``, and its stderr."""
    env = dict(os.environ, BDL_CACHE_DIR=cache)
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, check=False
    )
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"bdl {' '.join(argv)} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return seconds, out.stderr


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="mlp_digits")
    p.add_argument("--repeats", type=int, default=2, help="warm processes per variant")
    p.add_argument("--variants", default="adapted,fixed", help="adapted, fixed (--tuned)")
    p.add_argument("--profile", action="store_true", help="profile one more warm adapted run")
    args = p.parse_args(argv)
    variants = args.variants.split(",")
    print(environment(), flush=True)
    warm: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as cache:
        for variant in variants:
            cold, _ = timed(RUN, command(args.model, variant), cache)
            warm[variant] = [timed(RUN, command(args.model, variant), cache)[0]]
            print(f"{variant:<8} cold cache {cold:6.2f} s", flush=True)
        for _ in range(args.repeats - 1):  # alternated, so both see the same background load
            for variant in variants:
                warm[variant].append(timed(RUN, command(args.model, variant), cache)[0])
        for variant in variants:
            shown = ", ".join(f"{s:.2f}" for s in warm[variant])
            print(f"{variant:<8} warm cache {statistics.median(warm[variant]):6.2f} s ({shown})")
        if {"adapted", "fixed"} <= set(variants):
            ratio = statistics.median(warm["adapted"]) / statistics.median(warm["fixed"])
            print(f"warm adapted / warm fixed: {ratio:.2f}")
        if args.profile:
            seconds, profile = timed(PROFILED, command(args.model, "adapted"), cache)
            print(f"profiled warm adapted run: {seconds:.2f} s\n{profile[-12000:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

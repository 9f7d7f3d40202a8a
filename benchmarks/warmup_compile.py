"""Compile time of an adapted run: the first ``bdl.sample`` call of a fresh process against a
second, identical call (which compiles nothing), for each kernel built by name (warm-up on).

Each kernel runs in its own subprocess, so nothing is cached between them (no persistent XLA
cache). Prints the first and second call's wall seconds, their difference (the compile time,
tracing included) and the seconds XLA's backend spent compiling with the number of
compilations (``jax.monitoring``), with the load average.

    python benchmarks/warmup_compile.py [--kernels sghmc,sgnht] [--depth 1] [--n 10000]
        [--steps 8000] [--chains 8] [--repeats 1]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment, load_average

CHILD = """
import sys, time
sys.path.insert(0, {bench!r})
import jax
import bdl
from _common import CompileCounter
from bdl.model_files import load_spec

target = load_spec("mlp_prior_data", depth={depth}, n_train={n}, batch_size=min({n}, 100)).compile()
counter = CompileCounter.install()


def run():
    start = time.perf_counter()
    s = bdl.sample(target, bdl.kernels.get({kernel!r}), num_steps={steps}, burn_in={steps} // 2,
                   thin=max(1, {steps} // 200), num_chains={chains}, seed=0, progress=False)
    jax.block_until_ready(s.positions)
    return time.perf_counter() - start


before = counter.snapshot()
first = run()
count, seconds = (a - b for a, b in zip(counter.snapshot(), before))
second = run()
print(first, second, count, seconds)
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernels", default="sghmc,sgnht")
    p.add_argument("--depth", type=int, default=1)
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--steps", type=int, default=8_000)
    p.add_argument("--chains", type=int, default=8)
    p.add_argument("--repeats", type=int, default=1)
    args = p.parse_args()
    print(environment())
    print(
        f"prior-data MLP depth {args.depth}, n = {args.n:,}; {args.chains} chains × "
        f"{args.steps:,} steps (half burn-in); {load_average()}"
    )
    print(f"{'kernel':<8}{'first (s)':>11}{'second (s)':>12}{'compile (s)':>13}"
          f"{'XLA backend (s)':>17}{'compilations':>14}")  # fmt: skip
    bench = str(Path(__file__).resolve().parent)
    for _ in range(args.repeats):
        for kernel in args.kernels.split(","):
            code = CHILD.format(
                bench=bench, depth=args.depth, n=args.n, kernel=kernel, steps=args.steps,
                chains=args.chains,
            )  # fmt: skip
            out = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            )
            first, second, count, seconds = out.stdout.split()[-4:]
            first, second = float(first), float(second)
            print(f"{kernel:<8}{first:>11.2f}{second:>12.2f}{first - second:>13.2f}"
                  f"{float(seconds):>17.2f}{int(float(count)):>14}", flush=True)  # fmt: skip
    print(load_average())


if __name__ == "__main__":
    main()

"""The kernels run per step by ``bdl.sample``'s compiled loop and by a bare kernel scan.

On the digits MLP (B = 32) it compiles, for each kernel, a jitted ``lax.scan`` of S bare
``kernel.step``s (``step_overhead.make_scans``) and the program that ``bdl.sample(...,
num_steps=S, thin=S)`` runs (its third call: on an accelerator that is the program of a
static-length draw), and prints every ``while`` loop of their optimised HLO: whether XLA knows
its trip count, and its top-level instructions that do work (on a GPU each fusion is a kernel
launch per iteration). The step loops should match. It then times the bare scan alone and
nested in a loop of traced trip count (one iteration), as the sampling loop nests its draws.

Run: ``python benchmarks/loop_hlo.py [--steps 1000] [--kernels sghmc,sgld] [--save DIR]``
(``--save`` writes the optimised HLO texts there).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import digits_mlp, environment, recorded_calls, while_loops
from step_overhead import make_scans

import bdl
from bdl.sampling.run import program

KERNELS = {
    "sghmc": {"step_size": 1e-3, "friction": 1.0},
    "sgld": {"step_size": 1e-4},
    "sgnht": {"step_size": 1e-3},
}


def sample_program_text(compiled: Any, kernel: Any, steps: int) -> str:
    """Optimised HLO of the compiled loop that ``bdl.sample`` runs for ``steps`` steps, one
    draw (taken from its third call)."""
    with recorded_calls(program, "run_chunk") as calls:
        for _ in range(3):
            run = bdl.sample(compiled, kernel, num_steps=steps, thin=steps, progress=False)
            jax.block_until_ready(run.positions)
    args, kwargs = calls[-1]
    return program.lower_chunk(*args, **kwargs).compile().compiled.as_text()


def median_time(fn: Any, *args: Any, repeats: int = 7) -> float:
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def show(label: str, text: str) -> None:
    print(f"{label}:")
    for loop in while_loops(text):
        ops = ", ".join(f"{k} {v}" for k, v in loop["ops"].most_common())
        trip = "known" if loop["known_trip_count"] else "traced"
        print(
            f"  while in {loop['in'][:28]:<28} trip count {trip:<6}"
            f" {loop['thunks']:4d} working ops ({ops}), {loop['fused']} inside"
        )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--kernels", default="sghmc,sgld", help=f"comma-separated, of {list(KERNELS)}")
    ap.add_argument("--save", type=Path, default=None, help="write the HLO texts to this folder")
    args = ap.parse_args(argv)
    names = args.kernels.split(",")
    if args.steps < 2 or not set(names) <= set(KERNELS):
        ap.error(f"--steps must be >= 2 and --kernels among {list(KERNELS)}")
    print(f"# loop_hlo: {environment()}")
    compiled = digits_mlp(batch_size=32)
    kernels = {n: bdl.kernels.get(n, **KERNELS[n]) for n in names}
    scans = make_scans(compiled, kernels, args.steps, 0.05)
    if args.save is not None:
        args.save.mkdir(parents=True, exist_ok=True)
    for name, kernel in kernels.items():
        fn, carry = scans[name]
        texts = {
            "bare scan": fn.lower(carry).compile().as_text(),
            "bdl.sample's loop": sample_program_text(compiled, kernel, args.steps),
        }
        for label, text in texts.items():
            show(f"{name}, {label}", text)
            if args.save is not None:
                (args.save / f"{name}_{label.split()[0].strip('.')}.txt").write_text(text)
        nested = jax.jit(lambda c, n, fn=fn: jax.lax.fori_loop(0, n, lambda i, c: fn(c), c))
        bare = median_time(fn, carry) / args.steps
        inside = median_time(nested, carry, jnp.int32(1)) / args.steps
        print(
            f"  {name}: bare scan {bare * 1e6:.1f} µs/step; nested in a loop of traced trip count"
            f" {inside * 1e6:.1f} µs/step ({inside / bare:.3f}×)"
        )


if __name__ == "__main__":
    main()

"""Short calls of ``bdl.sample``: how the chunk sizer's memory changes their cost.

A ``bdl.sample`` call runs as one or more calls of its compiled loop, each sized to take about
0.5 s; a run starts at the size that the previous run of the same target, kernel and chain
count reached. Before 2026-11-26 that size was remembered only from loop calls of at least
0.125 s, so a run whose calls are all shorter (a small model, or a fast accelerator) started
every time at 16 steps and paid the fixed cost of a loop call several times. This script times
the second of two identical calls — SGHMC, one chain, ``--steps`` steps with one draw on the
depth-1 prior-data MLP (d = 93, n = 1,000, B = 100) — under the sizer's current rule and under
the earlier one (reproduced here), in interleaved rounds, and prints the median time, its range
and the number of loop calls per ``bdl.sample`` call.

    python benchmarks/chunk_sizer.py [--steps 2000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from unittest.mock import patch

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment, load_average

import bdl
from bdl.model_files import load_spec
from bdl.sampling import run as sampling_run

Sizer = sampling_run._ChunkSizer


def earlier_record(self: Any, steps: int, seconds: float, compiled: bool = False) -> None:
    """The sizer's rule before 2026-11-26: remember a size only from a call of ≥ 0.125 s (and
    time a call that compiled like any other)."""
    per_step = max(seconds, 1e-9) / max(steps, 1)
    want = int(self.TARGET_SECONDS / per_step)
    self.steps = max(1, min(want, 4 * max(steps, self.steps)))
    if self.run and seconds >= self.TARGET_SECONDS / 4:
        self._reached[self.run] = self.steps


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args(argv)
    print(f"# chunk_sizer: {environment()}")
    target = load_spec("mlp_prior_data", depth=1, n_train=1000, batch_size=100).compile()
    kernel = bdl.kernels.get("sghmc", step_size=1e-3, friction=1.0)

    def call() -> None:
        s = bdl.sample(
            target, kernel, num_steps=args.steps, thin=args.steps, num_chains=1, progress=False
        )
        jax.block_until_ready(s.positions)

    loop_calls = {"n": 0}
    real_run_chunk = sampling_run._run_chunk

    def counting(*a: Any, **kw: Any) -> Any:
        loop_calls["n"] += 1
        return real_run_chunk(*a, **kw)

    rules = {"current rule": Sizer.record, "earlier rule": earlier_record}
    times: dict[str, list[float]] = {name: [] for name in rules}
    calls: dict[str, int] = {}
    with patch.object(sampling_run, "_run_chunk", counting):
        call()  # compiles
        for _ in range(args.repeats):
            for name, rule in rules.items():
                with patch.object(Sizer, "record", rule), patch.object(Sizer, "_reached", {}):
                    call()  # the run's first call starts at Sizer.FIRST steps
                    loop_calls["n"] = 0
                    start = time.perf_counter()
                    call()
                    times[name].append(time.perf_counter() - start)
                    calls[name] = loop_calls["n"]
    print(f"# {load_average()}")
    print(f"second call of {args.steps} steps, median of {args.repeats} interleaved rounds:")
    for name, ts in times.items():
        print(
            f"  {name:<13} {statistics.median(ts) * 1e3:7.1f} ms (range {min(ts) * 1e3:.1f}–"
            f"{max(ts) * 1e3:.1f}), {calls[name]} call(s) of the compiled loop"
        )
    pairs = zip(times["current rule"], times["earlier rule"], strict=True)
    ratio = statistics.median(a / b for a, b in pairs)
    print(f"current / earlier: {ratio:.3f} (median of the per-round ratios)")


if __name__ == "__main__":
    main()

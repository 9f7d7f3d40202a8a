"""The first ``bdl.sample`` call of a process, with and without the persistent XLA cache.

Each measurement is a fresh Python process (nothing compiled yet). The model is the digits MLP of
``_common.py`` and the kernel SGHMC (h = 1e-3, C = 1); the call runs ``--steps`` steps with one
draw and one chain, so its time is almost all tracing and compilation. Three processes:

1. no persistent cache (what a Python user gets by default);
2. ``bdl.enable_compilation_cache`` on an empty directory (cold: compiles and writes);
3. the same directory again (warm: what every later ``bdl`` command gets for the same model).

For each it prints the time from the process's start (interpreter, imports, ``bdl.compile`` of
the model) to the end of the ``bdl.sample`` call — what the target measures — then the call
alone and the whole process with its exit (JAX's shutdown adds 0.2–0.4 s), measured from
outside.

Run: ``python benchmarks/first_call.py [--steps 1000] [--repeats 2]``. It prints the seconds of
each, the median over the repeats, and the ratio warm / none. The targets are in docs/design.md,
*Performance targets*.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment

CHILD = """
import sys, time
sys.path.insert(0, {bench!r})
import jax
import bdl
if {cache!r}:
    bdl.enable_compilation_cache({cache!r})
from _common import digits_mlp
compiled = digits_mlp()
kernel = bdl.kernels.get("sghmc", step_size=1e-3, friction=1.0)
start = time.perf_counter()
out = bdl.sample(compiled, kernel, num_steps={steps}, thin={steps}, num_chains=1, progress=False)
jax.block_until_ready(out.positions)
print(time.perf_counter() - start, time.time())
"""


def first_call(steps: int, cache: str) -> tuple[float, float, float, float]:
    """(seconds of the ``bdl.sample`` call, seconds from the process's start to the end of
    that call, seconds of the whole process with its exit, CPU seconds of the whole process:
    user + system over all its threads, steadier on a shared machine)."""
    code = CHILD.format(bench=str(Path(__file__).resolve().parent), cache=cache, steps=steps)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start, start_clock = time.perf_counter(), time.time()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    whole = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    call, call_end = (float(v) for v in out.stdout.strip().splitlines()[-1].split())
    return call, call_end - start_clock, whole, cpu


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args(argv)
    print(environment(), flush=True)
    rows: dict[str, list[float]] = {"no cache": [], "cold cache": [], "warm cache": []}
    to_end: dict[str, list[float]] = {name: [] for name in rows}
    wholes: dict[str, list[float]] = {name: [] for name in rows}
    cpus: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            for name, cache in (("no cache", ""), ("cold cache", tmp), ("warm cache", tmp)):
                call, end, whole, cpu = first_call(args.steps, cache)
                rows[name].append(call)
                to_end[name].append(end)
                wholes[name].append(whole)
                cpus[name].append(cpu)
    for name, values in rows.items():
        shown = ", ".join(f"{v:.2f}" for v in to_end[name])
        print(
            f"{name:<11} process start to the call's end {statistics.median(to_end[name]):5.2f} s "
            f"({shown}); the call {statistics.median(values):5.2f} s; whole process with its "
            f"exit {statistics.median(wholes[name]):5.2f} s ({statistics.median(cpus[name]):5.2f}"
            " s CPU)"
        )
    ratio = statistics.median(rows["warm cache"]) / statistics.median(rows["no cache"])
    print(f"warm / no cache: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

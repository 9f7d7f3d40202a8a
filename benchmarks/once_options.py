"""The programs a run compiles once, with XLA's default options and with ``ONCE_OPTIONS``.

``bdl.utils.owner_jit.ONCE_OPTIONS`` (LLVM's -O1, the loop emitters instead of the fusion
emitters) compiles, on a CPU, the programs that run once or a few times per run: the start
program (every chain's start, kernel state, stream and key), the full-data program the checks
after a run share and a Flax linen network's initialiser in ``bdl.compile``. For every shipped
model (``bdl/models/``) this script compiles each of them both ways, in one process, and
prints the compile times (process CPU seconds, steadier than wall time on a shared machine),
whether the two compilations compute the same values bitwise (NaN equal to NaN; else the
largest difference relative to the value's scale) and the wall time of a call of each. The
start program and the initialiser must give the same values (the exit status is 1 when one
does not): their outputs are where the chains start. The checks' program may differ by
rounding (it sums in another order); only the checks' statistics read it.

Run: ``python benchmarks/once_options.py [--models mlp_digits,eight_schools] [--chains 4]``
(``--skip`` names models to leave out; by default ``resnet20_cifar``, minutes on a CPU).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment, load_average

import bdl
from bdl.model_files import load_spec, model_names
from bdl.sampling.run import start
from bdl.sampling.verdict import full_data
from bdl.utils.owner_jit import ONCE_OPTIONS


def leaves(tree: Any) -> list[np.ndarray]:
    """The tree's arrays on the host, keys as their data."""
    out = []
    for leaf in jax.tree.leaves(tree):
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        out.append(np.asarray(leaf))
    return out


def both_ways(jitted: Any, *args: Any) -> dict[str, Any]:
    """Compiled with XLA's defaults and with ONCE_OPTIONS: the CPU seconds of each compilation
    (``compile``), the median wall seconds of a call of each (``run``, of 5 after a first),
    whether they compute the same values bitwise (``same``) and the largest difference relative
    to the value's scale (``relative``)."""
    jax.clear_caches()  # nothing compiled before (bdl.compile compiled the initialiser)
    lowered = jitted.lower(*args)
    seconds, runs, values = [], [], []
    for options in (None, ONCE_OPTIONS):
        before = time.process_time()
        compiled = lowered.compile(compiler_options=options)
        seconds.append(time.process_time() - before)
        values.append(leaves(compiled(*args)))
        times = []
        for _ in range(5):
            begin = time.perf_counter()
            jax.block_until_ready(compiled(*args))
            times.append(time.perf_counter() - begin)
        runs.append(statistics.median(times))
    same, relative = True, 0.0
    for a, b in zip(*values, strict=True):
        same &= a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
        if a.dtype.kind == "f" and a.size:
            scale = max(float(np.nanmax(np.abs(a), initial=0.0)), np.finfo(a.dtype).tiny)
            gap = np.abs(a.astype(np.float64) - b.astype(np.float64))
            relative = max(relative, float(np.nanmax(gap, initial=0.0)) / scale)
    return {"compile": seconds, "run": runs, "same": same, "relative": relative}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="", help="comma-separated (default: every shipped one)")
    p.add_argument("--skip", default="resnet20_cifar", help="comma-separated models to leave out")
    p.add_argument("--chains", type=int, default=4)
    args = p.parse_args(argv)
    names = [m for m in args.models.split(",") if m] or model_names()
    names = [m for m in names if m not in set(args.skip.split(","))]
    print(f"# once_options: {environment()}; {load_average()}", flush=True)
    print(f"# ONCE_OPTIONS = {ONCE_OPTIONS}; {args.chains} chains", flush=True)
    totals = np.zeros(2)
    differs = []
    for name in names:
        warnings.simplefilter("ignore")
        target = load_spec(name).compile()
        kernel = bdl.kernels.get("sgld", step_size=1e-5).bind(target)
        key = jax.random.key(0)
        begin = (target, kernel, None, key, args.chains, "auto", (0, args.chains))
        chains = start._start(*begin)[0]
        positions = jax.tree.map(lambda a: np.asarray(a)[:, None], kernel.position(chains.states))
        size = sum(int(np.prod(np.shape(a)[2:])) for a in jax.tree.leaves(positions))
        theta = jax.tree.map(lambda a: a[:, 0], positions)
        centre = jax.tree.map(np.zeros_like, theta)
        columns = jax.device_put(np.arange(full_data.width(size), dtype=np.int32) % size)
        programs = [
            ("start", start._start._jitted, begin),
            ("full_data_at", full_data._at_draws._jitted, (target, theta, centre, columns)),
        ]
        adapter = getattr(target, "adapter", None)
        if getattr(adapter, "flavour", None) == "linen":  # bdl.compile's initialiser
            programs.append(("network init", adapter.init, (key,)))
        for label, jitted, call in programs:
            got = both_ways(jitted, *call)
            (default, once), same = got["compile"], got["same"]
            totals += (default, once)
            verdict = "same values" if same else f"DIFFERS (by {got['relative']:.1e} of the scale)"
            if not same and label != "full_data_at":  # the checks' values: rounding allowed
                differs.append(f"{name}/{label}")
            runs = ", ".join(f"{r * 1e3:.1f}" for r in got["run"])
            print(
                f"{name:<24} {label:<13} compile {default:6.2f} s default, {once:6.2f} s once "
                f"({once / max(default, 1e-9):.2f}×); a call {runs} ms  {verdict}",
                flush=True,
            )
    print(
        f"# all: {totals[0]:.2f} s default, {totals[1]:.2f} s once ({totals[1] / totals[0]:.2f}×);"
        " starts and initialisers: "
        f"{'the same values' if not differs else 'DIFFER: ' + ', '.join(differs)}"
        f"; {load_average()}",
        flush=True,
    )
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())

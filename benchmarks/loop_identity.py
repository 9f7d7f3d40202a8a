"""Whether ``bdl.sample``'s draws depend on how its loop is cut, on this machine's backend.

On the digits MLP it runs one SGHMC run (4 chains, burn-in 300, 40 draws with thin 10) three
ways: as configured (on an accelerator, steps in blocks of static length, ``thin`` static);
with every call of the compiled loop cut to 3 steps (draws split across calls, the loop's
traced-length path); and with the loop unblocked (one step per iteration of a loop of traced
length, as on the CPU). It prints, for each variant, whether its draws and energies are
bitwise those of the first and the largest absolute difference.

On the CPU all three are the same program and the tests assert bitwise identity
(``tests/test_sampling_loop.py``); on an accelerator the variants are different XLA programs,
and this script says whether the compiler rounded them alike.

    python benchmarks/loop_identity.py
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import digits_mlp, environment

import bdl
from bdl.sampling import run as sampling_run


def run(compiled: Any) -> tuple[np.ndarray, np.ndarray]:
    kernel = bdl.kernels.get("sghmc", step_size=1e-3, friction=1.0)
    s = bdl.sample(
        compiled, kernel, num_steps=700, burn_in=300, thin=10, num_chains=4, progress=False
    )
    theta = np.concatenate([np.ravel(x) for x in jax.tree.leaves(s.positions)])
    return theta, np.asarray(s.info["energy"])


def patched(obj: Any, **attrs: Any) -> Callable[[Callable[[], Any]], Any]:
    """Call ``fn()`` with ``obj``'s attributes replaced, then restored."""

    def call(fn: Callable[[], Any]) -> Any:
        saved = {k: getattr(obj, k) for k in attrs}
        for k, v in attrs.items():
            setattr(obj, k, v)
        try:
            return fn()
        finally:
            for k, v in saved.items():
                setattr(obj, k, v)

    return call


def main() -> None:
    print(f"# loop_identity: {environment()}")
    print(f"# loop block on this backend: {sampling_run.loop_block()}")
    compiled = digits_mlp()
    t0 = time.perf_counter()
    base = run(compiled)
    sizer = sampling_run._ChunkSizer
    variants = {
        "calls of 3 steps": lambda: patched(
            sizer, FIRST=3, _reached={}, record=lambda self, steps, seconds: None
        )(lambda: run(compiled)),
        "unblocked loop": lambda: patched(sampling_run, loop_block=lambda: 1)(
            lambda: run(compiled)
        ),
    }
    for name, fn in variants.items():
        theta, energy = fn()
        same = np.array_equal(theta, base[0]) and np.array_equal(energy, base[1])
        diff = max(np.max(np.abs(theta - base[0])), np.max(np.abs(energy - base[1])))
        print(f"{name:<18} bitwise identical: {same}   largest |difference|: {diff:.3g}")
    print(f"# {time.perf_counter() - t0:.1f} s")
    jax.clear_caches()


if __name__ == "__main__":
    main()

"""Whether ``bdl.sample``'s draws depend on how its loop is cut, on this machine's backend.

On the digits MLP it runs SGHMC runs of 8, 40 and 200 steps (2 chains, no burn-in, thin 2, 4,
10) and one of 700 (4 chains, burn-in 300, 40 draws with thin 10), each three ways: as
configured (on an accelerator, steps in blocks of static length, ``thin`` static); with every
call of the compiled loop cut to 3 steps (draws split across calls, the loop's traced-length
path); and with the loop unblocked (one step per iteration of a loop of traced length, as on
the CPU). It prints, for each variant, whether its draws and energies are bitwise those of the
first and the largest absolute difference.

On the CPU all three are the same program and the tests assert bitwise identity
(``tests/test_sampling_loop.py``); on an accelerator the variants are different XLA programs,
and this script says whether the compiler rounded them alike.

    python benchmarks/loop_identity.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import digits_mlp, environment

import bdl
from bdl.sampling import FixedChunks, LoopOptions
from bdl.sampling.run.loop_options import default_block

#: (num_steps, burn_in, thin, num_chains) of the runs compared
RUNS = ((8, 0, 2, 2), (40, 0, 4, 2), (200, 0, 10, 2), (700, 300, 10, 4))


def run(
    compiled: Any, steps: int, burn_in: int, thin: int, chains: int, loop: Any = None
) -> tuple[Any, Any]:
    kernel = bdl.kernels.get("sghmc", step_size=1e-3, friction=1.0)
    s = bdl.sample(
        compiled,
        kernel,
        num_steps=steps,
        burn_in=burn_in,
        thin=thin,
        num_chains=chains,
        progress=False,
        loop=loop,
    )
    theta = np.concatenate([np.ravel(x) for x in jax.tree.leaves(s.positions)])
    return theta, np.asarray(s.info["energy"])


def main() -> None:
    print(f"# loop_identity: {environment()}")
    compiled = digits_mlp()
    print(f"# loop block on this backend: {default_block()}")
    t0 = time.perf_counter()
    variants = {
        "calls of 3 steps": LoopOptions(chunks=FixedChunks(3)),
        "unblocked loop": LoopOptions(block=1),
    }
    for settings in RUNS:
        base = run(compiled, *settings)
        steps, burn_in, thin, chains = settings
        print(f"{steps} steps (burn-in {burn_in}, thin {thin}, {chains} chains):")
        for name, loop in variants.items():
            theta, energy = run(compiled, *settings, loop=loop)
            same = np.array_equal(theta, base[0]) and np.array_equal(energy, base[1])
            diff = max(np.max(np.abs(theta - base[0])), np.max(np.abs(energy - base[1])))
            print(f"  {name:<18} bitwise identical: {same}   largest |difference|: {diff:.3g}")
    print(f"# {time.perf_counter() - t0:.1f} s")
    jax.clear_caches()


if __name__ == "__main__":
    main()

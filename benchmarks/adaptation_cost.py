"""The cost of warm-up adaptation: burn-in per step with adaptation against burn-in without, and
the sampling phase of an adapted kernel against the same kernel given fixed values.

On the digits MLP (d = 17,610, B = 32), 4 chains: ``bdl.kernels.get(name)`` (adapting) and the
same kernel with a step size (and friction), each run twice per round (compile excluded by a
warm-up call), rounds interleaved. Prints seconds per step of burn-in and of sampling and their
ratios, measured side by side in one process (targets: burn-in ≤ 1.3×, sampling 1.0×). Each
figure is a difference of runs that differ only in their burn-in or sampling length, so setup
and compilation cancel.

    python benchmarks/adaptation_cost.py [--burn-in 2000] [--steps 2000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import bdl
from bdl.model_files import load_spec


def _run(target, kernel, burn_in: int, sampling: int, seed: int) -> float:
    """Wall seconds of a run with one draw at its end (one compiled chunk shape for all)."""
    start = time.perf_counter()
    bdl.sample(
        target,
        kernel,
        num_steps=burn_in + sampling,
        burn_in=burn_in,
        thin=sampling,
        num_chains=4,
        seed=seed,
    )
    return time.perf_counter() - start


def timed(target, kernel, burn_in: int, steps: int, seed: int) -> tuple[float, float]:
    """(burn-in, sampling) seconds per step: differences of runs that add ``burn_in`` steps of
    burn-in or ``steps`` steps of sampling, so setup and compilation cancel."""
    base = _run(target, kernel, burn_in, steps, seed)
    more_burn = _run(target, kernel, 2 * burn_in, steps, seed)
    more_sampling = _run(target, kernel, burn_in, 2 * steps, seed)
    return (more_burn - base) / burn_in, (more_sampling - base) / steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--burn-in", type=int, default=2_000)
    p.add_argument("--steps", type=int, default=2_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--kernels", default="sgld,sghmc")
    args = p.parse_args()
    target = load_spec("mlp_digits").compile()
    print(f"# load average {os.getloadavg()[0]:.2f}; digits MLP d = {target.dim}, 4 chains")
    fixed = {"sgld": {"step_size": 1e-4}, "sghmc": {"step_size": 1e-3, "friction": 1.0}}
    for name in args.kernels.split(","):
        candidates = {
            "adapted": bdl.kernels.get(name),
            "fixed": bdl.kernels.get(name, **fixed[name]),
        }
        for kernel in candidates.values():  # compile every chunk and window shape
            timed(target, kernel, args.burn_in, args.steps, 0)
        times = {k: [] for k in candidates}
        for r in range(args.repeats):
            for label, kernel in candidates.items():
                times[label].append(timed(target, kernel, args.burn_in, args.steps, r))
        med = {k: np.median(np.asarray(v), axis=0) for k, v in times.items()}
        b_a, s_a = med["adapted"] * 1e6
        b_f, s_f = med["fixed"] * 1e6
        print(
            f"{name:<6} burn-in µs/step adapted {b_a:8.1f} fixed {b_f:8.1f} ratio {b_a / b_f:5.2f}"
            f" (target ≤ 1.3) | sampling adapted {s_a:8.1f} fixed {s_f:8.1f} ratio "
            f"{s_a / s_f:5.2f}"
        )


if __name__ == "__main__":
    main()

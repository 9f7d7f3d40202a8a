"""What ``bdl.sample``'s loop adds to a kernel's step, for every hand-designed kernel.

On the digits MLP (``_common.digits_mlp``, B = 32) it times, side by side in one run and for 1
and for 8 chains,

  (bare)   ``kernel.step`` in a jitted ``lax.scan`` of S steps from the chains' starts in
           ``bdl.sample`` (same positions, states, minibatch streams and keys), the kernel's own
           (h_t, T_t), the step's ``Info`` left to dead-code elimination; 8 chains under
           ``vmap``, one chain without a chain axis;
  (sample) ``bdl.sample(compiled, kernel, num_steps=S, thin=S, num_chains=C)`` per step, its
           fixed per-call cost removed: (time(S) − time(1)) / (S − 1).

The target (docs/design.md, *Performance targets*) is sample / bare ≤ 1.02. Calls are timed in
interleaved rounds; a ratio is the median of the per-round ratios, printed with its range; the
load average is printed before and after.

Run: ``python benchmarks/loop_overhead.py [--steps 1000] [--repeats 5] [--chains 1,8]
[--kernels sgld,sghmc,...]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from functools import partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import digits_mlp, environment, load_average, time_interleaved
from kernel_costs import build_kernel

import bdl

TARGET = 1.02
HAND_DESIGNED = ("sgld", "psgld", "sghmc", "sgnht", "wenzel", "cyclical", "entropy")
#: kernel_costs' pSGLD step diverges in some of 8 chains within 1000 steps; a diverged chain
#: would be timed with the replay that locates its divergence step, so it is made smaller here
STEP_SIZES = {"psgld": 5e-9}


def bare_scan(compiled: Any, kernel: Any, steps: int, chains: int) -> Any:
    """A jitted S-step ``lax.scan`` of ``kernel.step`` and its initial carry, as a thunk.

    The chains start where ``bdl.sample(..., seed=0)`` starts them (the same positions, kernel
    states, minibatch streams and chain keys), so both loops do the same arithmetic.
    """
    kernel = kernel.bind(compiled)
    k_init, k_kernel, k_batch, k_run = jax.random.split(jax.random.key(0), 4)
    positions = compiled.init_positions(k_init, chains, "auto")
    states = jax.vmap(kernel.init)(positions, jax.random.split(k_kernel, chains))
    streams = jax.vmap(compiled.init_batches)(jax.random.split(k_batch, chains))
    keys = jax.random.split(k_run, chains)
    ts = jnp.arange(steps, dtype=jnp.int32)

    def one(state: Any, stream: Any, ckey: jax.Array, t: jax.Array) -> tuple[Any, Any]:
        batch, stream = compiled.next_batch(stream, t)
        h, temperature = kernel.hyper(t, compiled.temperature(t))
        grad_fn = partial(compiled.stochastic_energy_and_grad, batch=batch)
        state, _ = kernel.step(jax.random.fold_in(ckey, t), state, grad_fn, h, temperature)
        return state, stream

    if chains == 1:
        carry = jax.tree.map(lambda x: x[0], (states, streams))

        def body(c: Any, t: jax.Array) -> tuple[Any, None]:
            return one(*c, keys[0], t), None
    else:
        carry = (states, streams)

        def body(c: Any, t: jax.Array) -> tuple[Any, None]:
            return jax.vmap(one, in_axes=(0, 0, 0, None))(*c, keys, t), None

    exe = jax.jit(lambda c: jax.lax.scan(body, c, ts)[0]).lower(carry).compile()
    return partial(exe, carry)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1000, help="steps S per call (default 1000)")
    ap.add_argument("--repeats", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--chains", default="1,8", help="chain counts (default 1,8)")
    ap.add_argument("--kernels", default=",".join(HAND_DESIGNED), help="kernel names")
    args = ap.parse_args(argv)
    if args.steps < 2 or args.repeats < 1:
        ap.error("--steps must be >= 2 and --repeats >= 1")
    S, R = args.steps, args.repeats
    chain_counts = [int(c) for c in args.chains.split(",")]
    names = args.kernels.split(",")

    print(f"# loop_overhead: {environment()}")
    compiled = digits_mlp()
    print(
        f"# digits MLP: n = {compiled.n}, d = {compiled.dim}, batch = {compiled.batch_size}; "
        f"S = {S} steps per call, {R} interleaved rounds"
    )
    print(f"{'kernel':<10}{'chains':>7}{'bare µs':>10}{'sample µs':>11}{'ratio':>8}"
          f"{'range':>16}  verdict")  # fmt: skip
    worst = 0.0
    for name in names:
        kernel = build_kernel(name)
        if name in STEP_SIZES:
            kernel = dataclasses.replace(kernel, step_size=STEP_SIZES[name])
        for chains in chain_counts:
            run = partial(bdl.sample, compiled, kernel, num_chains=chains, progress=False)
            fns = {
                "bare": bare_scan(compiled, kernel, S, chains),
                "sample": lambda run=run: run(num_steps=S, thin=S).positions,
                "sample1": lambda run=run: run(num_steps=1, thin=1).positions,
            }
            for fn in fns.values():  # compile and warm up
                jax.block_until_ready(fn())
            diverged = run(num_steps=S, thin=S).diverged
            if diverged.any():
                print(f"{name:<10}{chains:>7}  {diverged.sum()} chain(s) diverged: not timed")
                continue
            wall, _ = time_interleaved(fns, R)
            pairs = zip(wall["sample"], wall["sample1"], strict=True)
            per_step = [(a - b) / (S - 1) for a, b in pairs]
            bare = [b / S for b in wall["bare"]]
            ratios = [a / b for a, b in zip(per_step, bare, strict=True)]
            ratio = statistics.median(ratios)
            worst = max(worst, ratio)
            print(
                f"{name:<10}{chains:>7}{statistics.median(bare) * 1e6:>10.1f}"
                f"{statistics.median(per_step) * 1e6:>11.1f}{ratio:>8.3f}"
                f"{f'[{min(ratios):.3f}, {max(ratios):.3f}]':>16}  "
                f"{'ok' if ratio <= TARGET else 'ABOVE TARGET'}",
                flush=True,
            )
    print(f"# done, {load_average()}; worst median ratio {worst:.3f} (target ≤ {TARGET})")


if __name__ == "__main__":
    main()

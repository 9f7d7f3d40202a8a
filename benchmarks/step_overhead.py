"""Per-step cost of the sampling kernels against an SGD step and a Gaussian draw (DESIGN §8).

On the digits MLP (1797 × 64, Flax linen 64→100→100→10, Categorical, N(0, 1) prior, B = 32) it
times, side by side in one run, a jitted ``lax.scan`` of S steps of

  (a) ``optax.sgd(lr, momentum=0.9)`` on the mean minibatch loss Ũ/n,
  (b) one Gaussian draw of the parameter dimension d (``fold_in`` key per step),
  (a+b) both in one scan (an SGD step whose momentum gets the draw added: hand-written SGHMC),
  (c) ``kernel.step`` of SGHMC and SGLD through the kernel protocol (the per-step ``Info`` left to
      dead-code elimination, and, separately, kept in the carry as ``bdl.sample`` does),
  (d) the whole ``bdl.sample(..., num_steps=S, thin=S)`` (second call), with its fixed per-call
      cost (``num_steps=1``) separated from the per-step cost,

with identical minibatch gathering (``compiled.next_batch``) and gradient
(``compiled.stochastic_energy_and_grad``) everywhere. Times are medians over ``--repeats`` calls,
compilation excluded. It then reports ``bdl.sample``'s first-call compile time (target ≤ 3 s),
checks that a second call compiles nothing, and with ``--chains`` the chain-steps/s of
``bdl.sample`` for 1, 2, 4, 8 chains under ``vmap``. ``--hlo`` prints the loop bodies' HLO op
counts. Run: ``python benchmarks/step_overhead.py [--steps 1000] [--repeats 5] [--chains]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bdl  # noqa: E402
from _common import (  # noqa: E402
    CompileCounter,
    digits_mlp,
    environment,
    loop_body_stats,
    time_call,
)

TARGET_RATIO = 1.05
TARGET_COMPILE_S = 3.0


# ---------------------------------------------------------------------------- the scans
def make_scans(compiled: Any, kernels: dict[str, Any], steps: int, lr: float) -> dict[str, Any]:
    """``{name: (jitted fn, initial carry)}``; each fn runs ``steps`` steps in one ``lax.scan``."""
    key = jax.random.key(0)
    k_batch, k_kernel, k_noise = jax.random.split(key, 3)
    params = compiled.initial_position
    stream = compiled.init_batches(k_batch)
    n, d = compiled.n, compiled.dim
    ts = jnp.arange(steps, dtype=jnp.int32)
    opt = optax.sgd(lr, momentum=0.9)

    def mean_grad(p: Any, stream: Any, t: jax.Array) -> tuple[Any, Any]:
        batch, stream = compiled.next_batch(stream, t)
        _, g = compiled.stochastic_energy_and_grad(p, batch)
        return jax.tree.map(lambda x: x / n, g), stream

    def draw(t: jax.Array) -> jax.Array:
        return jax.random.normal(jax.random.fold_in(k_noise, t), (d,))

    def scan(body: Any) -> Any:
        return jax.jit(lambda carry: jax.lax.scan(body, carry, ts)[0])

    def sgd_body(carry: Any, t: jax.Array) -> tuple[Any, None]:
        p, opt_state, stream = carry
        g, stream = mean_grad(p, stream, t)
        updates, opt_state = opt.update(g, opt_state, p)
        return (optax.apply_updates(p, updates), opt_state, stream), None

    def draw_body(acc: jax.Array, t: jax.Array) -> tuple[jax.Array, None]:
        return acc + draw(t), None

    # SGD momentum step + one draw added to the momentum: SGHMC written by hand (flat tree maps,
    # no recipe), i.e. the cheapest possible fused "sgd + draw".
    noise_scale = 1e-3

    def fused_body(carry: Any, t: jax.Array) -> tuple[Any, None]:
        p, m, stream = carry
        g, stream = mean_grad(p, stream, t)
        _, unravel = ravel_pytree(p)
        xi = unravel(draw(t))
        m = jax.tree.map(lambda m, g, e: 0.9 * m + g + noise_scale * e, m, g, xi)
        return (jax.tree.map(lambda p, m: p - lr * m, p, m), m, stream), None

    out = {
        "sgd": (scan(sgd_body), (params, opt.init(params), stream)),
        "draw": (scan(draw_body), jnp.zeros((d,), jnp.float32)),
        "sgd+draw": (scan(fused_body), (params, jax.tree.map(jnp.zeros_like, params), stream)),
    }

    for name, kernel in kernels.items():
        kernel = kernel.bind(compiled)
        state = kernel.init(params, k_kernel)

        def kernel_body(carry: Any, t: jax.Array, kernel: Any = kernel, keep_info: bool = False
                        ) -> tuple[Any, None]:
            state, stream, info = carry
            batch, stream = compiled.next_batch(stream, t)
            h, temperature = kernel.hyper(t, compiled.temperature(t))
            grad_fn = partial(compiled.stochastic_energy_and_grad, batch=batch)
            state, new_info = kernel.step(jax.random.fold_in(k_kernel, t), state, grad_fn, h,
                                          temperature)
            return (state, stream, new_info if keep_info else info), None

        info0 = jax.eval_shape(lambda s, k=kernel: k.step(
            k_kernel, s, partial(compiled.stochastic_energy_and_grad,
                                 batch=compiled.next_batch(stream, 0)[0]),
            jnp.float32(1e-3), jnp.float32(1.0))[1], state)
        info0 = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), info0)
        out[name] = (scan(kernel_body), (state, stream, info0))
        out[f"{name}+info"] = (scan(partial(kernel_body, keep_info=True)), (state, stream, info0))
    return out


def finite(tree: Any) -> bool:
    return all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(tree)
               if jnp.issubdtype(x.dtype, jnp.floating))


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1000, help="steps S per scan (default 1000)")
    ap.add_argument("--repeats", type=int, default=7, help="timed repeats, median (default 7)")
    ap.add_argument("--batch-size", type=int, default=32, help="minibatch size (default 32)")
    ap.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (default 0.05)")
    ap.add_argument("--chains", action="store_true",
                    help="also sweep bdl.sample over 1, 2, 4, 8 chains (chain-steps/s)")
    ap.add_argument("--hlo", action="store_true",
                    help="print the op counts of each scan's optimised HLO loop body")
    args = ap.parse_args(argv)
    if args.steps < 2 or args.repeats < 1:
        ap.error("--steps must be >= 2 and --repeats >= 1")
    S, R = args.steps, args.repeats
    compiles = CompileCounter.install()

    print(f"# step_overhead: {environment()}")
    compiled = digits_mlp(batch_size=args.batch_size)
    print(f"# digits MLP: n = {compiled.n}, d = {compiled.dim}, batch = {compiled.batch_size}, "
          f"S = {S} steps per scan, median of {R} repeats")
    kernels = {
        "sghmc": bdl.kernels.get("sghmc", step_size=1e-3, friction=1.0),
        "sgld": bdl.kernels.get("sgld", step_size=1e-4),
    }

    # ---- (a)-(c): scans under jit
    scans = make_scans(compiled, kernels, S, args.lr)
    per_step: dict[str, float] = {}
    spread: dict[str, tuple[float, float]] = {}
    hlo: dict[str, dict[str, Any]] = {}
    for name, (fn, carry) in scans.items():
        lowered = fn.lower(carry)
        exe = lowered.compile()
        if args.hlo:
            hlo[name] = loop_body_stats(exe.as_text())
        result = jax.block_until_ready(fn(carry))  # warm-up (and jit's own compile)
        if not finite(result):
            print(f"# warning: {name} produced non-finite values")
        med, times = time_call(lambda fn=fn, carry=carry: fn(carry), R)
        per_step[name] = med / S
        spread[name] = (min(times) / S, max(times) / S)

    # ---- (d): the whole bdl.sample
    sample_rows: dict[str, float] = {}
    fixed: dict[str, float] = {}
    compile_report = []
    for name, kernel in kernels.items():
        run = partial(bdl.sample, compiled, kernel, num_chains=1, progress=False)
        c0, s0 = compiles.snapshot()
        start = time.perf_counter()
        jax.block_until_ready(run(num_steps=S, thin=S).positions)
        first = time.perf_counter() - start
        c1, s1 = compiles.snapshot()
        med, _ = time_call(lambda run=run: run(num_steps=S, thin=S).positions, R)
        c2, _ = compiles.snapshot()
        med1, _ = time_call(lambda run=run: run(num_steps=1, thin=1).positions, R)
        c3, _ = compiles.snapshot()
        sample_rows[name] = med / S
        fixed[name] = med1
        compile_report.append((name, first, c1 - c0, s1 - s0, med, c2 - c1, c3 - c2))

    # ---- table
    sgd, drw = per_step["sgd"], per_step["draw"]
    print()
    print(f"{'what':<34}{'µs/step':>10}{'min':>9}{'max':>9}{'/ sgd':>9}{'/ (sgd+draw)':>14}")

    def row(label: str, sec: float, lo: float | None = None, hi: float | None = None) -> None:
        lo_s = f"{lo * 1e6:9.1f}" if lo is not None else f"{'':9}"
        hi_s = f"{hi * 1e6:9.1f}" if hi is not None else f"{'':9}"
        print(f"{label:<34}{sec * 1e6:10.1f}{lo_s}{hi_s}{sec / sgd:9.2f}"
              f"{sec / (sgd + drw):14.2f}")

    row("(a) optax.sgd momentum step", sgd, *spread["sgd"])
    row("(b) gaussian draw, d floats", drw, *spread["draw"])
    row("    (a) + (b), separate scans", sgd + drw)
    row("    (a+b) fused: hand-written SGHMC", per_step["sgd+draw"], *spread["sgd+draw"])
    for name in kernels:
        row(f"(c) {name} kernel.step", per_step[name], *spread[name])
        row(f"    {name} kernel.step + Info kept", per_step[f"{name}+info"],
            *spread[f"{name}+info"])
    for name in kernels:
        row(f"(d) bdl.sample {name}, per step", sample_rows[name])
        marginal = (sample_rows[name] * S - fixed[name]) / (S - 1)
        row("    marginal (minus fixed cost)", marginal)
    print()
    for name in kernels:
        ratio = per_step[name] / (sgd + drw)
        verdict = "ok" if ratio <= TARGET_RATIO else "ABOVE TARGET"
        print(f"DESIGN §8 {name}: kernel.step / (sgd + draw) = {ratio:.3f} "
              f"(target ≤ {TARGET_RATIO}) -> {verdict}; / fused sgd+draw = "
              f"{per_step[name] / per_step['sgd+draw']:.3f}")
    for name, first, ncomp, scomp, med, again, again1 in compile_report:
        verdict = "ok" if first <= TARGET_COMPILE_S else "ABOVE TARGET"
        print(f"bdl.sample {name}: first call {first:.2f} s ({ncomp} XLA compilation(s), "
              f"{scomp:.2f} s in the XLA backend; target ≤ {TARGET_COMPILE_S} s -> {verdict}); "
              f"second call {med * 1e3:.1f} ms with {again} new compilation(s)"
              f"{' (no recompile)' if again == 0 else ' (RECOMPILED)'}; num_steps=1 call "
              f"{fixed[name] * 1e3:.2f} ms fixed cost, {again1} new compilation(s)")

    if args.hlo:
        print()
        print("optimised HLO of each scan's loop body (thunks = top-level ops that run per step, "
              "fused = ops inside their fusions):")
        for name, stats in hlo.items():
            ops = ", ".join(f"{k} {v}" for k, v in stats["ops"].most_common())
            print(f"  {name:<12} thunks {stats['thunks']:>3}  fused {stats['fused']:>4}  | {ops}")

    if args.chains:
        print()
        print("bdl.sample throughput under vmap (sghmc, second call; DESIGN: rises with chains):")
        print(f"{'chains':>8}{'s/call':>10}{'chain-steps/s':>16}{'µs/chain-step':>16}")
        kernel = kernels["sghmc"]
        for c in (1, 2, 4, 8):
            run = partial(bdl.sample, compiled, kernel, num_steps=S, thin=S, num_chains=c,
                          progress=False)
            jax.block_until_ready(run().positions)
            med, _ = time_call(lambda run=run: run().positions, max(3, R // 2))
            print(f"{c:>8}{med:>10.3f}{c * S / med:>16.0f}{med / (c * S) * 1e6:>16.1f}")


if __name__ == "__main__":
    main()

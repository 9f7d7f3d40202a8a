"""Per-step cost of the sampling kernels against an SGD step and a Gaussian draw.

The targets are those of docs/design.md, *Performance targets*.

On the digits MLP (1797 × 64, Flax linen 64→100→100→10, Categorical, N(0, 1) prior, B = 32) it
times, side by side in one run, a jitted ``lax.scan`` of S steps of

  (a) ``optax.sgd(lr, momentum=0.9)`` on the mean minibatch loss Ũ/n,
  (b) one Gaussian draw of the parameter dimension d (``fold_in`` key per step),
  (a+b) both in one scan (an SGD step whose momentum gets the draw added: hand-written SGHMC),
  (c) ``kernel.step`` of SGHMC (h = 1e-3, C = 1) and SGLD (h = 1e-4) through the kernel protocol,
      the per-step ``Info`` left to dead-code elimination (for SGHMC also kept in the carry:
      what recording every step costs; ``bdl.sample`` computes it at recorded steps only),
  (d) the whole ``bdl.sample(..., num_steps=S, thin=S)`` (second call), with its fixed per-call
      cost (``num_steps=1``) separated from the per-step cost, and its compiled loop alone
      (the program of that call, called again with the same arguments: no host-side work),

with identical minibatch gathering (``compiled.next_batch``) and gradient
(``compiled.stochastic_energy_and_grad``) everywhere. All candidates are timed in interleaved
rounds (one call of each per round) so background load hits them alike; a time is the median over
``--repeats`` rounds, a ratio the median of the per-round ratios; compilation is excluded. It then
reports ``bdl.sample``'s first-call compile time (target ≤ 3 s), checks that later calls with the
same shapes compile nothing, and with ``--chains`` the chain-steps/s of ``bdl.sample`` for 1, 2, 4,
8 chains under ``vmap``. ``--hlo`` prints the loop bodies' HLO op counts.

Run: ``python benchmarks/step_overhead.py [--steps 1000] [--repeats 5] [--batch-size 32]
[--chains] [--hlo] [--unblocked]``.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    CompileCounter,
    digits_mlp,
    environment,
    load_average,
    loop_body_stats,
    recorded_calls,
    time_interleaved,
)

import bdl
from bdl.sampling import LoopOptions
from bdl.sampling.run import program
from bdl.sampling.run.loop_options import default_block
from bdl.utils.convolutions import canonical_convolutions

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
        return jax.jit(lambda carry: jax.lax.scan(canonical_convolutions(body), carry, ts)[0])

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

        def kernel_body(
            carry: Any, t: jax.Array, kernel: Any = kernel, keep_info: bool = False
        ) -> tuple[Any, None]:
            state, stream, info = carry
            batch, stream = compiled.next_batch(stream, t)
            h, temperature = kernel.hyper(t, compiled.temperature(t))
            grad_fn = partial(compiled.stochastic_energy_and_grad, batch=batch)
            state, new_info = kernel.step(
                jax.random.fold_in(k_kernel, t), state, grad_fn, h, temperature
            )
            return (state, stream, new_info if keep_info else info), None

        info0 = jax.eval_shape(
            lambda s, k=kernel: k.step(
                k_kernel,
                s,
                partial(
                    compiled.stochastic_energy_and_grad, batch=compiled.next_batch(stream, 0)[0]
                ),
                jnp.float32(1e-3),
                jnp.float32(1.0),
            )[1],
            state,
        )
        info0 = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), info0)
        out[name] = (scan(kernel_body), (state, stream, info0))
        if name == "sghmc":  # the Info of every step kept: what recording every step costs
            out[f"{name}+info"] = (
                scan(partial(kernel_body, keep_info=True)),
                (state, stream, info0),
            )
    return out


def finite(tree: Any) -> bool:
    return all(
        bool(jnp.all(jnp.isfinite(x)))
        for x in jax.tree.leaves(tree)
        if jnp.issubdtype(x.dtype, jnp.floating)
    )


# ---------------------------------------------------------------------------- main
def first_sample_call(
    compiled: Any, kernel: Any, steps: int, counter: CompileCounter
) -> tuple[float, int, float]:
    """Wall time, XLA compilations and XLA seconds of a first ``bdl.sample`` call."""
    c0, s0 = counter.snapshot()
    start = time.perf_counter()
    jax.block_until_ready(
        bdl.sample(compiled, kernel, num_steps=steps, thin=steps, progress=False).positions
    )
    wall = time.perf_counter() - start
    c1, s1 = counter.snapshot()
    return wall, c1 - c0, s1 - s0


def loop_alone(args: tuple, kwargs: dict) -> Any:
    """A call of the compiled loop as ``bdl.sample`` made it (``run_chunk(*args, **kwargs)``),
    repeatable: each call gets the draw buffers the last one returned (they are donated)."""
    state = {"kwargs": kwargs}

    def call() -> Any:
        chains, buffers = program.run_chunk(*args, **state["kwargs"])
        state["kwargs"] = {**state["kwargs"], "buffers": buffers}
        return chains

    return call


@contextlib.contextmanager
def count_chunk_calls(fns: dict[str, Any]) -> Iterator[dict[str, list[int]]]:
    """Wraps the ``bdl.sample`` candidates of ``fns`` in place to count, per call, how many
    calls of the compiled loop (chunks) it made; yields ``{name: [count per call]}``."""
    counts: dict[str, list[int]] = {}
    with recorded_calls(program, "run_chunk") as calls:

        def wrap(name: str, fn: Any) -> Any:
            def call() -> Any:
                before = len(calls)
                out = fn()
                counts[name].append(len(calls) - before)
                return out

            return call

        for name in [n for n in fns if n.startswith(("sample", "unblocked"))]:
            counts[name] = []
            fns[name] = wrap(name, fns[name])
        yield counts


def median_ratio(num: list[float], den: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(num, den, strict=True))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1000, help="steps S per scan (default 1000)")
    ap.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="timed rounds, all candidates interleaved per round (default 5)",
    )
    ap.add_argument("--batch-size", type=int, default=32, help="minibatch size (default 32)")
    ap.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (default 0.05)")
    ap.add_argument(
        "--chains",
        action="store_true",
        help="also sweep bdl.sample (sghmc) over 1, 2, 4, 8 chains: chain-steps/s",
    )
    ap.add_argument(
        "--unblocked",
        action="store_true",
        help="on an accelerator, also time bdl.sample with its loop unblocked (one step per "
        "iteration of a loop of traced length, as on the CPU): before/after of the blocked loop",
    )
    ap.add_argument(
        "--hlo",
        action="store_true",
        help="print the op counts of each scan's optimised HLO loop body",
    )
    args = ap.parse_args(argv)
    if args.steps < 2 or args.repeats < 1 or args.batch_size < 1:
        ap.error("--steps must be >= 2, --repeats >= 1 and --batch-size >= 1")
    S, R = args.steps, args.repeats
    counter = CompileCounter.install()
    unblocked = args.unblocked and default_block() > 1

    print(f"# step_overhead: {environment()}")
    compiled = digits_mlp(batch_size=args.batch_size)
    print(
        f"# digits MLP 64-100-100-10: n = {compiled.n}, d = {compiled.dim}, batch = "
        f"{compiled.batch_size}; S = {S} steps per call, {R} interleaved rounds"
    )
    kernels = {
        "sghmc": bdl.kernels.get("sghmc", step_size=1e-3, friction=1.0),
        "sgld": bdl.kernels.get("sgld", step_size=1e-4),
    }

    # ---- (d) first: bdl.sample's first call is the first thing a user's session compiles
    first = {name: first_sample_call(compiled, k, S, counter) for name, k in kernels.items()}

    # ---- (a)-(c): scans under jit, compiled and warmed up
    scans = make_scans(compiled, kernels, S, args.lr)
    fns: dict[str, Any] = {}
    compile_s: dict[str, float] = {}
    hlo: dict[str, dict[str, Any]] = {}
    for name, (fn, carry) in scans.items():
        start = time.perf_counter()
        exe = fn.lower(carry).compile()
        compile_s[name] = time.perf_counter() - start
        if args.hlo:
            hlo[name] = loop_body_stats(exe.as_text())
        if not finite(jax.block_until_ready(exe(carry))):
            print(f"# warning: {name} produced non-finite values")
        fns[name] = partial(exe, carry)
    for name, kernel in kernels.items():
        run = partial(bdl.sample, compiled, kernel, progress=False)
        fns[f"sample:{name}"] = lambda run=run: run(num_steps=S, thin=S).positions
        fns[f"sample1:{name}"] = lambda run=run: run(num_steps=1, thin=1).positions
        if unblocked:
            flat = partial(run, loop=LoopOptions(block=1))  # one step per loop iteration
            fns[f"unblocked:{name}"] = lambda run=flat: run(num_steps=S, thin=S).positions
            fns[f"unblocked1:{name}"] = lambda run=flat: run(num_steps=1, thin=1).positions
    programs = {}
    for name in list(fns):  # bdl.sample's variants compiled before the timed rounds (on an
        # accelerator a 1-step call with thin 1 is a program of its own)
        if name.startswith(("sample", "unblocked")):
            jax.block_until_ready(fns[name]())
            if name.startswith("sample"):  # its compiled loop alone, called again as it was
                with recorded_calls(program, "run_chunk") as calls:
                    jax.block_until_ready(fns[name]())
                args, kwargs = calls[-1]
                programs[name.replace("sample", "loop", 1)] = loop_alone(args, kwargs)
    fns.update(programs)

    c_before, _ = counter.snapshot()
    with count_chunk_calls(fns) as chunk_calls:
        times, cpu = time_interleaved(fns, R)
    recompiles = counter.snapshot()[0] - c_before
    print(f"# timed rounds done, {load_average()}")

    # ---- table
    sgd, drw = times["sgd"], times["draw"]
    both = [a + b for a, b in zip(sgd, drw, strict=True)]
    print()
    cpu_both = [a + b for a, b in zip(cpu["sgd"], cpu["draw"], strict=True)]
    print(
        f"{'per step':<40}{'median µs':>10}{'min µs':>9}{'/ sgd':>7}{'/ (sgd+draw)':>13}"
        f"{'cpu µs':>9}{'cpu /(s+d)':>11}{'compile s':>10}"
    )

    def row(label: str, ts: list[float], cs: list[float], comp: str | None = None) -> None:
        med, lo = statistics.median(ts) / S, min(ts) / S
        c = f"{compile_s[comp]:10.2f}" if comp else ""
        print(
            f"{label:<40}{med * 1e6:10.1f}{lo * 1e6:9.1f}{median_ratio(ts, sgd):7.2f}"
            f"{median_ratio(ts, both):13.2f}{statistics.median(cs) / S * 1e6:9.1f}"
            f"{median_ratio(cs, cpu_both):11.2f}{c}"
        )

    row("(a) optax.sgd momentum step", sgd, cpu["sgd"], comp="sgd")
    row("(b) gaussian draw of d floats", drw, cpu["draw"], comp="draw")
    row("    (a) + (b), separate scans", both, cpu_both)
    row(
        "    (a+b) in one scan: hand-written SGHMC",
        times["sgd+draw"],
        cpu["sgd+draw"],
        comp="sgd+draw",
    )
    for name in kernels:
        row(f"(c) {name} kernel.step", times[name], cpu[name], comp=name)
        if f"{name}+info" in times:
            row(
                f"    {name} kernel.step, Info kept",
                times[f"{name}+info"],
                cpu[f"{name}+info"],
                comp=f"{name}+info",
            )

    def per_step(t: dict[str, list[float]], name: str, loop: str = "sample") -> list[float]:
        full, one = t[f"{loop}:{name}"], t[f"{loop}1:{name}"]
        return [(a - b) * S / (S - 1) for a, b in zip(full, one, strict=True)]

    marginal = {name: per_step(times, name) for name in kernels}
    for name in kernels:
        row(
            f"(d) bdl.sample {name}, whole call / S", times[f"sample:{name}"], cpu[f"sample:{name}"]
        )
        row("    minus the num_steps=1 call", marginal[name], per_step(cpu, name))
        row("    its compiled loop alone, call / S", times[f"loop:{name}"], cpu[f"loop:{name}"])
        row(
            "    loop alone, minus its 1-step loop",
            per_step(times, name, "loop"),
            per_step(cpu, name, "loop"),
        )
        if unblocked:
            row(
                "    unblocked loop (block 1), call / S",
                times[f"unblocked:{name}"],
                cpu[f"unblocked:{name}"],
            )
            row(
                "    unblocked, minus its num_steps=1 call",
                per_step(times, name, "unblocked"),
                per_step(cpu, name, "unblocked"),
            )
    print()
    for name in kernels:
        ratio = median_ratio(times[name], both)
        verdict = "ok" if ratio <= TARGET_RATIO else "ABOVE TARGET"
        print(
            f"verdict {name}: kernel.step / (sgd + draw) = {ratio:.3f} wall, "
            f"{median_ratio(cpu[name], cpu_both):.3f} cpu (target ≤ {TARGET_RATIO}: {verdict}); "
            f"bdl.sample per step / (sgd + draw) = {median_ratio(marginal[name], both):.3f} "
            f"wall, {median_ratio(per_step(cpu, name), cpu_both):.3f} cpu"
        )
        sgd_only = median_ratio(marginal[name], sgd)
        before = median_ratio(per_step(times, name, "unblocked"), sgd) if unblocked else 0.0
        print(
            f"verdict {name} (accelerator limit, the SGD step alone): bdl.sample per step / sgd "
            f"= {sgd_only:.3f} wall, kernel.step / sgd = {median_ratio(times[name], sgd):.3f}"
            + (f"; with the unblocked loop {before:.3f}" if unblocked else "")
        )
    for name, (wall, ncomp, xla_s) in first.items():
        verdict = "ok" if wall <= TARGET_COMPILE_S else "ABOVE TARGET"
        one = statistics.median(times[f"sample1:{name}"])
        full = statistics.median(times[f"sample:{name}"])
        print(
            f"bdl.sample {name}: first call {wall:.2f} s incl. {S} steps ({ncomp} XLA "
            f"compilation(s), {xla_s:.2f} s in the XLA backend; target ≤ {TARGET_COMPILE_S} s: "
            f"{verdict}); later calls {full * 1e3:.1f} ms (num_steps={S}) and {one * 1e3:.1f} ms "
            f"(num_steps=1, the fixed cost)"
        )
    print(
        "calls of the compiled loop per timed bdl.sample call (1 = the whole call in one "
        "program): " + ", ".join(f"{k} {v}" for k, v in chunk_calls.items())
    )
    print(
        f"XLA compilations during the {R} timed rounds (bdl.sample re-called with the same "
        f"shapes, num_steps {S} and 1): {recompiles}"
        f"{' (no recompile: ok)' if recompiles == 0 else ' (RECOMPILED)'}"
    )

    if args.hlo:
        print()
        print(
            "optimised HLO of each scan's loop body: thunks = top-level ops run once per step "
            "(each a kernel launch on CPU), fused = ops inside their fusions"
        )
        for name, stats in hlo.items():
            ops = ", ".join(f"{k} {v}" for k, v in stats["ops"].most_common())
            print(f"  {name:<12} thunks {stats['thunks']:>4}  fused {stats['fused']:>5}  | {ops}")

    if args.chains:
        print()
        print("bdl.sample sghmc under vmap, second call (target: chain-steps/s rises with chains):")
        sweep = {}
        for c in (1, 2, 4, 8):
            run = partial(
                bdl.sample,
                compiled,
                kernels["sghmc"],
                num_steps=S,
                thin=S,
                num_chains=c,
                progress=False,
            )
            jax.block_until_ready(run().positions)
            sweep[c] = lambda run=run: run().positions
        ctimes, _ = time_interleaved(sweep, max(3, R // 2 + 1))
        print(f"{'chains':>8}{'s/call':>10}{'chain-steps/s':>16}{'µs/chain-step':>16}")
        for c, ts in ctimes.items():
            med = statistics.median(ts)
            print(f"{c:>8}{med:>10.3f}{c * S / med:>16.0f}{med / (c * S) * 1e6:>16.1f}")


if __name__ == "__main__":
    main()

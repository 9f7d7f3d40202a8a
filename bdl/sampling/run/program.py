"""The compiled chunk: ``num_draws × steps_per_draw`` steps of every chain in one XLA program.

One call runs the chains from step ``t0`` in :func:`bdl.sampling.run.chain.run_chain` and records
each draw's state in a buffer of ``buffer_size`` rows. ``t0``, ``num_draws`` and
``steps_per_draw`` are traced, so burn-in and sampling chunks of any length share one
compilation; ``buffer_size`` fixes the output's shape. Where loops run in blocks (an
accelerator), the sampling program also holds a second segment, ``whole_draws`` draws of the
run's ``thin`` steps each in loops of static length, run after the first: a chunk of whole draws
uses it and a burn-in or part-draw chunk the first, so a run with a fixed step compiles one
chunk program either way. With a layout, each device runs it for its
own block of chains (and its share of every minibatch): under ``shard_map``, or, with the chains
in turn on a mesh of chains only, as the one-device program called per device
(:mod:`bdl.sampling.run.dispatch`). A chunk runs in one of three phases:

* :attr:`Phase.SAMPLE` — diagnostics are paid only where they are recorded: the steps inside a
  draw run the bare kernel step, and the draw's last step computes the step ``Info`` and checks
  that the energy, gradient and state are finite and the energy not far out. A chain that fails
  goes back to its state at the start of the draw and stays frozen there, its divergence step
  provisionally the draw's last (:mod:`bdl.sampling.run.failures` finds the exact one).
* :attr:`Phase.CHECKED` — every step is checked and a failing chain frozen at its last finite
  state (the divergence replay).
* :attr:`Phase.WARMUP` — every step is judged by warm-up's guard, h and T are the adapted step
  and the target's temperature, θ is added to the window's statistics, and, when the call ends
  at an adaptation point, warm-up updates each chain there (:class:`bdl.sampling.warmup.WarmUp`);
  nothing is recorded; a far-out state the guard accepts fails the chain.

Only the kernel is asked for anything: its step, phases and draws, and, through warm-up, its
recipe state (:class:`bdl.kernels.base.Adaptable`).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from bdl.compile.target import Target
from bdl.kernels.base import Info, Kernel
from bdl.sampling.kept.buffers import Records
from bdl.sampling.run.carry import Chains, all_finite, judged, warmed
from bdl.sampling.run.chain import run_chain
from bdl.sampling.run.dispatch import per_device
from bdl.sampling.run.layout import CHAIN, Layout
from bdl.sampling.warmup import Point, WarmUp
from bdl.utils.convolutions import canonical_convolutions
from bdl.utils.owner_jit import owner_jit


class Phase(enum.Enum):
    SAMPLE = "sample"
    CHECKED = "checked"
    WARMUP = "warmup"


class Shape(NamedTuple):
    """What a program is compiled for beyond its arguments' shapes: the phase, the buffer's
    rows, whether convolutions are rewritten for XLA:CPU, whether chains run in turn, the
    steps per block of a loop of traced length, and ``thin``: the static steps per draw of the
    sampling program's second segment (``None``: no such segment; module docstring)."""

    phase: Phase
    buffer_size: int
    convolutions: bool = False
    chains_in_turn: bool = False
    block: int = 1
    thin: int | None = None


class Lengths(NamedTuple):
    """A call's start step, draws and steps per draw, then the draws of the static-``thin``
    segment that follow them (module docstring): traced ``int32`` (NumPy's: a jitted function
    takes them as they are, where a JAX array made from a Python int would compile a conversion
    at a process's first call)."""

    t0: Any
    num_draws: Any
    steps_per_draw: Any
    whole_draws: Any

    @classmethod
    def of(cls, t0: int, num_draws: int, steps: int, whole_draws: int = 0) -> Lengths:
        return cls(*(np.asarray(n, np.int32) for n in (t0, num_draws, steps, whole_draws)))

    @property
    def first_end(self) -> Any:
        """The step after the first segment's last (the call's last in every other phase)."""
        return self.t0 + self.num_draws * self.steps_per_draw


def warmup_key(key: jax.Array, t: Any) -> jax.Array:
    """Warm-up's key at step ``t`` (0: its start) of a run with key ``key``: a stream of its
    own, so that the rest of the run draws as it would without warm-up."""
    return jax.random.fold_in(jax.random.fold_in(key, 1), t)


def run_chunk(
    target: Target,
    kernel: Kernel,
    warmup: WarmUp | None,
    chains: Chains,
    chain_keys: jax.Array,
    lengths: Lengths,
    shape: Shape,
    layout: Layout,
    run_key: jax.Array | None = None,
    point: Point | None = None,
    buffers: Records | None = None,
) -> tuple[Chains, Records | None]:
    """Run one chunk (module docstring). ``kernel`` is the bound kernel as built, ``warmup``
    its adaptation (``None`` for a kernel with a step size). In the warm-up phase a ``point``
    (flags, traced) makes each chain adapt at the call's end, with keys from ``run_key``. In
    the sampling phase ``buffers`` (:mod:`bdl.sampling.kept.buffers`, ``buffer_size`` rows) are
    donated and returned with the call's draws in their first rows; the other phases record
    nothing."""
    args, kwargs = _arguments(
        target, kernel, warmup, chains, chain_keys, lengths, shape, layout, run_key, point, buffers
    )
    if layout.mesh is not None and layout.data_devices == 1 and shape.chains_in_turn:
        return _per_device(args, kwargs["buffers"])
    return compiled_chunk(*args, **kwargs)


def _per_device(args: tuple, buffers: Records | None) -> tuple[Chains, Records | None]:
    """:func:`compiled_chunk` (``args``: its positional arguments, :func:`_arguments`) on a mesh
    of chains only, with the chains in turn: each device runs the one-device program on its
    block of chains (:func:`bdl.sampling.run.dispatch.per_device`), so a run on any number of
    devices is bitwise the run on one (docs/scaling.md)."""
    (target, kernel, warmup, chains, chain_keys, first, lengths, shape, layout, run_key,
     adaptation) = args  # fmt: skip
    one = dataclasses.replace(layout, mesh=None)  # the run's chains, each call on one device
    per_chain = (chains, chain_keys, None if buffers is None else buffers[:2])
    shared = (target, kernel, warmup, lengths, run_key, adaptation)
    shared += (None if buffers is None else buffers[2:],)

    def call(offset: int, shared: tuple, per_chain: tuple) -> tuple[Chains, Records | None]:
        target, kernel, warmup, lengths, run_key, adaptation, draw_rows = shared
        chains, chain_keys, rows = per_chain
        at = np.asarray(first + offset, np.int32)
        block = None if rows is None else Records(*rows, *draw_rows)
        return compiled_chunk(
            target, kernel, warmup, chains, chain_keys, at, lengths, shape, one, run_key,
            adaptation, buffers=block,
        )  # fmt: skip

    by_chain = P(CHAIN)
    specs = (by_chain, None if buffers is None else Records(by_chain, by_chain, P(), P()))
    return per_device(call, layout.mesh, shared, per_chain, specs)


def lower_chunk(*args: Any, **kwargs: Any) -> Any:
    """The chunk program that :func:`run_chunk` with these arguments runs, lowered (for its HLO;
    nothing runs). With the chains in turn on a mesh of chains only, where each device runs the
    one-device program on its block, this is the program partitioned over the mesh instead."""
    args, kwargs = _arguments(*args, **kwargs)
    return compiled_chunk.lower(*args, **kwargs)


def _arguments(
    target: Target,
    kernel: Kernel,
    warmup: WarmUp | None,
    chains: Chains,
    chain_keys: jax.Array,
    lengths: Lengths,
    shape: Shape,
    layout: Layout,
    run_key: jax.Array | None = None,
    point: Point | None = None,
    buffers: Records | None = None,
) -> tuple[tuple, dict]:
    """:func:`compiled_chunk`'s arguments for :func:`run_chunk`'s: the warm-up point as traced
    flags (every point shares one compilation)."""
    adaptation = None
    if shape.phase is Phase.WARMUP:
        if point is None:
            adaptation = (np.asarray(False), Point(*(np.asarray(False) for _ in range(3))))
        else:
            adaptation = (np.asarray(True), point)
    first = np.asarray(layout.start, np.int32)
    args = (target, kernel, warmup, chains, chain_keys, first, lengths, shape, layout, run_key)
    return (*args, adaptation), {"buffers": buffers}


@owner_jit(donate="buffers")
def compiled_chunk(
    target: Target,
    kernel: Kernel,
    warmup: WarmUp | None,
    chains: Chains,
    chain_keys: jax.Array,
    first: Any,
    lengths: Lengths,
    shape: Shape,
    layout: Layout,
    run_key: jax.Array | None,
    adaptation: tuple[Any, Point] | None,
    buffers: Records | None = None,
) -> tuple[Chains, Records | None]:
    """The chunk program (:func:`run_chunk` with the adaptation flags made arrays): one XLA
    program per target, kernel, phase and shapes, whose compilations go with their targets
    (:func:`bdl.utils.owner_jit.owner_jit`); ``buffers`` are donated. ``first`` (traced
    ``int32``) is the run's index of ``chains``' first chain, so the calls of a per-device
    dispatch, each given one device's block, share one trace."""
    per_chain: dict[str, Any] = {"chains": chains, "keys": chain_keys}
    shared: dict[str, Any] = {
        "target": target,
        "kernel": kernel,
        "warmup": warmup,
        "lengths": lengths,
        "shape": shape,
        "adaptation": adaptation,
    }
    if adaptation is not None:
        t_end = lengths.first_end
        keys = jax.random.split(warmup_key(run_key, t_end), layout.num_chains)
        per_chain["adapt_keys"] = jax.lax.dynamic_slice_in_dim(keys, first, chain_keys.shape[0])
    if buffers is not None:  # (chain, row, ...) buffers go with their chains
        per_chain["rows"] = (buffers.collected, buffers.info)
        shared["draw_rows"] = (buffers.is_sample, buffers.steps)

    def local(shared: dict[str, Any], per_chain: dict[str, Any]) -> tuple[Chains, Any]:
        return _local_chunk(**shared, **per_chain)

    if layout.mesh is None:
        return local(shared, per_chain)
    by_chain = P(CHAIN)
    specs = (by_chain, None if buffers is None else Records(by_chain, by_chain, P(), P()))
    return layout.per_chain(local, shared, per_chain, specs)


def _write(buffers: Records, d: jax.Array, record: Records, offset: Any = 0) -> Records:
    """Draw d's record into the buffers: row ``offset + d`` of every chain, and of the per-draw
    rows."""
    d = d + offset
    at_chains = lambda b, v: b.at[:, d].set(v.astype(b.dtype))  # noqa: E731
    return Records(
        jax.tree.map(at_chains, buffers.collected, record.collected),
        jax.tree.map(at_chains, buffers.info, record.info),
        buffers.is_sample.at[d].set(record.is_sample),
        buffers.steps.at[d].set(record.steps.astype(buffers.steps.dtype)),
    )


def _local_chunk(
    target: Target,
    kernel: Kernel,
    warmup: WarmUp | None,
    lengths: Lengths,
    shape: Shape,
    adaptation: tuple[Any, Point] | None,
    chains: Chains,
    keys: jax.Array,
    adapt_keys: jax.Array | None = None,
    rows: tuple | None = None,
    draw_rows: tuple | None = None,
) -> tuple[Chains, Records | None]:
    """:func:`run_chunk` on one device's chains."""
    chain_keys = keys
    phase = shape.phase
    step = partial(chain_step, target, kernel, warmup, warming=phase is Phase.WARMUP)

    def checked(c: Chains, ckey: jax.Array, t: jax.Array) -> tuple[Chains, Info]:
        state, stream, info = step(c, ckey, t)
        after_finite = all_finite(state)
        if phase is Phase.WARMUP:
            live = ~c.status.diverged
            temperature = target.temperature(t)
            state, warm, failed = warmup.step(
                c.states, state, info, after_finite, live, c.warmup, temperature
            )
            status = warmed(c.status, failed, live, warm.guard.energy, info.energy, t)
            return Chains(state, stream, status, warm), info
        status, ok = judged(c.status, info, after_finite, t)
        move = ok & ~c.status.diverged
        state = jax.tree.map(lambda new, old: jnp.where(move, new, old), state, c.states)
        return c._replace(states=state, streams=stream, status=status), info

    def bare(c: Chains, ckey: jax.Array, t: jax.Array) -> Chains:
        state, stream, _ = step(c, ckey, t)
        return c._replace(states=state, streams=stream)

    def recorded(c: Chains, ckey: jax.Array, t: jax.Array) -> tuple[Chains, Info]:
        state, stream, info = step(c, ckey, t)
        status = judged(c.status, info, all_finite(state), t, provisional=True)[0]
        return c._replace(states=state, streams=stream, status=status), info

    def settle(before: Chains, after: Chains) -> Chains:
        frozen = after.status.diverged
        keep = partial(jax.tree.map, lambda new, old: jnp.where(frozen, old, new))
        return after._replace(
            states=keep(after.states, before.states), streams=keep(after.streams, before.streams)
        )

    # one chain runs without a chain axis: under vmap, an axis of one costs copies and
    # transposed products in every step; chains in turn keep theirs (:func:`in_turn`)
    single = chain_keys.shape[0] == 1 and not shape.chains_in_turn
    over = (lambda f: f) if single else partial(jax.vmap, in_axes=(0, 0, None))
    ckeys = chain_keys[0] if single else chain_keys

    def per_step(fn: Callable) -> Callable:
        one = canonical_convolutions(fn) if shape.convolutions else fn
        if shape.chains_in_turn:
            return lambda c, t: in_turn(one, c, ckeys, t)
        if single:
            return lambda c, t: one(c, ckeys, t)
        if not shape.convolutions:
            return lambda c, t: over(fn)(c, ckeys, t)
        return lambda c, t: canonical_convolutions(over(fn))(c, ckeys, t)

    def per_draw(fn: Callable) -> Callable:
        return fn if single else jax.vmap(fn)

    def record(c: Chains, info: Info, t: jax.Array) -> Records:
        collected = per_draw(kernel.collect)(c.states)
        if single:
            collected, info = jax.tree.map(lambda x: x[None], (collected, info))
        return Records(collected, info, kernel.is_sample(t), t)

    start = jax.tree.map(lambda x: x[0], chains) if single else chains
    spans = (lengths.t0, lengths.num_draws, lengths.steps_per_draw)
    block = shape.block
    if phase is Phase.SAMPLE:
        sampled = partial(
            run_chain, per_step(recorded), observe=record, buffer_size=shape.buffer_size,
            skip=per_step(bare), settle=per_draw(settle), block=block,
        )  # fmt: skip
        end, out = sampled(start, *spans, buffers=Records(*rows, *draw_rows), write=_write)
        if shape.thin is not None:  # then the whole draws, each in a loop of static length
            after = partial(_write, offset=lengths.num_draws)
            spans = (lengths.first_end, lengths.whole_draws, shape.thin)
            end, out = sampled(end, *spans, buffers=out, write=after)
    else:  # nothing recorded: the loop carries no buffers
        end, out = run_chain(per_step(checked), start, *spans, None, 1, block=block)
    if single:
        end = jax.tree.map(lambda x: x[None], end)
    if phase is Phase.WARMUP:
        adapt, point = adaptation
        t_end = lengths.first_end
        end = jax.lax.cond(
            adapt,
            lambda c: _updated(target, warmup, c, adapt_keys, point, t_end),
            lambda c: c,
            end,
        )
    return end, out


def in_turn(fn: Callable, chains: Any, keys: jax.Array, t: jax.Array) -> Any:
    """``fn(chain, key, t)`` for each chain (leading axis of ``chains`` and ``keys``), one
    after another, with a loop body that is the same program whether a device holds one chain
    or several (what that gives across layouts is measured in docs/scaling.md).

    XLA fuses a chain's arithmetic with whatever slices it out of, or writes it into, the stack
    of chains, and those fusions depend on the stack's length (a stack of one loses its axis, a
    loop of known length one is inlined). So the loop's length is hidden from XLA, and a chain
    enters and leaves ``fn`` through the loop's carry: chain i + 1 is sliced out, and chain
    i − 1's result written back, beside the step of chain i, never into it. Off the CPU it is
    ``lax.map``."""
    if jax.default_backend() != "cpu":
        return jax.lax.map(lambda ck: fn(*ck, t), (chains, keys))
    n = keys.shape[0]
    stacked = (chains, keys)
    pick = lambda i: jax.tree.map(lambda a: a[i], stacked)  # noqa: E731
    shapes = jax.eval_shape(lambda ck: fn(*ck, t), pick(0))
    # row 0 receives the initial ``last``; chain i's result lands in row i + 1
    out = jax.tree.map(lambda s: jnp.zeros((n + 1, *s.shape), s.dtype), shapes)
    last = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

    def body(i: jax.Array, carry: tuple) -> tuple:
        current, last, out = carry
        out = jax.tree.map(lambda o, v: o.at[i].set(v), out, last)
        last = fn(*current, t)
        return pick(jnp.minimum(i + 1, n - 1)), last, out

    count = jax.lax.optimization_barrier(jnp.asarray(n, jnp.int32))
    _, last, out = jax.lax.fori_loop(0, count, body, (pick(0), last, out))
    return jax.tree.map(lambda o, v: o.at[n].set(v)[1:], out, last)


def _updated(
    target: Target, warmup: WarmUp, chains: Chains, keys: jax.Array, point: Point, t: jax.Array
) -> Chains:
    """Each chain adapted at a warm-up point, one chain at a time (:func:`in_turn`): the dense
    linear algebra of warm-up then gives bitwise the same values however many chains a device
    holds (a batched Hessian or factorisation need not)."""

    def one(chain: tuple, key: jax.Array, t: jax.Array) -> tuple:
        return warmup.update(target, *chain, key, point, t)

    states, adaptation = in_turn(one, (chains.states, chains.warmup), keys, t)
    return chains._replace(states=states, warmup=adaptation)


@owner_jit
def chain_step(
    target: Target,
    kernel: Kernel,
    warmup: WarmUp | None,
    c: Chains,
    ckey: jax.Array,
    t: jax.Array,
    warming: bool,
) -> tuple[Any, Any, Info]:
    """One chain's step t: (kernel state, minibatch stream, step ``Info``).

    A nested ``jit``: a chunk's program traces the step several times (the bare step, the
    recorded step, the latter's output shape; on an accelerator each in a block and a remainder
    loop), and every trace meets this call with the same arguments' shapes, so the step is
    traced once per program and its jaxpr reused; XLA inlines the call."""
    temperature = target.temperature(t)
    if warmup is None:
        k = kernel
        h, temperature = k.hyper(t, temperature)
    else:
        k = warmup.kernel_at(c.warmup.params)
        if warming:
            h, temperature = warmup.hyper(c.warmup, temperature)
        else:
            h, temperature = k.hyper(t, temperature)
    batch, stream = target.next_batch(c.streams, t)
    grad_fn = partial(target.stochastic_energy_and_grad, batch=batch)
    if warmup is not None:
        grad_fn = warmup.gradient(c.warmup, grad_fn)
    state, info = k.step(jax.random.fold_in(ckey, t), c.states, grad_fn, h, temperature)
    if warming:
        state = warmup.stabilised(state, c.warmup)
    return state, stream, info


class Programs(NamedTuple):
    """A run's chunk programs with everything but the chains bound: what the loop, warm-up and
    the divergence replay call."""

    target: Target
    kernel: Kernel
    warmup: WarmUp | None
    chain_keys: jax.Array
    layout: Layout
    run_key: jax.Array
    buffer_size: int
    convolutions: bool = False
    chains_in_turn: bool = False
    block: int = 1
    thin: int = 1

    @property
    def static_thin(self) -> int | None:
        """The sampling program's static steps per draw: the run's ``thin`` where loops run
        in blocks (module docstring), else ``None``."""
        return self.thin if self.block > 1 else None

    def _shape(self, phase: Phase) -> Shape:
        rows = self.buffer_size if phase is not Phase.WARMUP else 1
        thin = self.static_thin if phase is Phase.SAMPLE else None
        return Shape(phase, rows, self.convolutions, self.chains_in_turn, self.block, thin)

    def _run(
        self,
        chains: Chains,
        lengths: Lengths,
        phase: Phase,
        point: Point | None = None,
        buffers: Records | None = None,
    ) -> tuple[Chains, Records | None]:
        return run_chunk(
            self.target, self.kernel, self.warmup, chains, self.chain_keys, lengths,
            self._shape(phase), self.layout, self.run_key, point, buffers,
        )  # fmt: skip

    def sample(
        self, chains: Chains, buffers: Records, t0: int, draws: int, steps: int,
        whole_draws: bool = False,
    ) -> tuple[Chains, Records]:  # fmt: skip
        """``draws`` draws of ``steps`` steps each from step ``t0`` into ``buffers`` (donated;
        burn-in: one draw of all its steps, its record unused). Chunks of ``whole_draws``
        (``steps`` is ``thin``) run each draw in a loop of static length where loops run in
        blocks (an accelerator): the same program's second segment."""
        static = whole_draws and self.static_thin is not None
        lengths = Lengths.of(t0, 0, steps, draws) if static else Lengths.of(t0, draws, steps)
        return self._run(chains, lengths, Phase.SAMPLE, buffers=buffers)

    def warm(self, chains: Chains, t0: int, steps: int, point: Point | None) -> Chains:
        """``steps`` warm-up steps from ``t0``, then, at an adaptation point, the update."""
        flags = None if point is None else Point(*(np.asarray(f) for f in point))
        return self._run(chains, Lengths.of(t0, 1, steps), Phase.WARMUP, flags)[0]

    def replay(self, chains: Chains, t0: int, steps: int) -> Chains:
        """``steps`` steps from ``t0`` with every step checked (the divergence replay)."""
        return self._run(chains, Lengths.of(t0, 1, steps), Phase.CHECKED)[0]

"""``bdl.sample``: run any kernel on a compiled target, chains under ``vmap``, steps in XLA loops.

The whole chain runs inside one jitted function per chunk of draws (``lax.fori_loop`` over steps,
minibatches drawn on device), so there is no Python loop over steps. Draws are streamed to the
host after every chunk: memory grows with the number of kept draws, never with the number of
steps. The step counter is shared by all chains and every random key is ``fold_in(chain_key, t)``,
so results do not depend on the chunking and the same seed gives bitwise-identical draws.
"""

from __future__ import annotations

import sys
import warnings
from functools import partial
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from bdl.compile.target import Target
from bdl.kernels.base import Info, Kernel
from bdl.sampling.chain import run_chain
from bdl.sampling.progress import Progress
from bdl.sampling.samples import Samples

PyTree = Any
_CHUNK_BYTES = 128 * 2**20  # host-transfer buffer per chunk
_MAX_CHUNK_DRAWS = 1000


def _positive_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an integer; got {type(value).__name__}.")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}.")
    return int(value)


def check_run(num_steps: Any, burn_in: Any, thin: Any, num_chains: Any) -> int:
    """Validate the run lengths; returns the number of draws per chain."""
    num_steps = _positive_int("num_steps", num_steps, 1)
    burn_in = _positive_int("burn_in", burn_in, 0)
    if isinstance(thin, int | np.integer) and not isinstance(thin, bool) and thin <= 0:
        raise ValueError(f"thin must be >= 1 (keep every thin-th step); got {thin}.")
    thin = _positive_int("thin", thin, 1)
    _positive_int("num_chains", num_chains, 1)
    if burn_in >= num_steps:
        raise ValueError(
            f"burn_in ({burn_in}) must be smaller than num_steps ({num_steps}): "
            "nothing would be collected."
        )
    draws = (num_steps - burn_in) // thin
    if draws == 0:
        raise ValueError(
            f"thin ({thin}) is larger than num_steps - burn_in "
            f"({num_steps - burn_in}): nothing would be collected."
        )
    return draws


def sample(
    target: Target,
    kernel: Kernel,
    *,
    num_steps: int,
    burn_in: int = 0,
    thin: int = 1,
    num_chains: int = 1,
    seed: int = 0,
    init: Any = "auto",
    progress: bool | None = None,
) -> Samples:
    """Draw samples of ``target`` with ``kernel``.

    Args:
        target: a compiled model or potential (``bdl.compile``).
        kernel: a kernel object, e.g. ``bdl.kernels.get("sghmc", step_size=1e-3)``.
        num_steps: total steps per chain, burn-in included.
        burn_in: steps discarded before collection starts.
        thin: keep the state after every ``thin``-th step after burn-in.
        num_chains: independent chains, run under ``vmap``.
        seed: the run's seed; the same seed gives bitwise-identical draws.
        init: initial positions (see ``target.init_positions``).
        progress: print steps/s and ETA to stderr (default: when stderr is a terminal).

    Returns:
        :class:`Samples` with ``(chain, draw)`` axes. Ctrl-C stops the run after the current chunk
        and returns what was collected, with ``interrupted=True``.
    """
    if not isinstance(target, Target):
        raise TypeError(
            f"sample() needs a compiled target from bdl.compile(...); got {type(target).__name__}."
        )
    if not isinstance(kernel, Kernel):
        raise TypeError(
            "sample(kernel=...) must be a bdl kernel, e.g. "
            f"bdl.kernels.get('sghmc', step_size=1e-3); got {type(kernel).__name__}."
        )
    num_draws = check_run(num_steps, burn_in, thin, num_chains)
    kernel = kernel.bind(target)
    progress = sys.stderr.isatty() if progress is None else progress

    positions, carry, chain_keys = _setup(target, kernel, jax.random.key(seed), num_chains, init)
    states = carry[0]

    draw_bytes = (
        4
        * num_chains
        * sum(
            int(np.size(x))
            for x in jax.tree.leaves(jax.eval_shape(jax.vmap(kernel.collect), states))
        )
    )
    # the buffer length is static: a power of two, so runs of similar length share a compilation
    cap = max(1, min(_MAX_CHUNK_DRAWS, _CHUNK_BYTES // max(draw_bytes, 1)))
    chunk = int(min(cap, 1 << (num_draws - 1).bit_length()))

    collected: list[tuple[Any, Any, np.ndarray, np.ndarray]] = []
    meter = Progress(num_steps, progress, label=kernel.name)
    t = 0
    interrupted = False
    try:
        while t < burn_in:
            n = min(burn_in - t, chunk * thin)
            carry, _ = _run_chunk(target, kernel, carry, chain_keys, *_ints(t, 1, n), chunk)
            jax.block_until_ready(carry)
            t += n
            meter.update(t)
        done = 0
        while done < num_draws:
            n = min(num_draws - done, chunk)
            carry, out = _run_chunk(target, kernel, carry, chain_keys, *_ints(t, n, thin), chunk)
            out = jax.device_get(out)
            collected.append(jax.tree.map(lambda a, n=n: a[:n], out))
            t += n * thin
            done += n
            meter.update(t)
    except KeyboardInterrupt:
        interrupted = True
        warnings.warn(
            f"sampling interrupted after {t} steps; returning the draws collected so far.",
            stacklevel=2,
        )
    finally:
        meter.close(t)
    return _assemble(collected, kernel, t, interrupted, positions, states)


@eqx.filter_jit
def _setup(target: Target, kernel: Kernel, key: jax.Array, num_chains: int, init: Any) -> Any:
    """Initial positions, kernel states, minibatch streams and chain keys, in one compilation."""
    k_init, k_kernel, k_batch, k_run = jax.random.split(key, 4)
    positions = target.init_positions(k_init, num_chains, init)
    states = jax.vmap(kernel.init)(positions, jax.random.split(k_kernel, num_chains))
    streams = jax.vmap(target.init_batches)(jax.random.split(k_batch, num_chains))
    return positions, (states, streams), jax.random.split(k_run, num_chains)


def _ints(*values: int) -> tuple[jax.Array, ...]:
    """Loop bounds as int32 arrays: traced, so every chunk length shares one compilation."""
    return tuple(jnp.asarray(v, jnp.int32) for v in values)


@eqx.filter_jit
def _run_chunk(
    target: Target,
    kernel: Kernel,
    carry: Any,
    chain_keys: jax.Array,
    t0: jax.Array,
    num_draws: jax.Array,
    steps_per_draw: jax.Array,
    buffer_size: int,
) -> tuple[Any, Any]:
    """Run ``num_draws × steps_per_draw`` steps from step ``t0``, recording each draw's state.

    ``t0``, ``num_draws`` and ``steps_per_draw`` are traced, so burn-in and sampling chunks of
    any length share one compilation; ``buffer_size`` fixes the output shape.
    """

    def one_step(carry: Any, t: jax.Array) -> tuple[Any, Info]:
        states, streams = carry

        def per_chain(state: Any, stream: Any, ckey: jax.Array) -> tuple[Any, Any, Info]:
            batch, stream = target.next_batch(stream, t)
            h, temperature = kernel.hyper(t, target.temperature(t))
            grad_fn = partial(target.stochastic_energy_and_grad, batch=batch)
            state, info = kernel.step(jax.random.fold_in(ckey, t), state, grad_fn, h, temperature)
            return state, stream, info

        states, streams, info = jax.vmap(per_chain)(states, streams, chain_keys)
        return (states, streams), info

    def observe(carry: Any, info: Info, t: jax.Array) -> Any:
        return jax.vmap(kernel.collect)(carry[0]), info, kernel.is_sample(t), t

    return run_chain(one_step, carry, t0, num_draws, steps_per_draw, observe, buffer_size)


def _assemble(
    collected: list,
    kernel: Kernel,
    steps_done: int,
    interrupted: bool,
    positions: Any,
    states: Any,
) -> Samples:
    if collected:
        records, infos, mask, steps = (
            jax.tree.map(lambda *a: np.concatenate(a, axis=0), *parts)
            for parts in zip(*collected, strict=True)
        )
    else:
        shape = jax.eval_shape(jax.vmap(kernel.collect), states)
        records = jax.tree.map(lambda s: np.zeros((0, *s.shape), s.dtype), shape)
        infos, mask, steps = {}, np.zeros((0,), bool), np.zeros((0,), np.int64)
    keep = np.asarray(mask, bool)
    # buffers are (draw, chain, ...); Samples are (chain, draw, ...)
    records = jax.tree.map(lambda a: np.swapaxes(np.asarray(a)[keep], 0, 1), records)
    info = (
        {}
        if not collected
        else {k: np.swapaxes(np.asarray(v)[keep], 0, 1) for k, v in infos._asdict().items()}
    )
    extra = {k: v for k, v in records.items() if k != "position"}
    return Samples(
        positions=records["position"],
        extra=extra,
        info=info,
        steps=np.asarray(steps)[keep],
        kernel=kernel.name,
        steps_done=steps_done,
        interrupted=interrupted,
    )

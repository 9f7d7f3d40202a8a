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
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from bdl.compile.target import Target
from bdl.kernels.base import Info, Kernel
from bdl.kernels.blocks import DenseMass
from bdl.kernels.recipe_kernel import RecipeState
from bdl.sampling import warmup
from bdl.sampling.chain import run_chain
from bdl.sampling.checks import check_run, check_schedules
from bdl.sampling.progress import Progress
from bdl.sampling.provenance import run_meta
from bdl.sampling.samples import Samples

PyTree = Any
_CHUNK_BYTES = 128 * 2**20  # host-transfer buffer per chunk
_MAX_CHUNK_DRAWS = 1000


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
    adapting = warmup.needs_adaptation(kernel)
    check_schedules(target, kernel, num_steps, adapting)
    schedule = warmup.windows(burn_in) if adapting else []
    progress = sys.stderr.isatty() if progress is None else progress

    key = jax.random.key(seed)
    key_adapt = jax.random.fold_in(key, 1)  # warm-up's own stream: the rest as without it
    _, chains, chain_keys = _setup(target, kernel, key, num_chains, init)
    if adapting:
        chains = _start_adaptation(target, kernel, chains, jax.random.fold_in(key_adapt, 0))

    draw_bytes = (
        4
        * num_chains
        * sum(
            int(np.size(x))
            for x in jax.tree.leaves(
                jax.eval_shape(jax.vmap(warmup.apply(kernel, ()).collect), chains.states)
            )
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
        for w, window in enumerate(schedule):
            end = t + window.length
            while t < end:
                n = min(end - t, chunk * thin, warmup.STEP_EVERY)
                chains, _ = _run_chunk(
                    target, kernel, chains, chain_keys, *_ints(t, 1, n), chunk, True
                )
                t += n
                meter.update(t)
                k_adapt = jax.random.fold_in(key_adapt, t)
                last = t == end
                final = w == len(schedule) - 1
                chains = _adapt(
                    target, kernel, chains, k_adapt, window.slow and last, last, final, *_ints(t)
                )
        while t < burn_in:
            n = min(burn_in - t, chunk * thin)
            chains, _ = _run_chunk(target, kernel, chains, chain_keys, *_ints(t, 1, n), chunk)
            jax.block_until_ready(chains)
            t += n
            meter.update(t)
        done = 0
        while done < num_draws:
            n = min(num_draws - done, chunk)
            chains, out = _run_chunk(target, kernel, chains, chain_keys, *_ints(t, n, thin), chunk)
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
    meta = run_meta(
        target,
        kernel,
        num_steps=num_steps,
        burn_in=burn_in,
        thin=thin,
        num_chains=num_chains,
        seed=seed,
        init=init,
    )
    return _assemble(collected, kernel, t, interrupted, chains, meta)


class Status(NamedTuple):
    """Per chain: whether it diverged, and at which step (−1: never)."""

    diverged: jax.Array
    step: jax.Array


class Chains(NamedTuple):
    """Everything the loop carries per chain (leading chain axis): kernel states, minibatch
    streams, divergence status, adapted (h, γ, M) (``()`` when not adapting) and the warm-up
    window's running statistics (``()`` outside warm-up)."""

    states: Any
    streams: Any
    status: Status
    params: Any = ()
    stats: Any = ()


@eqx.filter_jit
def _setup(target: Target, kernel: Kernel, key: jax.Array, num_chains: int, init: Any) -> Any:
    """Initial positions, kernel states, minibatch streams and chain keys, in one compilation."""
    k_init, k_kernel, k_batch, k_run = jax.random.split(key, 4)
    positions = target.init_positions(k_init, num_chains, init)
    states = jax.vmap(kernel.init)(positions, jax.random.split(k_kernel, num_chains))
    streams = jax.vmap(target.init_batches)(jax.random.split(k_batch, num_chains))
    status = Status(jnp.zeros((num_chains,), bool), jnp.full((num_chains,), -1, jnp.int32))
    return positions, Chains(states, streams, status), jax.random.split(k_run, num_chains)


def _ints(*values: int) -> tuple[jax.Array, ...]:
    """Loop bounds as int32 arrays: traced, so every chunk length shares one compilation."""
    return tuple(jnp.asarray(v, jnp.int32) for v in values)


def _finite(tree: Any) -> jax.Array:
    """Whether every floating leaf of ``tree`` is finite (one fused reduction per leaf)."""
    leaves = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(jnp.result_type(x), jnp.floating)]
    return jnp.all(jnp.stack([jnp.isfinite(jnp.sum(x)) for x in leaves])) if leaves else True


@eqx.filter_jit
def _run_chunk(
    target: Target,
    kernel: Kernel,
    chains: Chains,
    chain_keys: jax.Array,
    t0: jax.Array,
    num_draws: jax.Array,
    steps_per_draw: jax.Array,
    buffer_size: int,
    adapting: bool = False,
) -> tuple[Chains, Any]:
    """Run ``num_draws × steps_per_draw`` steps from step ``t0``, recording each draw's state.

    ``t0``, ``num_draws`` and ``steps_per_draw`` are traced, so burn-in and sampling chunks of
    any length share one compilation; ``buffer_size`` fixes the output shape. A step whose
    energy, gradient or new state is not finite marks its chain diverged; the chain's state is
    then frozen. While ``adapting`` (a warm-up window) such a step is rejected and the chain's
    step size halved instead, h and T are the adapted step and the target's temperature (no
    schedule), and θ is accumulated into the window's statistics.
    """

    def per_chain(c: Chains, ckey: jax.Array, t: jax.Array) -> tuple[Chains, Info]:
        k = warmup.apply(kernel, c.params)
        temperature = target.temperature(t)
        h, temperature = (c.params.step_size, temperature) if adapting else k.hyper(t, temperature)
        batch, stream = target.next_batch(c.streams, t)
        grad_fn = partial(target.stochastic_energy_and_grad, batch=batch)
        state, info = k.step(jax.random.fold_in(ckey, t), c.states, grad_fn, h, temperature)
        if adapting and isinstance(state, RecipeState):
            state = state._replace(z=warmup.innermost(k).recipe.warmup_guarded(state.z, h))
        ok = jnp.isfinite(info.energy) & jnp.isfinite(info.grad_norm) & _finite(state)
        move = ok & ~c.status.diverged
        state = jax.tree.map(lambda new, old: jnp.where(move, new, old), state, c.states)
        params, stats, status = c.params, c.stats, c.status
        if adapting:
            params = warmup.back_off(params, ok)
            stats = jax.tree.map(
                lambda new, old: jnp.where(move, new, old),
                warmup.accumulate(stats, state.z["theta"]),
                stats,
            )
            failed = params.backoff < 2.0**-40  # nothing is finite at any step size
        else:
            failed = ~ok
        first = failed & ~status.diverged
        status = Status(status.diverged | failed, jnp.where(first, t, status.step))
        return Chains(state, stream, status, params, stats), info

    def one_step(chains: Chains, t: jax.Array) -> tuple[Chains, Info]:
        return jax.vmap(per_chain, in_axes=(0, 0, None))(chains, chain_keys, t)

    def observe(chains: Chains, info: Info, t: jax.Array) -> Any:
        k = warmup.apply(kernel, ())
        return jax.vmap(k.collect)(chains.states), info, k.is_sample(t), t

    return run_chain(one_step, chains, t0, num_draws, steps_per_draw, observe, buffer_size)


def _noise(target: Target, kernel: Kernel, theta: Any, mass: Any, key: jax.Array) -> jax.Array:
    """V of :func:`warmup.gradient_noise` from independent random minibatches at θ."""
    keys = jax.random.split(key, warmup.NOISE_BATCHES)
    grads = jax.vmap(lambda k: _recipe_grad(target, kernel, k)(theta))(keys)
    return warmup.gradient_noise(grads, mass)


def _recipe_grad(target: Target, kernel: Kernel, key: jax.Array) -> Any:
    """∇ of the minibatch energy over the recipe's θ group, on a fresh random minibatch."""
    batch, _ = target.next_batch(target.init_batches(key), jnp.zeros((), jnp.int32))
    energy = kernel.augment_energy(lambda theta: target.stochastic_energy_and_grad(theta, batch)[0])
    return jax.grad(energy)


@eqx.filter_jit
def _start_adaptation(target: Target, kernel: Kernel, chains: Chains, key: jax.Array) -> Chains:
    """Initial (h, γ) from the curvature at each chain's start, M = I, empty statistics."""
    second = warmup.momentum_kernel(kernel)
    mass_adapted = warmup.adapts_mass(kernel)

    def one(state: Any, ckey: jax.Array) -> tuple[Any, warmup.AdaptParams, warmup.Welford]:
        theta = state.z["theta"]
        dense = warmup.dense(kernel, theta)
        k_batch, k_power = jax.random.split(ckey)
        grad_fn = _recipe_grad(target, kernel, k_batch)
        mass = None
        if mass_adapted:
            if dense:
                mass = warmup.hessian_mass(grad_fn, theta)
            else:
                mass = warmup.hessian_diagonal_mass(grad_fn, theta, jax.random.fold_in(ckey, 3))
        curvature = warmup.largest_curvature(grad_fn, theta, mass, k_power)
        temperature = target.temperature(jnp.zeros((), jnp.int32))
        floor = warmup.friction_floor(kernel, theta, temperature)
        params = warmup.params_at(curvature, mass, second, jnp.ones_like(curvature), floor)
        recipe = warmup.innermost(warmup.apply(kernel, params)).recipe
        state = state._replace(z=recipe.readapted(state.z))
        return state, params, warmup.empty_stats(theta, dense)

    keys = jax.random.split(key, chains.status.step.shape[0])
    states, params, stats = jax.vmap(one)(chains.states, keys)
    return chains._replace(states=states, params=params, stats=stats)


@eqx.filter_jit
def _adapt(
    target: Target,
    kernel: Kernel,
    chains: Chains,
    key: jax.Array,
    new_mass: bool,
    window_end: bool,
    final: bool,
    t: jax.Array,
) -> Chains:
    """(h, γ) from the curvature, after a new mass at the end of a slow window; the window's
    statistics restart at every window end."""
    second = warmup.momentum_kernel(kernel)

    def one(state: Any, params: Any, stats: Any, ckey: jax.Array) -> tuple[Any, Any, Any]:
        theta = state.z["theta"]
        mass = params.mass
        if new_mass and mass is not None:
            mass = warmup.window_mass(stats)
        k_batch, k_power = jax.random.split(ckey)
        grad_fn = _recipe_grad(target, kernel, k_batch)
        curvature = warmup.largest_curvature(grad_fn, theta, mass, k_power)
        backoff = jnp.minimum(1.0, 2.0 * params.backoff)
        temperature = target.temperature(t)
        floor = warmup.friction_floor(kernel, theta, temperature)
        noise = _noise(target, kernel, theta, mass, jax.random.fold_in(ckey, 2)) if final else 0.0
        params = warmup.params_at(curvature, mass, second, backoff, floor, noise, temperature)
        recipe = warmup.innermost(warmup.apply(kernel, params)).recipe
        state = state._replace(z=recipe.readapted(state.z))
        if window_end:
            stats = warmup.empty_stats(theta, warmup.dense(kernel, theta))
        return state, params, stats

    keys = jax.random.split(key, chains.status.step.shape[0])
    states, params, stats = jax.vmap(one)(chains.states, chains.params, chains.stats, keys)
    return chains._replace(states=states, params=params, stats=stats)


def _assemble(
    collected: list,
    kernel: Kernel,
    steps_done: int,
    interrupted: bool,
    chains: Chains,
    meta: dict[str, Any],
) -> Samples:
    collect = jax.vmap(warmup.apply(kernel, ()).collect)
    if collected:
        records, infos, mask, steps = (
            jax.tree.map(lambda *a: np.concatenate(a, axis=0), *parts)
            for parts in zip(*collected, strict=True)
        )
        info = infos._asdict()
    else:
        shape = jax.eval_shape(collect, chains.states)
        records = jax.tree.map(lambda s: np.zeros((0, *s.shape), s.dtype), shape)
        info = {k: np.zeros((0, chains.status.step.shape[0]), np.float32) for k in Info._fields}
        mask, steps = np.zeros((0,), bool), np.zeros((0,), np.int64)
    keep = np.asarray(mask, bool)
    # buffers are (draw, chain, ...); Samples are (chain, draw, ...)
    records = jax.tree.map(lambda a: np.swapaxes(np.asarray(a)[keep], 0, 1), records)
    info = {k: np.swapaxes(np.asarray(v)[keep], 0, 1) for k, v in info.items()}
    extra = {k: v for k, v in records.items() if k != "position"}
    status = jax.device_get(chains.status)
    adapted = None
    if isinstance(chains.params, warmup.AdaptParams):
        params = jax.device_get(chains.params)
        adapted = {"step_size": np.asarray(params.step_size)}
        if warmup.momentum_kernel(kernel):
            adapted["friction"] = np.asarray(params.friction)
        if isinstance(params.mass, DenseMass):
            root = np.asarray(params.mass.root)
            adapted["inverse_mass"] = root @ np.swapaxes(root, -1, -2)
        elif params.mass is not None:
            adapted["mass"] = jax.tree.map(np.asarray, params.mass.values)
    return Samples(
        positions=records["position"],
        extra=extra,
        info=info,
        steps=np.asarray(steps)[keep],
        kernel=kernel.name,
        steps_done=steps_done,
        interrupted=interrupted,
        diverged=np.asarray(status.diverged, bool),
        divergence_step=np.asarray(status.step, np.int64),
        adapted=adapted,
        meta=meta,
    )

"""The default start's second chance: a chain whose prior draw cannot start, or starts far out,
starts from the declared parameters plus noise or from Stan's default instead.

``init="auto"`` starts a model without a network initialiser from prior draws: they differ as
much as the prior says, which R̂ needs. A heavy-tailed prior can draw where the posterior is
astronomically improbable — a Gaussian process whose length scale has an inverse-gamma prior
draws energies from 10³ to 10²³ — or where the energy or its gradient is not finite (a rate
exp(x·w) that overflows; a spectral density that underflows to 0 under a square root). No step
size helps from there: in float32 the gradient of such a start overflows at the first step.

Stan starts each chain from u ~ uniform(−2, 2) on the unconstrained scale and draws again, up to
100 times, while the log density or its gradient is not finite. :func:`redrawn_where_far` keeps
bdl's prior draw where it can start and is not far out; otherwise it takes the declared
parameters plus a little noise (``init="perturbed"``, bdl's fallback so far), and where that
cannot start or is far out either, Stan's start, drawn up to :data:`START_TRIES` times:

* a start *can start* when U(θ) and ∇U(θ) are finite (full data);
* a start is *far out* when U(θ) > U* + :data:`FAR_START`·(d + 1)·T, U* the lowest energy
  found among every chain's candidates so far (first its prior draw, the perturbed start and
  one draw of Stan's start; then the draws tried again), T the temperature at step 0 (1 where
  it is 0). A typical draw of π_T lies
  about d·T/2 above the mode, so this is 10⁵ times farther than any draw of π_T, and a hundred
  times farther than what a run's divergence check calls far out
  (:mod:`bdl.sampling.run.failures`): a prior draw that is merely far from a data-rich
  posterior (a regression whose prior draws sit thousands of posterior sds from it) keeps its
  draw, from which warm-up moves it in.

A chain takes the first of its first three candidates that can start and is not far out. While
a chain is not within the limit (which falls as draws tried find lower energies), it draws
Stan's start again and takes a draw whose energy is lower than its own; so it ends within the
limit or, after :data:`START_TRIES` draws, at the lowest-energy candidate that can start. A chain
none of whose candidates can start keeps its prior draw (the sampler refuses or replaces it). Where
every prior draw can start and none is far out (nearly every model) the start is the prior draws, as
before, at the cost of U and ∇U at two more positions per chain.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from bdl.compile.compiled_model import CompiledModel
from bdl.compile.start_check import start_is_finite
from bdl.compile.start_draws import fallback_draw

PyTree = Any

#: how far above the lowest start's energy, in units of (d + 1)·T, a start is far out
FAR_START = 1e5
#: draws of Stan's start tried for a chain whose prior draw cannot start or is far out (Stan's)
START_TRIES = 100
#: the random stream of those draws
RETRY_STREAM = 0x5354


def from_prior_draws(target: Any) -> bool:
    """Whether ``init="auto"`` starts ``target`` from prior draws (a compiled model without a
    network initialiser): the starts :func:`redrawn_where_far` gives a second chance."""
    return isinstance(target, CompiledModel) and target.adapter.init is None


def redrawn_where_far(model: Any, positions: PyTree, key: jax.Array) -> tuple[PyTree, jax.Array]:
    """``positions`` (a leading chain axis), with every chain whose prior draw cannot start or is
    far out (module docstring) moved to the perturbed start or a draw of Stan's start.

    Args:
        model: the compiled model.
        positions: the chains' prior draws, in the sampled (unconstrained) space.
        key: the start's random key (the perturbed start's too).

    Returns:
        ``(positions, can_start)``: the positions, with the same structure, and per chain
            whether U and ∇U are finite at its position.
    """
    chains = jax.tree.leaves(positions)[0].shape[0]
    temperature = model.temperature(0)
    unit = jnp.where(temperature > 0, temperature, 1.0) * (model.dim + 1)
    perturbed = model.init_positions(key, chains, "perturbed")
    retry_key = jax.random.fold_in(key, RETRY_STREAM)

    def energy_at(position: PyTree) -> jax.Array:
        """U at a position, +∞ where U or ∇U is not finite."""
        energy = model.energy(position)
        return jnp.where(start_is_finite(model, position) & jnp.isfinite(energy), energy, jnp.inf)

    def uniform(attempt: Any) -> PyTree:
        leaves, treedef = jax.tree.flatten(positions)
        keys = jax.random.split(jax.random.fold_in(retry_key, attempt), len(leaves))
        drawn = [
            fallback_draw(k, leaf.shape).astype(leaf.dtype)
            for k, leaf in zip(keys, leaves, strict=True)
        ]
        return jax.tree.unflatten(treedef, drawn)

    def choose(mask: jax.Array, new: PyTree, old: PyTree) -> PyTree:
        return jax.tree.map(
            lambda a, b: jnp.where(jnp.reshape(mask, (-1,) + (1,) * (a.ndim - 1)), a, b), new, old
        )

    # the first three candidates of every chain, evaluated in one pass over a stack of them
    candidates = [positions, perturbed, uniform(0)]
    stacked = jax.tree.map(lambda *a: jnp.concatenate(a), *candidates)
    energies = jax.lax.map(energy_at, stacked).reshape(3, chains)
    limit = jnp.min(energies) + FAR_START * unit  # +∞ when no candidate can start
    within = energies <= limit
    first = jnp.argmax(within, axis=0)  # the first within the limit (0 when none is)
    lowest = jnp.argmin(energies, axis=0)
    pick = jnp.where(jnp.any(within, axis=0), first, lowest)
    chosen = positions
    for index in (2, 1):
        chosen = choose(pick == index, candidates[index], chosen)
    energy = jnp.take_along_axis(energies, pick[None], axis=0)[0]

    def go_on(carry: tuple) -> jax.Array:
        _, energy, limit, attempt = carry
        return (attempt <= START_TRIES) & jnp.any(~(energy <= limit))

    def attempt_once(carry: tuple) -> tuple:
        chosen, energy, limit, attempt = carry
        wanted = ~(energy <= limit)
        candidate = uniform(attempt)
        tried = jax.lax.map(
            lambda pair: jax.lax.cond(pair[1], energy_at, lambda _: jnp.inf, pair[0]),
            (candidate, wanted),
        ).astype(energy.dtype)
        # +∞ < +∞ is false: a chain with no start keeps its own
        better = wanted & (tried < energy)
        energy = jnp.where(better, tried, energy)
        limit = jnp.minimum(limit, jnp.min(tried) + FAR_START * unit)  # the lowest found so far
        return choose(better, candidate, chosen), energy, limit, attempt + 1

    start = (chosen, energy, limit, jnp.asarray(1, jnp.int32))
    chosen, energy, _, _ = jax.lax.while_loop(go_on, attempt_once, start)
    return chosen, jnp.isfinite(energy)

"""The default start's second chance: a chain whose prior draw cannot start, or starts far out,
starts from Stan's default instead.

``init="auto"`` starts a model without a network initialiser from prior draws: they differ as
much as the prior says, which R̂ needs. A heavy-tailed prior can draw where the posterior is
astronomically improbable — a Gaussian process whose length scale has an inverse-gamma prior
draws energies from 10³ to 10¹⁹ — or where the energy or its gradient is not finite (a basis
function's spectral density that underflows to 0 under a square root). No step size helps from
there: in float32 the gradient of such a start overflows at the first step.

Stan starts each chain from u ~ uniform(−2, 2) on the unconstrained scale and draws again, up to
100 times, while the log density or its gradient is not finite. :func:`redrawn_where_far` keeps
bdl's prior draw where it can start and is not far out, and otherwise draws Stan's start, up to
:data:`START_TRIES` times:

* a start *can start* when U(θ) and ∇U(θ) are finite (full data);
* a start is *far out* when U(θ) > U* + :data:`FAR_START`·(d + 1)·T, U* the lowest energy among
  the chains' prior draws and one draw of Stan's start per chain (every chain's is tried once),
  T the temperature at step 0 (1 where it is 0). A typical draw of π_T lies about d·T/2 above
  the mode, so this is 10⁵ times farther than any draw of π_T, and a hundred times farther than
  what a run's divergence check calls far out (:mod:`bdl.sampling.run.failures`): a prior draw
  that is merely far from a data-rich posterior (a regression whose prior draws sit thousands
  of posterior sds from it) keeps its draw, from which warm-up moves it in.

Each try draws every entry again (Stan's rule). A chain that is not yet within the limit takes a
try whose energy is lower than its own, and stops at the first within it; so it ends at the first
draw that can start and is not far out, else at the lowest-energy draw that can start. A chain
none of whose draws can start keeps its prior draw, and the sampler's own fallback (the declared
parameters plus noise) takes over. Where every prior draw can start and none is far out (nearly
every model) the start is the prior draws, as before, at the cost of U and ∇U at one more
position per chain.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from bdl.compile.start_check import start_is_finite
from bdl.compile.start_draws import fallback_draw

PyTree = Any

#: how far above the lowest start's energy, in units of (d + 1)·T, a start is far out
FAR_START = 1e5
#: draws of Stan's start tried for a chain whose prior draw cannot start or is far out (Stan's)
START_TRIES = 100
#: the random stream of those draws
RETRY_STREAM = 0x5354


def redrawn_where_far(model: Any, positions: PyTree, key: jax.Array) -> tuple[PyTree, jax.Array]:
    """``positions`` (a leading chain axis), with every chain whose start cannot start or is far
    out (module docstring) moved to a draw of Stan's start, uniform(−2, 2) per entry.

    Args:
        model: the compiled model.
        positions: the chains' prior draws, in the sampled (unconstrained) space.
        key: the start's random key.

    Returns:
        ``(positions, can_start)``: the positions, with the same structure, and per chain
            whether U and ∇U are finite at its position.
    """
    temperature = model.temperature(0)
    unit = jnp.where(temperature > 0, temperature, 1.0) * (model.dim + 1)
    key = jax.random.fold_in(key, RETRY_STREAM)

    def energy_at(position: PyTree) -> jax.Array:
        """U at a position, +∞ where U or ∇U is not finite."""
        energy = model.energy(position)
        return jnp.where(start_is_finite(model, position) & jnp.isfinite(energy), energy, jnp.inf)

    def uniform(attempt: jax.Array) -> PyTree:
        leaves, treedef = jax.tree.flatten(positions)
        keys = jax.random.split(jax.random.fold_in(key, attempt), len(leaves))
        drawn = [
            fallback_draw(k, leaf.shape).astype(leaf.dtype)
            for k, leaf in zip(keys, leaves, strict=True)
        ]
        return jax.tree.unflatten(treedef, drawn)

    def choose(mask: jax.Array, new: PyTree, old: PyTree) -> PyTree:
        return jax.tree.map(
            lambda a, b: jnp.where(jnp.reshape(mask, (-1,) + (1,) * (a.ndim - 1)), a, b), new, old
        )

    def needs(energy: jax.Array, limit: jax.Array, attempt: jax.Array) -> jax.Array:
        # every chain tries the prior draw (attempt 0) and one draw of Stan's start (attempt 1,
        # which sets the limit); after that only those not within it
        return (attempt <= 1) | ~(energy <= limit)

    def go_on(carry: tuple) -> jax.Array:
        _, energy, limit, attempt = carry
        return (attempt <= START_TRIES) & jnp.any(needs(energy, limit, attempt))

    def attempt_once(carry: tuple) -> tuple:
        chosen, energy, limit, attempt = carry
        first = attempt == 0
        candidate = choose(jnp.broadcast_to(first, energy.shape), positions, uniform(attempt))
        wanted = needs(energy, limit, attempt)
        tried = jax.lax.map(
            lambda pair: jax.lax.cond(pair[1], energy_at, lambda _: jnp.inf, pair[0]),
            (candidate, wanted),
        ).astype(energy.dtype)
        lowest = jnp.minimum(jnp.min(energy), jnp.min(tried))
        limit = jnp.where(attempt == 1, lowest + FAR_START * unit, limit)
        # +∞ < +∞ is false: a chain with no start keeps its own; one within the limit stays
        better = first | (wanted & (tried < energy) & ~(energy <= limit))
        energy = jnp.where(better, tried, energy)
        return choose(better, candidate, chosen), energy, limit, attempt + 1

    chains = jax.tree.leaves(positions)[0].shape[0]
    dtype = jnp.result_type(float)
    start = (positions, jnp.full(chains, jnp.inf, dtype), jnp.asarray(jnp.inf, dtype),
             jnp.asarray(0, jnp.int32))  # fmt: skip
    chosen, energy, _, _ = jax.lax.while_loop(go_on, attempt_once, start)
    return chosen, jnp.isfinite(energy)

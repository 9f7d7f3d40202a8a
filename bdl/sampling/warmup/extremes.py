"""The states at the edges of what warm-up saw, where the frozen step must still be stable.

A posterior's curvature can grow towards one edge of it: in a non-centred hierarchical model the
curvature along the effects and the scale's logarithm s grows like e^{2s}, so the stiffest
states are the rare ones at the largest scales. The final window (10 % of burn-in) is too short
to visit them, the sampling phase is not: on eight schools a step set from the curvature the
final window measured left h·√λ ≈ 3 (beyond symplectic Euler's limit of 2) at the largest scale
the sampling phase reached, and that chain diverged thousands of steps after warm-up.

For a dense mass (at most :data:`.mass.DENSE_MAX_DIM` parameters) warm-up therefore keeps, per
chain, the states at which each coordinate of θ was largest and smallest, over the window that
set the final mass and the final window (two generations of :class:`Extremes`: the current one
is handed on at every new mass). At the end of warm-up λ_max is measured at each of these 4d
states, and the step is held to half the stability limit at the stiffest of them as well
(:func:`.step_size.params_at`'s ``stiffest``). The half-limit margin covers the sampling
phase's further excursions: λ may grow four times beyond the windows' edges before the frozen
step is unstable. (Measuring at states moved 1.25 times as far from the window's mean, what the
growth of a Gaussian coordinate's maximum over a 100 times longer run suggests, cut eight
schools' steps fivefold and its bulk ESS below 200 of 14,000 draws; at the edges themselves
the steps fell twofold, the ESS stayed above 1,300 and no chain diverged.) A diagonal mass
(networks) keeps no extremes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

PyTree = Any


class Extremes(NamedTuple):
    """Per coordinate i of the flattened θ: the largest and smallest value seen and the whole
    flattened θ at which each was seen ((d,) values, (d, d) states, row i for coordinate i)."""

    high: jax.Array
    high_states: jax.Array
    low: jax.Array
    low_states: jax.Array


def empty(position: PyTree) -> Extremes:
    """No state seen yet (±inf values; the states are the position, never read before a
    state is recorded)."""
    flat = ravel_pytree(position)[0]
    states = jnp.broadcast_to(flat, (flat.size, flat.size))
    return Extremes(jnp.full_like(flat, -jnp.inf), states, jnp.full_like(flat, jnp.inf), states)


def record(extremes: Extremes, position: PyTree) -> Extremes:
    """``extremes`` with one more state."""
    flat = ravel_pytree(position)[0]
    higher, lower = flat > extremes.high, flat < extremes.low
    return Extremes(
        jnp.where(higher, flat, extremes.high),
        jnp.where(higher[:, None], flat[None, :], extremes.high_states),
        jnp.where(lower, flat, extremes.low),
        jnp.where(lower[:, None], flat[None, :], extremes.low_states),
    )


def probes(generations: tuple[Extremes, ...]) -> tuple[jax.Array, jax.Array]:
    """The states to measure the curvature at, every recorded extreme state as (k, d) rows, and
    whether each was recorded (a generation may have seen nothing)."""
    rows, seen = [], []
    for g in generations:
        rows += [g.high_states, g.low_states]
        seen += [jnp.isfinite(g.high), jnp.isfinite(g.low)]
    return jnp.concatenate(rows), jnp.concatenate(seen)


def stiffest(
    curvature_at: Callable[[PyTree], jax.Array],
    generations: tuple[Extremes, ...],
    unravel: Callable[[jax.Array], PyTree],
) -> jax.Array:
    """The largest finite λ_max (``curvature_at``, at a θ pytree) over :func:`probes`' states,
    one after another (0 when none is finite)."""
    states, seen = probes(generations)

    def one(carry: jax.Array, row: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, None]:
        state, ok = row
        lam = curvature_at(unravel(state))
        return jnp.where(ok & jnp.isfinite(lam), jnp.maximum(carry, lam), carry), None

    zero = jnp.zeros((), states.dtype)
    return jax.lax.scan(one, zero, (states, seen))[0]

"""Warm-up's guard against unstable steps: a step after which the energy jumped is undone.

Along stable dynamics at temperature T, Ũ falls while a chain descends towards the posterior and
then fluctuates by about √d·T a step, plus the minibatch noise s_Ũ; beyond the integrator's
stability limit it grows by orders of magnitude within a few steps. A warm-up step after which
Ũ at the new state rose by more than T·(:data:`JUMP_NATS` + :data:`JUMP_PER_SQRT_DIM`·√d) +
:data:`JUMP_NOISE`·s_Ũ (Stan calls an energy error of 1000 a divergence), or at which Ũ or ∇Ũ is
not finite, is undone: the chain goes back to the state before it and its step size is halved. A
step to a non-finite state is rejected (the chain stays), also halving h. At T = 0 only
non-finite values count. Without it a start where the curvature understates the posterior's (a
hierarchical model's scales at a start with weights near zero) let the first steps throw a
chain to where the energy overflows, a state no later step could leave. The kinetic energy is
left out: a thermostat's (SGNHT's ξ) rises legitimately while a chain descends.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

JUMP_NATS = 1000.0
JUMP_PER_SQRT_DIM = 10.0
JUMP_NOISE = 20.0
#: minibatch energies at the start whose spread s_Ũ sets the guard's noise margin
ENERGY_NOISE_BATCHES = 8


class Guard(NamedTuple):
    """What warm-up needs to undo a step: the kernel state before the current one and its
    minibatch energy Ũ (NaN at the start), and s_Ũ, the spread of the minibatch energy across
    minibatches at the start (0 with full batches)."""

    previous: Any
    energy: jax.Array
    energy_noise: jax.Array


class Verdict(NamedTuple):
    """One warm-up step judged: ``taken`` (move to the new state), ``undone`` (go back to the
    state before the current one) and ``ok`` (neither failed: h is not halved)."""

    taken: jax.Array
    undone: jax.Array
    ok: jax.Array


def start_guard(state: Any, energy_noise: jax.Array) -> Guard:
    """The guard at warm-up's start: the start is its own previous state, with no Ũ yet."""
    nan = jnp.full((), jnp.nan, jnp.float32)
    return Guard(state, nan, energy_noise.astype(jnp.float32))


def energy_jump_limit(guard: Guard, temperature: jax.Array, dim: int) -> jax.Array:
    """The rise of Ũ over one step beyond which the step is undone (module docstring)."""
    scale = JUMP_NATS + JUMP_PER_SQRT_DIM * math.sqrt(dim)
    return jnp.where(
        temperature > 0, temperature * scale + JUMP_NOISE * guard.energy_noise, jnp.inf
    )


def judge(
    guard: Guard,
    energy: jax.Array,
    grad_norm: jax.Array,
    new_state_finite: jax.Array,
    live: jax.Array,
    temperature: jax.Array,
    dim: int,
) -> Verdict:
    """The verdict on a step from a state whose Ũ is ``energy`` (and ‖∇Ũ‖ ``grad_norm``) to a
    new state (``new_state_finite``), for a chain that has not failed (``live``)."""
    here_bad = ~(jnp.isfinite(energy) & jnp.isfinite(grad_norm))
    limit = energy_jump_limit(guard, temperature, dim)
    here_bad = here_bad | (energy - guard.energy > limit)  # False at the start (NaN)
    ok = new_state_finite & ~here_bad
    return Verdict(live & ok, live & here_bad, ok)


def advance(guard: Guard, verdict: Verdict, before: Any, energy: jax.Array) -> Guard:
    """The guard after a judged step from ``before`` (whose Ũ is ``energy``): a taken step makes
    ``before`` the previous state; an undone one goes back there, whose Ũ stays the reference
    (the next step compares it with itself on another minibatch)."""

    def where(mask: jax.Array, a: Any, b: Any) -> Any:
        return jax.tree.map(lambda x, y: jnp.where(mask, x, y), a, b)

    energy = energy.astype(guard.energy.dtype)
    return Guard(
        where(verdict.taken, before, guard.previous),
        where(verdict.taken, energy, guard.energy),
        guard.energy_noise,
    )

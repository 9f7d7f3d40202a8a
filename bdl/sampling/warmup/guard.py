"""Warm-up's guard against unstable steps: a step after which the energy jumped is undone.

The guard watches the Hamiltonian H = Ũ(θ) + g(θ, r) of the recipe (the minibatch energy plus
the kinetic energy, thermostat included; g = 0 for first-order kernels). The deterministic part
of a stable step conserves H up to the integrator's O(h²) error, friction only removes energy,
and the injected noise adds on average h·γ·T per momentum coordinate (SGHMC's γ, SGNHT's A); Ũ
also fluctuates by about √d·T a step, plus the minibatch noise s_Ũ. Beyond the integrator's
stability limit H grows by orders of magnitude within a few steps. A warm-up step after which H
at the new state rose by more than

    T·(:data:`JUMP_NATS` + :data:`JUMP_PER_SQRT_DIM`·√d + h·γ·d) + :data:`JUMP_NOISE`·s_Ũ,

or at which Ũ or ∇Ũ is not finite, is undone: the chain goes back to the state before it and its
step size is halved. A step to a non-finite state is rejected (the chain stays), also halving h.
At T = 0 only non-finite values count.

Watching Ũ alone missed the instability that matters most for hierarchical models: one step into
a stiff region (a non-centred model's scale at a rare large value) raises Ũ only by tens of
nats, but the next gives the momentum hundreds, and the chain coasts along a flat direction
until a scale's logarithm reaches the float floor, where no later step can leave (seen on eight
schools: log τ from 4 to −87 in 13 steps, Ũ +33, then K +450). A start where the curvature
understates the posterior's (a scale at a start with weights near zero) fails the same way.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

JUMP_NATS = 20.0
JUMP_PER_SQRT_DIM = 10.0
JUMP_NOISE = 20.0
#: minibatch energies at the start whose spread s_Ũ sets the guard's noise margin
ENERGY_NOISE_BATCHES = 8


class Guard(NamedTuple):
    """What warm-up needs to undo a step: the kernel state before the current one and its
    minibatch energy Ũ (NaN at the start), and s_Ũ, the spread of the minibatch energy across
    minibatches at the start (0 with full batches). The kinetic energies of both states are
    evaluated when a step is judged, under the kernel's current values (SGNHT's thermostat
    energy depends on A, which a halved step changes)."""

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


def energy_jump_limit(
    guard: Guard, temperature: jax.Array, dim: int, injection: jax.Array | float = 0.0
) -> jax.Array:
    """The rise of H over one step beyond which the step is undone (module docstring);
    ``injection`` is h·γ (0 for first-order kernels), the noise's mean energy per momentum
    coordinate and unit T."""
    scale = JUMP_NATS + JUMP_PER_SQRT_DIM * math.sqrt(dim) + injection * dim
    return jnp.where(
        temperature > 0, temperature * scale + JUMP_NOISE * guard.energy_noise, jnp.inf
    )


def judge(
    guard: Guard,
    energy: jax.Array,
    kinetic: jax.Array,
    previous_kinetic: jax.Array,
    grad_norm: jax.Array,
    new_state_finite: jax.Array,
    live: jax.Array,
    temperature: jax.Array,
    dim: int,
    injection: jax.Array | float = 0.0,
) -> Verdict:
    """The verdict on a step from a state whose minibatch energy is ``energy`` (kinetic energy
    ``kinetic``, ‖∇Ũ‖ ``grad_norm``) to a new state (``new_state_finite``), for a chain that has
    not failed (``live``); ``previous_kinetic`` is the kinetic energy of the guard's previous
    state. The rise judged is that of H = Ũ + g from the previous state to the current one."""
    rise = (energy + kinetic) - (guard.energy + previous_kinetic)
    here_bad = ~(jnp.isfinite(energy) & jnp.isfinite(kinetic) & jnp.isfinite(grad_norm))
    limit = energy_jump_limit(guard, temperature, dim, injection)
    here_bad = here_bad | (rise > limit)  # False at the start (NaN)
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

"""What the sampling loop carries per chain, and the divergence status in it.

A chain fails (:func:`mark`) when a step gives a non-finite energy, gradient or state, or when
the minibatch energy Ũ of its state is beyond its far-out limit, ``reference + margin``
(:func:`far_out`): ``reference`` is the energy measured at its start plus an allowance for the
minibatch noise (:func:`start_reference`), ``margin`` the thermal bound of
:mod:`bdl.sampling.run.failures`, which derives both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

#: minibatch energies at a chain's start whose mean and spread set its reference
REFERENCE_BATCHES = 8
#: standard deviations of the start's minibatch energy allowed for Ũ's noise at a later state
NOISE_SDS = 1e3


class Status(NamedTuple):
    """Per chain: whether it diverged, at which step (−1: never) and the minibatch energy Ũ at
    which it was flagged (NaN: never); its far-out limit's two parts, ``reference`` (measured
    by the run's start program; +∞ where the start's energies are not finite) and
    ``margin`` (+∞: no far-out test, as at T = 0)."""

    diverged: jax.Array
    step: jax.Array
    energy: jax.Array
    reference: jax.Array
    margin: jax.Array


class Chains(NamedTuple):
    """Everything the loop carries per chain (leading chain axis): kernel states, minibatch
    streams, divergence status and, while a kernel is adapted, its warm-up
    (:class:`bdl.sampling.warmup.AdaptationState`; ``()`` for a kernel with a step size)."""

    states: Any
    streams: Any
    status: Status
    warmup: Any = ()


def healthy_status(num_chains: int) -> Status:
    nan = jnp.full((num_chains,), jnp.nan, jnp.float32)
    return Status(
        jnp.zeros((num_chains,), bool), jnp.full((num_chains,), -1, jnp.int32), nan, nan,
        jnp.full((num_chains,), jnp.inf, jnp.float32),
    )  # fmt: skip


def mark(status: Status, failed: jax.Array, t: jax.Array, energy: jax.Array) -> Status:
    """``status`` with a chain that ``failed`` at step ``t`` (per chain or shared) with
    minibatch energy ``energy`` marked diverged (the first time)."""
    first = failed & ~status.diverged
    return status._replace(
        diverged=status.diverged | failed,
        step=jnp.where(first, t, status.step),
        energy=jnp.where(first, energy.astype(status.energy.dtype), status.energy),
    )


def far_out(status: Status, energy: jax.Array) -> jax.Array:
    """Whether a finite minibatch energy ``energy`` is beyond the chain's far-out limit (False
    while the limit is unmeasured or infinite, and for a non-finite energy)."""
    return jnp.isfinite(energy) & (energy > status.reference + status.margin)


def judged(
    status: Status, info: Any, state_finite: jax.Array, t: jax.Array, provisional: bool = False
) -> tuple[Status, jax.Array]:
    """A step t's verdict from its ``Info`` and whether the new state is finite: ``status`` with
    a failing chain marked, and whether the step is ok. A finite chain is far out when Ũ at the
    start of step t is beyond its limit, so step t − 1 took it there and is its divergence
    step; ``provisional``: marked at t (a draw's last step, replayed to find the exact one)."""
    finite = jnp.isfinite(info.energy) & jnp.isfinite(info.grad_norm) & state_finite
    far = finite & far_out(status, info.energy)
    ok = finite & ~far
    at = t if provisional else jnp.where(far, jnp.maximum(t - 1, 0), t)
    return mark(status, ~ok, at, info.energy), ok


def warmed(
    status: Status,
    failed: jax.Array,
    live: jax.Array,
    accepted: jax.Array,
    energy: jax.Array,
    t: jax.Array,
) -> Status:
    """``status`` after warm-up step t: a chain that ``failed`` at every step size is marked at t
    (with the step's energy), a live one whose last accepted state (its guard's, of energy
    ``accepted``: a step the guard undid does not count) is far out at t − 1."""
    far = live & ~failed & far_out(status, accepted)
    at = jnp.where(failed, t, jnp.maximum(t - 1, 0))
    return mark(status, failed | far, at, jnp.where(failed, energy, accepted))


def start_reference(energies: jax.Array) -> jax.Array:
    """A chain's reference from :data:`REFERENCE_BATCHES` minibatch energies at its start:
    their mean, an estimate of U(θ₀), plus :data:`NOISE_SDS` times their standard deviation
    (0 with full batches); +∞ where they are not finite (no far-out test for the chain)."""
    sd = jnp.std(energies, ddof=1) if energies.shape[0] > 1 else jnp.zeros_like(energies[0])
    reference = (jnp.mean(energies) + NOISE_SDS * sd).astype(jnp.float32)
    return jnp.where(jnp.isfinite(reference), reference, jnp.inf)


def reference_at(step: Callable[..., tuple], c: Chains, key: jax.Array, t: jax.Array) -> jax.Array:
    """One chain's reference (:func:`start_reference`) from ``step(c, key, t) -> (state, stream,
    info)``: Ũ at its state on the minibatches of steps t, t + 1, … (only the step's energy is
    used: the rest of the step is dead code)."""

    def energy(k: jax.Array) -> jax.Array:
        return step(c, key, t + k)[2].energy

    return start_reference(jax.lax.map(energy, jnp.arange(REFERENCE_BATCHES)))


def all_finite(tree: Any) -> jax.Array:
    """Whether every floating leaf of ``tree`` is finite (one fused reduction per leaf)."""
    leaves = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(jnp.result_type(x), jnp.floating)]
    return jnp.all(jnp.stack([jnp.isfinite(jnp.sum(x)) for x in leaves])) if leaves else True

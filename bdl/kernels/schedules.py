"""Step-size schedules ``t -> h_t`` (any Optax schedule works too).

``cyclical_cosine`` is the schedule of Zhang et al. (2020, Eq. 1):

    h_t = h₀/2 · [cos(π · mod(t, K) / K) + 1],   K = ⌈T_total / M⌉ steps per cycle,

written with a 0-based step t (their t − 1).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

Schedule = Callable[[jax.Array], jax.Array]


def constant(value: float) -> Schedule:
    if not value > 0:
        raise ValueError(f"constant(value=...) must be > 0; got {value}.")
    return lambda step: jnp.asarray(value)


def polynomial_decay(init: float, end: float, power: float, num_steps: int) -> Schedule:
    """h_t from ``init`` to ``end`` as (1 − t/num_steps)^power (``optax.polynomial_schedule``)."""
    if not (init > 0 and end > 0):
        raise ValueError("polynomial_decay: init and end must be > 0.")
    return optax.polynomial_schedule(init, end, power, num_steps)


def cyclical_cosine(init: float, cycle_length: int) -> Schedule:
    """Zhang et al. (2020) cosine cycles of ``cycle_length`` steps, restarting at ``init``."""
    if not init > 0:
        raise ValueError(f"cyclical_cosine(init=...) must be > 0; got {init}.")
    if cycle_length <= 0:
        raise ValueError(f"cyclical_cosine(cycle_length=...) must be > 0; got {cycle_length}.")

    def schedule(step: jax.Array) -> jax.Array:
        phase = jnp.mod(jnp.asarray(step) * 1.0, cycle_length) / cycle_length
        return init / 2.0 * (jnp.cos(jnp.pi * phase) + 1.0)

    return schedule

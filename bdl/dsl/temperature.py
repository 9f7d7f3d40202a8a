"""Posterior temperature: a constant T ≥ 0 or a schedule T(t) of the step (for ramps).

The target is π_T(θ) ∝ exp(−U(θ)/T); T enters the dynamics only as the scale of the injected
noise and of the correction Γ, so T = 0 (the optimiser limit) is legal.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax

from bdl import schedules
from bdl.utils.arguments import shown

TemperatureLike = float | int | Callable[[jax.Array], jax.Array]


def check_temperature(temperature: TemperatureLike) -> None:
    """Raise a clear ``ValueError`` for a negative, NaN or infinite constant temperature and a
    ``TypeError`` for one that is no number (a string, a bool)."""
    if callable(temperature):
        return
    if isinstance(temperature, bool | str):
        value = None
    else:
        try:
            value = float(temperature)
        except (TypeError, ValueError):
            value = None
    if value is None:
        raise TypeError(
            "temperature must be a float T >= 0 or a schedule, a callable step -> T; got "
            f"{shown(temperature)}."
        )
    if not 0 <= value < math.inf:
        raise ValueError(
            f"temperature must be >= 0 and finite (T = 1 is the Bayes posterior, T < 1 a cold "
            f"posterior, T = 0 the optimiser limit); got {temperature}."
        )


def as_schedule(temperature: TemperatureLike) -> Callable[[jax.Array], jax.Array]:
    """A jittable ``step -> T`` for a constant or a schedule."""
    check_temperature(temperature)
    return schedules.as_schedule(temperature, "temperature", allow_zero=True)


def linear_ramp(start: float, end: float, num_steps: int) -> Callable[[jax.Array], jax.Array]:
    """T(t) moving linearly from ``start`` to ``end`` over ``num_steps`` steps, then constant.

    Wenzel et al. (2020, Sec. 4) ramp the temperature up during the first epochs of sampling.
    """
    check_temperature(start)
    check_temperature(end)
    return schedules.linear_ramp(start, end, num_steps)

"""Posterior temperature: a constant T ≥ 0 or a schedule T(t) of the step (for ramps).

The target is π_T(θ) ∝ exp(−U(θ)/T); T enters the dynamics only as the scale of the injected
noise and of the correction Γ, so T = 0 (the optimiser limit) is legal.
"""

from __future__ import annotations

from collections.abc import Callable

import jax

from bdl import schedules

TemperatureLike = float | int | Callable[[jax.Array], jax.Array]


def check_temperature(temperature: TemperatureLike) -> None:
    """Raise a clear ``ValueError`` for a negative or non-numeric constant temperature."""
    if callable(temperature):
        return
    try:
        value = float(temperature)
    except (TypeError, ValueError):
        raise TypeError(
            "temperature must be a float T >= 0 or a schedule, a callable step -> T; got "
            f"{type(temperature).__name__}."
        ) from None
    if not value >= 0:
        raise ValueError(
            f"temperature must be >= 0 (T = 1 is the Bayes posterior, T < 1 a cold posterior, "
            f"T = 0 the optimiser limit); got {temperature}."
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

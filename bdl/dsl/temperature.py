"""Posterior temperature: a constant T ≥ 0 or a schedule T(t) of the step (for ramps).

The target is π_T(θ) ∝ exp(−U(θ)/T); T enters the dynamics only as the scale of the injected
noise and of the correction Γ, so T = 0 (the optimiser limit) is legal.

Two tempering modes (``Model(tempering=...)``), with N the effective data-set size
(``Model(effective_size=N)``, default n) and the likelihood term scaled by N/n:

* ``"posterior"`` (Wenzel et al. 2020, Eq. 4): U(θ) = −(N/n) Σ_i log p(y_i | x_i, θ) − log p(θ),
  π(θ) ∝ exp(−U(θ)/T) — prior and likelihood tempered alike;
* ``"likelihood"``: U(θ) = −(N/n) Σ_i log p(y_i | x_i, θ) − T log p(θ), so that
  π(θ) ∝ exp(−U(θ)/T) = p(θ) Π_i p(y_i | x_i, θ)^(N/(nT)) — the prior stays at T = 1.

Writing the likelihood-only target with the prior weighted by T keeps T the scale of the noise
(so T = 0 is still the optimiser limit, here the maximum-likelihood one) and every kernel
unchanged.
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


#: the values of ``Model(tempering=...)``
TEMPERINGS = ("posterior", "likelihood")


def check_tempering(tempering: str, temperature: TemperatureLike) -> None:
    """An unknown mode, or likelihood-only tempering with a schedule (the prior's weight T would
    change the energy from step to step), raise ``ValueError`` naming the argument."""
    if tempering not in TEMPERINGS:
        raise ValueError(
            f"tempering must be 'posterior' (prior and likelihood tempered, exp(−U/T)) or "
            f"'likelihood' (the likelihood only, the prior at T = 1); got {shown(tempering)}."
        )
    if tempering == "likelihood" and callable(temperature):
        raise ValueError(
            "tempering='likelihood' needs a constant temperature T: a schedule would change the "
            "prior's weight in the energy from step to step. Use tempering='posterior' with the "
            "schedule, or a constant T."
        )


def check_effective_size(effective_size: object) -> float:
    """N > 0, finite: the number of examples the likelihood counts as."""
    if isinstance(effective_size, bool | str):
        value = None
    else:
        try:
            value = float(effective_size)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            value = None
    if value is None or not 0 < value < math.inf:
        raise ValueError(
            f"effective_size must be a number N > 0 (the size of the data set the likelihood "
            f"counts as; None for the training-set size n); got {shown(effective_size)}."
        )
    return value


def as_schedule(temperature: TemperatureLike) -> Callable[[jax.Array], jax.Array]:
    """A jittable ``step -> T`` for a constant or a schedule."""
    check_temperature(temperature)
    return schedules.as_schedule(temperature, "temperature", allow_zero=True)


def linear_ramp(start: float, end: float, num_steps: int) -> Callable[[jax.Array], jax.Array]:
    """T(t) moving linearly from ``start`` to ``end`` over ``num_steps`` steps, then constant.

    Wenzel et al. (2020, Sec. 4) ramp the temperature up during the first epochs of sampling.

    Args:
        start: T at step 0.
        end: T from step ``num_steps`` on.
        num_steps: the length of the ramp, in steps.

    Returns:
        The schedule ``step -> T``, for ``Model(temperature=...)``.
    """
    check_temperature(start)
    check_temperature(end)
    return schedules.linear_ramp(start, end, num_steps)

"""Schedules ``t -> value`` of the 0-based step t: step sizes, temperatures, cycle factors.

Any Optax schedule works where a schedule is accepted. The cosine cycle of Zhang et al. (2020,
Eq. 1), written with a 0-based step (their t − 1),

    c_K(t) = ½ · [cos(π · mod(t, K) / K) + 1],   K steps per cycle,

is :func:`cosine_cycle`; cyclical SG-MCMC multiplies the base step by it and Wenzel et al.'s
scheme uses it after its sampling start.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from bdl.utils import arguments

Schedule = Callable[[jax.Array], jax.Array]


def as_schedule(
    value: float | Schedule, name: str = "step_size", *, allow_zero: bool = False
) -> Schedule:
    """A jittable ``step -> value`` for a constant or a schedule; a constant must be > 0
    (≥ 0 with ``allow_zero``), else ``ValueError`` naming ``name``.

    Args:
        value: a number or a function ``step -> value``.
        name: the argument's name in the error message.
        allow_zero: accept a constant 0.

    Returns:
        The schedule ``step -> value``.

    Raises:
        ValueError: a constant ≤ 0 (< 0 with ``allow_zero``).
        TypeError: neither a number nor a function.
    """
    if callable(value):
        return value
    bound = ">= 0" if allow_zero else "> 0"
    try:
        v = arguments.number(value, name, **({"at_least": 0.0} if allow_zero else {"above": 0.0}))
    except TypeError:
        raise TypeError(
            f"{name} must be a float {bound} or a schedule step -> value; "
            f"got {arguments.shown(value)}."
        ) from None
    return lambda step: jnp.asarray(v)


def constant(value: float) -> Schedule:
    """The constant ``value`` > 0.

    Args:
        value: the value, > 0.

    Returns:
        The schedule.
    """
    return as_schedule(value, "constant(value=...)")


def polynomial_decay(init: float, end: float, power: float, num_steps: int) -> Schedule:
    """From ``init`` to ``end`` as (1 − t/num_steps)^power (``optax.polynomial_schedule``).

    Args:
        init: the value at step 0.
        end: the value from step ``num_steps`` on.
        power: the exponent.
        num_steps: the steps of the decay.

    Returns:
        The schedule.
    """
    for arg, value in (("init", init), ("end", end)):
        arguments.number(value, f"polynomial_decay({arg}=...)", above=0.0)
    arguments.integer(num_steps, "polynomial_decay(num_steps=...)", 1)
    import optax  # here, not at the top: the kernels (and `bdl kernels`) need no Optax

    return optax.polynomial_schedule(init, end, power, num_steps)


def cosine_cycle(step: jax.Array, cycle_length: int) -> jax.Array:
    """c_K(t) = ½[cos(π·mod(t, K)/K) + 1] ∈ (0, 1] (Zhang et al. 2020, Eq. 1).

    Args:
        step: t.
        cycle_length: K, steps per cycle.

    Returns:
        c_K(t).
    """
    phase = jnp.mod(jnp.asarray(step) * 1.0, cycle_length) / cycle_length
    return 0.5 * (jnp.cos(jnp.pi * phase) + 1.0)


def cyclical_cosine(init: float, cycle_length: int) -> Schedule:
    """Cosine cycles of ``cycle_length`` steps restarting at ``init``: init·c_K(t).

    Args:
        init: the value at the start of each cycle.
        cycle_length: K, steps per cycle.

    Returns:
        The schedule.
    """
    arguments.number(init, "cyclical_cosine(init=...)", above=0.0)
    arguments.integer(cycle_length, "cyclical_cosine(cycle_length=...)", 1)
    return lambda step: init * cosine_cycle(step, cycle_length)


def linear_ramp(start: float, end: float, num_steps: int, *, delay: int = 0) -> Schedule:
    """From ``start`` to ``end`` linearly over ``num_steps`` steps after ``delay``, then ``end``.

    Wenzel et al. (2020, Sec. 4) ramp the temperature up before sampling starts.

    Args:
        start: the value at step ``delay``.
        end: the value from step ``delay + num_steps`` on.
        num_steps: the steps of the ramp.
        delay: the steps at ``start`` before the ramp.

    Returns:
        The schedule.
    """
    arguments.integer(num_steps, "linear_ramp(num_steps=...)", 1)
    arguments.integer(delay, "linear_ramp(delay=...)", 0)
    for arg, value in (("start", start), ("end", end)):
        arguments.number(value, f"linear_ramp({arg}=...)")

    def schedule(step: jax.Array) -> jax.Array:
        frac = jnp.clip((jnp.asarray(step) - delay) * 1.0 / num_steps, 0.0, 1.0)
        return start + (end - start) * frac

    return schedule

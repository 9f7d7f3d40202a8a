"""Whether float32 is to blame where the energy is not finite: the same energy evaluated in
float64 on the host.

A model can be well defined where float32 arithmetic fails: the Cholesky factor of a Gaussian
process's covariance with a jitter of 1e-10 on its diagonal does not exist in float32 (the
jitter is below its resolution, so rounding leaves the matrix indefinite) and exists in
float64. The start check and a chain's divergence then report a NaN energy that no change of
the model's data or prior explains. :func:`float64_note`, run only on those failure paths,
re-evaluates whether U(θ) and ∇U(θ) are finite at the position with every array of the target
and the position cast to float64 (JAX's 64-bit mode switched on for that evaluation alone; in
blocks of the minibatch size), and, when both are finite there, returns the sentence that says
so and how to run in float64 (docs/precision.md). :func:`check_precision` refuses a target
compiled in another precision than the one JAX computes in now.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from bdl.compile.target import Target
from bdl.utils.dtypes import as_float, float_dtype

PyTree = Any

#: how to switch the process to float64, in messages
SWITCH = (
    "set JAX_ENABLE_X64=1 in the environment, or call "
    'jax.config.update("jax_enable_x64", True) before bdl.compile; the run is then in float64 '
    "throughout (docs/precision.md)"
)


def check_precision(target: Target, owner: str = "bdl.sample") -> None:
    """Raise ``ValueError`` when ``target`` was compiled in another floating-point type than
    the one JAX computes in now (its 64-bit mode switched on or off since ``bdl.compile``):
    its arrays and the run's new ones would mix float32 and float64.

    Args:
        target: a compiled model or potential.
        owner: what is refused, for the message.

    Raises:
        ValueError: naming both types and the fix.
    """
    kinds = {
        np.dtype(leaf.dtype)
        for leaf in jax.tree.leaves(target.initial_position)
        if hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.floating)
    }
    now = float_dtype()
    if not kinds or kinds == {now}:
        return
    was = ", ".join(sorted(k.name for k in kinds))
    raise ValueError(
        f"{owner}: the target was compiled in {was}, but JAX's 64-bit mode is "
        f"{'on' if now == np.float64 else 'off'} now, so the run would compute in {now.name}. "
        "bdl.compile reads the mode: switch it (JAX_ENABLE_X64=1, or "
        'jax.config.update("jax_enable_x64", True)) before compiling, and compile again '
        "(docs/precision.md)."
    )


def finite_in_float64(
    target: Target, position: PyTree, finite: Callable[[Target, PyTree], jax.Array]
) -> bool:
    """``finite(target, position)`` evaluated with every array of the target and the position
    cast to float64, JAX's 64-bit mode switched on for this evaluation alone (compiled for it).

    Args:
        target: a compiled model or potential.
        position: a position of ``target`` (any floating-point type).
        finite: whether U and ∇U are finite at a position, traced
            (:func:`bdl.compile.start_check.start_is_finite`: in blocks of the minibatch size,
            so that it needs no more memory than a step).

    Returns:
        Whether both are finite in float64.
    """
    with jax.enable_x64(True):
        wide = as_float(target, jnp.float64)
        theta = as_float(position, jnp.float64)
        return bool(eqx.filter_jit(finite)(wide, theta))


def float64_note(
    target: Target, position: PyTree, finite: Callable[[Target, PyTree], jax.Array]
) -> str:
    """The sentence saying that the energy and its gradient at ``position``, not finite in the
    float32 arithmetic the run uses, are finite in float64, and how to run in float64; ``""``
    when the run is in float64 already, when float64 does not help, or when the target cannot
    be evaluated in float64.

    Args:
        target: a compiled model or potential, in float32.
        position: where its energy or gradient is not finite.
        finite: as for :func:`finite_in_float64`.

    Returns:
        The sentence, or ``""``.
    """
    if float_dtype() == np.float64:
        return ""
    try:
        if not finite_in_float64(target, position, finite):
            return ""
    except Exception:  # a network that will not run in float64: nothing to say
        return ""
    return (
        "in float64 the energy and its gradient are finite here: float32 rounding, not the "
        "model, makes them NaN or ±∞ (e.g. the Cholesky factor of a covariance whose jitter is "
        "below float32's resolution). Run in float64: " + SWITCH
    )

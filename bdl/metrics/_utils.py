"""Shared input handling for :mod:`bdl.metrics`: float casting, shape checks, and the labels
and targets checked on the host, before anything is traced, by the rules of
:mod:`bdl.utils.labels` (those of ``bdl.compile``)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bdl.utils import labels as label_rules

#: Lower clip applied to probabilities before taking a logarithm (NLL, KL, entropy): −log(1e-12)
#: ≈ 27.63 nats is the largest per-input penalty. It is representable in float32 (normal range
#: down to 1.2e-38), so the clip behaves the same with and without ``jax_enable_x64``.
PROB_EPS: float = 1e-12


def as_float(x: jax.typing.ArrayLike) -> jax.Array:
    """``x`` as a floating JAX array (integers and booleans become the default float)."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    return x


def check_probs(probs: jax.Array, name: str = "probs") -> None:
    """Static check that ``probs`` has a trailing class axis."""
    if probs.ndim < 1:
        raise ValueError(f"{name} must have a trailing class axis, got shape {probs.shape}.")


def checked_labels(probs: Any, labels: Any, needs: str) -> Any:
    """``labels`` checked against ``probs`` ``(..., K)``: shape ``probs.shape[:-1]``, and, when
    the values are known (not traced under ``jax.jit``), finite integral class indices
    0, …, K−1, returned as int32 (an integer-valued float such as ``1.0`` is accepted, as
    ``bdl.compile`` accepts it). Traced labels cannot be read here, so they must have an
    integer or boolean dtype. ``needs``: the metric, named in messages.

    Raises:
        ValueError: a wrong shape, a NaN, a fractional label, or one outside 0, …, K−1.
        TypeError: non-numeric labels, or traced labels of a floating dtype.
    """
    probs_shape, shape = tuple(np.shape(probs)), tuple(np.shape(labels))
    if len(probs_shape) < 1:
        raise ValueError(f"probs must have a trailing class axis, got shape {probs_shape}.")
    if shape != probs_shape[:-1]:
        raise ValueError(
            f"labels of shape {shape} do not match probs of shape {probs_shape}; expected "
            f"labels.shape == probs.shape[:-1] = {probs_shape[:-1]}: one label per row of probs."
        )
    if isinstance(labels, jax.core.Tracer):
        if not (jnp.issubdtype(labels.dtype, jnp.integer) or labels.dtype == jnp.bool_):
            raise TypeError(
                f"labels traced under jax.jit must have an integer dtype (their values cannot be "
                f"checked there); got {labels.dtype}. Convert them before the jitted call, e.g. "
                "labels.astype(jnp.int32), or pass them as a NumPy array."
            )
        return labels
    k = probs_shape[-1]
    return label_rules.check_class_labels(
        np.asarray(labels),
        "labels",
        k,
        needs=needs,
        have=f"probs has {k} classes",
        wider="pass probs with {k} columns",
    )


def checked_targets(targets: Any) -> Any:
    """Regression ``targets``: numeric and finite when their values are known (not traced),
    returned as float32; traced targets are returned as they are.

    Raises:
        ValueError: a NaN or infinite target (it would make the metric NaN).
        TypeError: non-numeric targets.
    """
    if isinstance(targets, jax.core.Tracer):
        return targets
    return label_rules.check_finite_targets(np.asarray(targets), "targets")


def check_same_shape(p: jax.Array, q: jax.Array) -> None:
    """Static check that two predictive arrays ``(..., K)`` have the same shape."""
    check_probs(p, "p")
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {p.shape} and {q.shape}.")


def safe_log(p: jax.Array, eps: float = PROB_EPS) -> jax.Array:
    """log(max(p, eps)): finite for p = 0, with finite gradients."""
    return jnp.log(jnp.maximum(p, eps))

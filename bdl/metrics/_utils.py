"""Shared input handling for :mod:`bdl.metrics` (float casting and shape checks)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

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


def check_probs_labels(probs: jax.Array, labels: jax.Array) -> None:
    """Static check that ``probs`` is ``(..., K)`` and ``labels`` is the matching ``(...)``."""
    check_probs(probs)
    if labels.shape != probs.shape[:-1]:
        raise ValueError(
            f"labels of shape {labels.shape} do not match probs of shape {probs.shape}; "
            "expected labels.shape == probs.shape[:-1]."
        )


def check_same_shape(p: jax.Array, q: jax.Array) -> None:
    """Static check that two predictive arrays ``(..., K)`` have the same shape."""
    check_probs(p, "p")
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {p.shape} and {q.shape}.")


def safe_log(p: jax.Array, eps: float = PROB_EPS) -> jax.Array:
    """log(max(p, eps)): finite for p = 0, with finite gradients."""
    return jnp.log(jnp.maximum(p, eps))

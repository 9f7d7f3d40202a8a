"""Per-input divergences between categorical distributions: KL divergence and entropy.

Building blocks of :mod:`bdl.metrics.agreement`, :mod:`bdl.metrics.diversity` and
:mod:`bdl.metrics.ood`. They reduce only the trailing class axis: ``(..., K) -> (...)``. Pure
``jax.numpy``, jittable, with finite gradients at zero probabilities.

Conventions: 0·log 0 = 0, and logarithms of probabilities are clipped at ``eps`` = 1e-12
(log max(p, eps)), so a class with q_k = 0 < p_k costs p_k·(log p_k − log 1e-12) instead of ∞.
Natural logarithms (nats).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from bdl.metrics._utils import PROB_EPS, as_float, check_probs, check_same_shape, safe_log

__all__ = ["entropy", "kl_divergence"]


@partial(jax.jit, static_argnames=("eps",))
def kl_divergence(
    p: jax.typing.ArrayLike, q: jax.typing.ArrayLike, eps: float = PROB_EPS
) -> jax.Array:
    """KL(p‖q) = Σ_k p_k (log p_k − log q_k) per input, over the trailing class axis.

    Terms with p_k = 0 are 0; both logarithms are clipped at ``eps`` (so KL(p‖p) = 0 exactly).
    Not symmetric; see :func:`bdl.metrics.symmetrised_kl`.

    Args:
        p: probabilities ``(..., K)``.
        q: probabilities ``(..., K)``, same shape.
        eps: lower clip inside the logarithms.

    Returns:
        KL per input, shape ``(...)``, in nats (≥ 0 up to rounding for normalised p, q).
    """
    p, q = as_float(p), as_float(q)
    check_same_shape(p, q)
    terms = jnp.where(p > 0, p * (safe_log(p, eps) - safe_log(q, eps)), 0.0)
    return jnp.sum(terms, axis=-1)


@partial(jax.jit, static_argnames=("eps",))
def entropy(p: jax.typing.ArrayLike, eps: float = PROB_EPS) -> jax.Array:
    """Shannon entropy H(p) = −Σ_k p_k log p_k per input (0·log 0 = 0), in nats.

    Applied to the BMA predictive this is the *predictive entropy* (total uncertainty).

    Args:
        p: probabilities ``(..., K)``.
        eps: lower clip inside the logarithm (only affects p_k < eps, a change of < eps·27.7).

    Returns:
        Entropy per input, shape ``(...)``, in [0, log K].
    """
    p = as_float(p)
    check_probs(p, "p")
    return -jnp.sum(jnp.where(p > 0, p * safe_log(p, eps), 0.0), axis=-1)

"""Function-space diversity of posterior samples (or ensemble members): mean pairwise KL.

For S samples θ_1..θ_S with per-sample predictives p_s(x) = p(y | x, θ_s) on n inputs,

    D_KL = 1/(S(S−1)) Σ_{i≠j} (1/n) Σ_x KL(p_i(x) ‖ p_j(x)),

the average over **ordered** pairs i ≠ j (so it is symmetric in the samples even though each KL
is not) of the input-averaged KL, in nats. 0 iff all samples predict identically; larger
values mean the samples disagree more in function space — a sampler stuck in one mode has
small D_KL, one that visits several modes has a larger one.

This is the "pairwise KL divergence" diversity statistic of Kim et al. (2024), App. K (Eq. 18),
there written per input with A_ij = p(y|x,θ_i) log(p(y|x,θ_i)/p(y|x,θ_j)); we sum over all
classes y (a KL between the two categorical predictives) rather than scoring only the observed
label, so no labels are needed.

Reference:
    Kim, Jung, Kim & Lee (2024), "Learning to Explore for Stochastic Gradient MCMC" (L2E),
    ICML, App. K (evaluation metrics, Eq. 18).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from bdl.metrics._utils import PROB_EPS, as_float
from bdl.metrics.divergence import kl_divergence

__all__ = ["mean_pairwise_kl"]


@partial(jax.jit, static_argnames=("eps",))
def mean_pairwise_kl(sample_probs: jax.typing.ArrayLike, eps: float = PROB_EPS) -> jax.Array:
    """Mean KL over ordered pairs of samples, averaged over inputs (module docstring).

    Computed pair by pair (``lax.map`` over the first sample of the pair, vectorised over the
    second), so the memory is O(S·n·K) and small KLs do not suffer the cancellation of the
    expanded form Σ p_i log p_i − Σ p_i log p_j. The diagonal terms KL(p_i‖p_i) are exactly 0.
    Logarithms are clipped at ``eps`` as in :func:`bdl.metrics.kl_divergence`.

    Args:
        sample_probs: per-sample predictive probabilities ``(S, ..., K)``, typically
            ``(S, n, K)``; S ≥ 2.
        eps: lower clip inside the logarithms.

    Returns:
        Scalar mean pairwise KL in nats.
    """
    sample_probs = as_float(sample_probs)
    if sample_probs.ndim < 2:
        raise ValueError(
            f"sample_probs must be (S, ..., K) with a sample and a class axis, "
            f"got shape {sample_probs.shape}."
        )
    num_samples = sample_probs.shape[0]
    if num_samples < 2:
        raise ValueError(f"mean_pairwise_kl needs at least 2 samples, got {num_samples}.")

    def row(p_i: jax.Array) -> jax.Array:
        # Σ_j mean_x KL(p_i(x) ‖ p_j(x)) for one i, vectorised over j.
        kl = kl_divergence(jnp.broadcast_to(p_i, sample_probs.shape), sample_probs, eps)
        return jnp.sum(jnp.mean(kl.reshape(num_samples, -1), axis=-1))

    total = jnp.sum(jax.lax.map(row, sample_probs))
    return total / (num_samples * (num_samples - 1))

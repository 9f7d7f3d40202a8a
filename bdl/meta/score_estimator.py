"""The Stein gradient estimator of ∇ log q from samples (Li & Turner 2018), RBF kernel.

For samples x₁, …, x_K ~ q in ℝᵈ (rows of ``x``, shape (K, d)) and a kernel k, Stein's identity
E_q[k(x, ·)∇log q(x) + ∇ₓk(x, ·)] = 0 (Gong et al. 2019, App. C, Eq. 23) in its Monte Carlo form
gives K·G ≈ −⟨∇, K⟩ for G = (∇log q(x₁), …, ∇log q(x_K))ᵀ. The ridge-regularised solution
(Gong et al. 2019, Eq. 24–25; Li & Turner 2018, Eq. 7) is

    Ĝ = −(K + ηI)⁻¹ ⟨∇, K⟩,    K_ij = k(x_i, x_j),    ⟨∇, K⟩_ij = Σ_k ∂k(x_i, x_k)/∂x_k(j).

With the RBF kernel k(x, x') = exp(−‖x − x'‖² / (2σ²)), ∂k(x_i, x_k)/∂x_k = k(x_i, x_k)(x_i −
x_k)/σ², so

    ⟨∇, K⟩_i = (x_i Σ_k K_ik − Σ_k K_ik x_k) / σ²,

an O(K²d + K³) computation (one K × K solve). The bandwidth is the median heuristic: σ is the
median of the pairwise distances ‖x_i − x_j‖ (i < j), times ``bandwidth_scale`` (Gong et al. use
0.5 in their toy experiment, App. F.1). η is the ridge of Eq. 24, relative to the kernel
matrix's unit diagonal.

The estimate is used in NNSGHMC's meta-loss (Gong et al. 2019, Eq. 10–11): the entropy term
E_q[log q(θ)] has the gradient E_q[(∂θ/∂φ)ᵀ ∇_θ log q(θ)] in the sampler's parameters φ, and Ĝ
stands in for ∇_θ log q (held constant, i.e. under ``stop_gradient``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

__all__ = ["median_bandwidth", "pairwise_sq_dists", "rbf_kernel", "stein_score"]


def pairwise_sq_dists(x: ArrayLike) -> jax.Array:
    """‖x_i − x_j‖² for rows of ``x`` (K, d), shape (K, K), exactly zero on the diagonal."""
    x = jnp.asarray(x)
    diff = x[:, None, :] - x[None, :, :]
    return jnp.sum(diff * diff, axis=-1)


def median_bandwidth(x: ArrayLike) -> jax.Array:
    """The median heuristic σ = median_{i<j} ‖x_i − x_j‖ over the K(K−1)/2 distinct pairs.

    For an even number of pairs the median is the mean of the two middle values (as
    ``numpy.median``). Needs K ≥ 2 samples.
    """
    x = jnp.asarray(x)
    k = x.shape[0]
    if k < 2:
        raise ValueError(f"median_bandwidth needs at least 2 samples; got {k}.")
    rows, cols = jnp.triu_indices(k, 1)
    return jnp.median(jnp.sqrt(pairwise_sq_dists(x)[rows, cols]))


def rbf_kernel(x: ArrayLike, bandwidth: ArrayLike) -> tuple[jax.Array, jax.Array]:
    """``(K, ⟨∇, K⟩)`` for k(x, x') = exp(−‖x − x'‖²/(2σ²)) on rows of ``x`` (K, d).

    ``K`` has shape (K, K) and ``⟨∇, K⟩`` (K, d) with row i Σ_k ∂k(x_i, x_k)/∂x_k
    (module docstring).
    """
    x = jnp.asarray(x)
    sigma2 = jnp.square(jnp.asarray(bandwidth, x.dtype))
    kmat = jnp.exp(-pairwise_sq_dists(x) / (2.0 * sigma2))
    grad_k = (x * jnp.sum(kmat, axis=1, keepdims=True) - kmat @ x) / sigma2
    return kmat, grad_k


def stein_score(
    x: ArrayLike,
    *,
    eta: float = 0.01,
    bandwidth: ArrayLike | None = None,
    bandwidth_scale: float = 1.0,
) -> jax.Array:
    """Ĝ ≈ ∇ log q at the samples: −(K + ηI)⁻¹⟨∇, K⟩ (Gong et al. 2019, Eq. 25).

    Args:
        x: samples of q as rows, shape (K, d) with K ≥ 2.
        eta: the ridge η > 0 of Eq. 24 (the kernel matrix has a unit diagonal).
        bandwidth: the RBF bandwidth σ; ``None``: the median heuristic :func:`median_bandwidth`.
        bandwidth_scale: multiplies σ (Gong et al. 2019, App. F.1 use 0.5).

    Returns:
        Ĝ, shape (K, d). No gradient flows through it (it is wrapped in ``stop_gradient``):
            it is an estimate to be held fixed in the meta-loss.
    """
    x = jax.lax.stop_gradient(jnp.asarray(x))
    if x.ndim != 2:
        raise ValueError(f"stein_score needs samples shaped (K, d); got shape {x.shape}.")
    if not eta > 0:
        raise ValueError(f"stein_score: eta must be > 0; got {eta}.")
    sigma = median_bandwidth(x) if bandwidth is None else jnp.asarray(bandwidth, x.dtype)
    # guard the degenerate case of coincident samples (σ = 0): any positive σ gives K = I there
    sigma = jnp.maximum(sigma * bandwidth_scale, jnp.finfo(x.dtype).tiny ** 0.25)
    kmat, grad_k = rbf_kernel(x, sigma)
    eye = jnp.eye(x.shape[0], dtype=x.dtype)
    # K is a Gram matrix (PSD), so K + ηI is positive definite: a Cholesky solve
    factor = jax.scipy.linalg.cho_factor(kmat + eta * eye, lower=True)
    return jax.lax.stop_gradient(-jax.scipy.linalg.cho_solve(factor, grad_k))

"""Closed-form log-densities of synthetic targets (not datasets), as pure ``jax.numpy`` functions.

All log-densities accept ``theta`` of shape ``(..., d)`` and return shape ``(...)``; they are
differentiable and ``jit``/``vmap``-compatible. The energy (potential) is U(θ) = −log p(θ).

Targets:

* :func:`two_mode_log_density`: the 2-D two-mode mixture of Li & Zhang (2024), "Entropy-MCMC:
  Sampling from Flat Basins with Ease", ICLR, Sec. 6.1,

      p(θ) = ½ N(θ; μ₁, 0.5·I) + ½ N(θ; μ₂, I),   μ₁ = (−2, −1),   μ₂ = (2, 1),

  whose first mode is sharp (covariance 0.5·I, peak density 1/(2π)) and second is flat
  (covariance I, peak density 1/(4π)); a flatness-seeking sampler should favour the second.
* :func:`diagonal_gaussian` / :func:`correlated_gaussian`: the synthetic Gaussians of the
  meta-learned SG-MCMC experiment of Gong, Li & Hernández-Lobato (2019), "Meta-Learning for
  Stochastic Gradient MCMC", ICLR, Sec. 5.1: the sampler is trained on a 10-D Gaussian with
  diagonal covariance and tested on a 20-D Gaussian with correlated covariance, with unit
  Gaussian noise N(0, I) injected into every gradient evaluation, ∇̃U(θ) = ∇U(θ) + ξ,
  ξ ~ N(0, I), to mimic minibatch noise. Only the densities live here: the noise is injected
  by the compiler/sampler, not by these functions. The random means and covariances below are
  this library's own construction (stated in each docstring), not a copy of the paper's.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular
from jax.scipy.special import logsumexp
from jax.typing import ArrayLike

from bdl.utils.arguments import integer

__all__ = [
    "TWO_MODE_MEANS",
    "TWO_MODE_VARIANCES",
    "TWO_MODE_WEIGHTS",
    "correlated_gaussian",
    "diagonal_gaussian",
    "gaussian_log_density",
    "gaussian_log_density_fn",
    "two_mode_log_density",
]

_LOG_2PI = math.log(2.0 * math.pi)

TWO_MODE_MEANS: tuple[tuple[float, float], tuple[float, float]] = ((-2.0, -1.0), (2.0, 1.0))
"""Component means of :func:`two_mode_log_density`: the sharp mode first, the flat one second."""
TWO_MODE_VARIANCES: tuple[float, float] = (0.5, 1.0)
"""Isotropic component variances σ_k² (covariance σ_k² I) of :func:`two_mode_log_density`."""
TWO_MODE_WEIGHTS: tuple[float, float] = (0.5, 0.5)
"""Mixture weights of :func:`two_mode_log_density`."""


def two_mode_log_density(theta: ArrayLike) -> jax.Array:
    """log p(θ) for p = ½ N(μ₁, 0.5·I) + ½ N(μ₂, I) on ℝ² (Li & Zhang 2024, Sec. 6.1).

    Computed as logsumexp_k [log w_k − log(2π σ_k²) − ‖θ − μ_k‖² / (2σ_k²)], which is stable
    far from both modes. ``theta`` has shape ``(..., 2)``.

    Args:
        theta: points ``(..., 2)``.

    Returns:
        log p(θ) at each point, shape ``(...)``.
    """
    theta = jnp.asarray(theta)
    dtype = jnp.result_type(theta.dtype, jnp.float32)
    means = jnp.asarray(TWO_MODE_MEANS, dtype=dtype)
    var = jnp.asarray(TWO_MODE_VARIANCES, dtype=dtype)
    log_w = jnp.log(jnp.asarray(TWO_MODE_WEIGHTS, dtype=dtype))
    sq = jnp.sum((theta[..., None, :] - means) ** 2, axis=-1)  # (..., 2 components)
    # In d = 2, log N(θ; μ, σ²I) = −log(2πσ²) − ‖θ − μ‖² / (2σ²).
    comp = log_w - (_LOG_2PI + jnp.log(var)) - 0.5 * sq / var
    return logsumexp(comp, axis=-1)


def _log_density_chol(theta: jax.Array, mean: jax.Array, chol: jax.Array) -> jax.Array:
    d = mean.shape[-1]
    diff = theta - mean
    z = solve_triangular(chol, diff.reshape(-1, d).T, lower=True)  # L z = (θ − μ)
    maha = jnp.sum(z**2, axis=0).reshape(diff.shape[:-1])
    log_det = 2.0 * jnp.sum(jnp.log(jnp.diag(chol)))
    return -0.5 * (d * _LOG_2PI + log_det + maha)


def gaussian_log_density(theta: ArrayLike, mean: ArrayLike, cov: ArrayLike) -> jax.Array:
    """log N(θ; μ, Σ) = −½ [d log 2π + log det Σ + (θ − μ)ᵀ Σ⁻¹ (θ − μ)], via Cholesky Σ = LLᵀ.

    ``theta`` has shape ``(..., d)``, ``mean`` ``(d,)``, ``cov`` ``(d, d)`` (positive definite).

    Args:
        theta: points ``(..., d)``.
        mean: μ, ``(d,)``.
        cov: Σ, ``(d, d)``, positive definite.

    Returns:
        log N(θ; μ, Σ) at each point, shape ``(...)``.
    """
    mean = jnp.asarray(mean)
    return _log_density_chol(jnp.asarray(theta), mean, jnp.linalg.cholesky(jnp.asarray(cov)))


def gaussian_log_density_fn(mean: ArrayLike, cov: ArrayLike) -> Callable[[ArrayLike], jax.Array]:
    """``θ ↦ gaussian_log_density(θ, mean, cov)`` with the Cholesky factor computed once.

    Args:
        mean: μ, ``(d,)``.
        cov: Σ, ``(d, d)``, positive definite.

    Returns:
        The function θ ↦ log N(θ; μ, Σ), for ``bdl.Potential(log_density=...)``.
    """
    mean = jnp.asarray(mean)
    chol = jnp.linalg.cholesky(jnp.asarray(cov))

    def log_density(theta: ArrayLike) -> jax.Array:
        return _log_density_chol(jnp.asarray(theta), mean, chol)

    return log_density


def _log_uniform(rng: np.random.Generator, low: float, high: float, size: int) -> np.ndarray:
    if not 0.0 < low <= high:
        raise ValueError(f"need 0 < low ≤ high, got ({low}, {high})")
    return np.exp(rng.uniform(np.log(low), np.log(high), size))


def _random_mean(
    name: str, dim: int, seed: int, stream: int
) -> tuple[np.random.Generator, np.ndarray]:
    """μ ~ N(0, I_dim), ``dim`` and ``seed`` checked, from the random stream (seed, dim,
    ``stream``), returned with the stream the covariance is drawn from next."""
    integer(dim, f"{name}(dim=...)", 1)
    integer(seed, "seed", 0)
    rng = np.random.default_rng(np.random.SeedSequence([seed, dim, stream]))
    return rng, rng.standard_normal(dim)


def diagonal_gaussian(
    dim: int = 10, seed: int = 0, *, variance_range: tuple[float, float] = (0.1, 1.0)
) -> tuple[jax.Array, jax.Array]:
    """A random Gaussian with diagonal covariance: returns ``(mean, cov)``, cov of shape (d, d).

    μ ~ N(0, I_d); Σ = diag(σ₁², …, σ_d²) with log σ_i² ~ U(log a, log b),
    (a, b) = ``variance_range``. Default dim 10: the training target of Gong et al. (2019),
    Sec. 5.1 (see the module docstring).

    Args:
        dim: the dimension d.
        seed: the seed of μ and the variances.
        variance_range: (a, b), the range of the variances.

    Returns:
        ``(mean, cov)``, of shapes ``(d,)`` and ``(d, d)``.
    """
    rng, mean = _random_mean("diagonal_gaussian", dim, seed, 0)
    cov = np.diag(_log_uniform(rng, *variance_range, dim))
    return jnp.asarray(mean, jnp.float32), jnp.asarray(cov, jnp.float32)


def correlated_gaussian(
    dim: int = 20, seed: int = 0, *, eigenvalue_range: tuple[float, float] = (0.1, 1.0)
) -> tuple[jax.Array, jax.Array]:
    """A random Gaussian with a dense (correlated) covariance: returns ``(mean, cov)``.

    μ ~ N(0, I_d); Σ = Q diag(λ) Qᵀ with Q a Haar-random orthogonal matrix (QR of a standard
    normal matrix, signs fixed by diag R > 0) and log λ_i ~ U(log a, log b),
    (a, b) = ``eigenvalue_range``, so the condition number is at most b/a. Default dim 20: the
    test target of Gong et al. (2019), Sec. 5.1 (see the module docstring).

    Args:
        dim: the dimension d.
        seed: the seed of μ, Q and λ.
        eigenvalue_range: (a, b), the range of Σ's eigenvalues.

    Returns:
        ``(mean, cov)``, of shapes ``(d,)`` and ``(d, d)``.
    """
    rng, mean = _random_mean("correlated_gaussian", dim, seed, 1)
    q, r = np.linalg.qr(rng.standard_normal((dim, dim)))
    q = q * np.sign(np.diag(r))
    eig = _log_uniform(rng, *eigenvalue_range, dim)
    cov = (q * eig) @ q.T
    cov = 0.5 * (cov + cov.T)
    return jnp.asarray(mean, jnp.float32), jnp.asarray(cov, jnp.float32)

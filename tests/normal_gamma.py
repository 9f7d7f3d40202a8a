"""A hierarchical model with a conjugate precision and its exact posterior moments.

y_j ~ N(w_j, 1), w_j ~ N(0, 1/λ), λ ~ Gamma(A, B), j = 1..J, one observation per group. Given λ
the weights are independent Gaussians, w_j | λ, y ~ N(y_j/(1 + λ), 1/(1 + λ)), and the marginal
p(λ | y) ∝ Gamma(λ; A, B) Π_j N(y_j; 0, 1 + 1/λ) is one-dimensional: the posterior moments of
(w, u = log λ), the coordinates bdl samples, are integrals over u, computed on a fine grid.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from scipy import stats

import bdl

Y = np.array([2.0, -1.0, 0.5, 3.0, -2.5, 1.0])
A, B = 2.0, 2.0


def model(centred: bool = True) -> bdl.Model:
    prior = bdl.HierarchicalNormal(precision=dist.Gamma(A, B), centred=centred, name="lam")
    return bdl.Model(
        lambda p, x: x @ p["w"],
        bdl.Gaussian(1.0),
        prior=prior,
        params={"w": jnp.zeros(len(Y))},
        name="normal_gamma",
    )


def data() -> tuple[np.ndarray, np.ndarray]:
    return np.eye(len(Y), dtype=np.float32), Y.astype(np.float32)


def exact_moments() -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance of (w_1..w_J, log λ) under the posterior (T = 1)."""
    u = np.linspace(-12.0, 8.0, 40_001)
    lam = np.exp(u)
    log_p = stats.gamma.logpdf(lam, A, scale=1.0 / B) + u  # density of u = log λ
    log_p += stats.norm.logpdf(Y[:, None], 0.0, np.sqrt(1.0 + 1.0 / lam)).sum(0)
    p = np.exp(log_p - log_p.max())
    p /= p.sum()
    shrink = 1.0 / (1.0 + lam)  # E[w_j | λ] = y_j·shrink, Var[w_j | λ] = shrink
    cond_mean = np.vstack([Y[:, None] * shrink, u[None, :]])  # (J + 1, grid)
    mean = cond_mean @ p
    second = (cond_mean * p) @ cond_mean.T
    second[: len(Y), : len(Y)] += np.eye(len(Y)) * (shrink @ p)
    return mean, second - np.outer(mean, mean)

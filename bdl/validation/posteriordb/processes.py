"""The Gaussian-process posteriors of the posteriordb suite, each as its Stan program states it.

* ``gp_pois_regr-gp_regr``: y ~ N(0, K + σ·I) with K_ij = α² exp(−(x_i − x_j)²/(2ρ²)) —
  σ added to the diagonal as it is, not squared, as gp_regr.stan writes it — and
  ρ ~ Gamma(25, 4), α ~ N⁺(0, 2²), σ ~ N⁺(0, 1). The 11 values are one observation.
* ``mcycle_gp-accel_gp``: brms's heteroscedastic approximate GP (Hilbert-space basis functions,
  Solin & Särkkä 2020): y_n ~ N(μ_n, σ_n²), μ = b + X₁·(√s₁ ⊙ z₁), log σ = b_σ + X₂·(√s₂ ⊙ z₂)
  with the spectral densities s(λ) = sdgp²·√(2π)·ℓ·exp(−ℓ²λ²/2) at the basis functions'
  √eigenvalues λ; b ~ t₃(−13, 36), b_σ ~ t₃(0, 10), sdgp ~ t₃⁺(0, 36) (the Student-t truncated at
  0 and normalised, as the program's lccdf term does: for a t centred at 0 that is the folded
  t), ℓ ~ InvGamma(1.124909, 0.0177), z ~ N(0, 1).
  The N = 133 accelerations are the rows; their input is the two basis matrices side by side.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist

from bdl.data.dataset import Dataset
from bdl.dsl.model import Model
from bdl.dsl.numpyro_likelihood import Likelihood
from bdl.dsl.priors import ByPath, Normal


def gp_cholesky(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    """The Cholesky factor of gp_regr.stan's covariance α²·exp(−Δx²/(2ρ²)) + σ·I for each row
    of inputs.

    Args:
        params: ``{"rho", "alpha", "sigma"}``, positive scalars.
        x: inputs ``(m, N)``, one set of N points per row.

    Returns:
        The lower Cholesky factors ``(m, N, N)``.
    """

    def factor(points: jax.Array) -> jax.Array:
        sq = (points[:, None] - points[None, :]) ** 2
        cov = params["alpha"] ** 2 * jnp.exp(-0.5 * sq / params["rho"] ** 2)
        return jnp.linalg.cholesky(cov + params["sigma"] * jnp.eye(points.shape[0]))

    return jax.vmap(factor)(x)


def gp_regr(data: dict[str, Any]) -> tuple[Model, Dataset]:
    """``gp_pois_regr-gp_regr``: a GP regression's marginal likelihood in (ρ, α, σ).

    Args:
        data: posteriordb's ``gp_pois_regr`` data.

    Returns:
        The model and its data set: one row, the N inputs and the N values.
    """
    x = np.asarray(data["x"], np.float32)[None, :]
    y = np.asarray(data["y"], np.float32)[None, :]
    likelihood = Likelihood.from_numpyro(
        dist.MultivariateNormal, parameter="scale_tril", loc=jnp.zeros(x.shape[1])
    )
    prior = ByPath(
        {
            "/rho$": dist.Gamma(25.0, 4.0),
            "/alpha$": dist.HalfNormal(2.0),
            "/sigma$": dist.HalfNormal(1.0),
        }
    )
    params = {"rho": jnp.ones(()), "alpha": jnp.ones(()), "sigma": jnp.ones(())}
    model = Model(gp_cholesky, likelihood, prior=prior, params=params, name="gp_pois_regr-gp_regr")
    return model, Dataset("gp_pois_regr-gp_regr", x, y)


def spectral_density(lam: jax.Array, sdgp: jax.Array, lscale: jax.Array) -> jax.Array:
    """The squared-exponential kernel's spectral density in one dimension at frequencies
    ``lam``: sdgp²·√(2π)·ℓ·exp(−ℓ²λ²/2) (brms's ``spd_cov_exp_quad``).

    Args:
        lam: the square roots of the basis functions' eigenvalues.
        sdgp: the GP's marginal sd.
        lscale: its length scale ℓ.

    Returns:
        The spectral density at each frequency.
    """
    return sdgp**2 * math.sqrt(2.0 * math.pi) * lscale * jnp.exp(-0.5 * lscale**2 * lam**2)


def heteroscedastic_gp(slambda: np.ndarray, slambda_sigma: np.ndarray):
    """accel_gp.stan's linear predictors of the mean and the log sd, as a network.

    Args:
        slambda: √eigenvalues of the mean's basis functions ``(NB,)``.
        slambda_sigma: √eigenvalues of the log sd's basis functions ``(NB_σ,)``.

    Returns:
        ``f(params, x) -> (n, 2)``: column 0 the mean μ, column 1 log σ, for inputs ``x`` the
        two basis matrices side by side ``(n, NB + NB_σ)``.
    """
    lam, lam_sigma = jnp.asarray(slambda), jnp.asarray(slambda_sigma)
    nb = int(lam.shape[0])

    def predictors(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
        spd = spectral_density(lam, params["sdgp_1"], params["lscale_1"])
        spd_sigma = spectral_density(lam_sigma, params["sdgp_sigma_1"], params["lscale_sigma_1"])
        mu = params["Intercept"] + x[:, :nb] @ (jnp.sqrt(spd) * params["zgp_1"])
        log_sd = params["Intercept_sigma"] + x[:, nb:] @ (
            jnp.sqrt(spd_sigma) * params["zgp_sigma_1"]
        )
        return jnp.stack([mu, log_sd], axis=1)

    return predictors


def accel_gp(data: dict[str, Any]) -> tuple[Model, Dataset]:
    """``mcycle_gp-accel_gp``: brms's heteroscedastic approximate-GP regression of the
    motorcycle accelerations.

    Args:
        data: posteriordb's ``mcycle_gp`` data.

    Returns:
        The model and its data set (rows: the N accelerations).
    """
    x1 = np.asarray(data["Xgp_1"], np.float64)
    x2 = np.asarray(data["Xgp_sigma_1"], np.float64)
    slambda = np.asarray(data["slambda_1"], np.float64)[:, 0]
    slambda_sigma = np.asarray(data["slambda_sigma_1"], np.float64)[:, 0]
    # t₃(0, 36) truncated at 0 and normalised: the folded t, 2·t₃(x; 0, 36) on x > 0 (sampled
    # as |t|; the truncated form's sampler needs tensorflow_probability's betaincinv)
    half_t = dist.FoldedDistribution(dist.StudentT(3.0, 0.0, 36.0))
    length = dist.InverseGamma(1.124909, 0.0177)
    prior = ByPath(
        {
            "/Intercept$": dist.StudentT(3.0, -13.0, 36.0),
            "/Intercept_sigma$": dist.StudentT(3.0, 0.0, 10.0),
            "/sdgp_(1|sigma_1)$": half_t,
            "/lscale_(1|sigma_1)$": length,
            "/zgp_(1|sigma_1)$": Normal(1.0),
        }
    )
    params = {
        "Intercept": jnp.zeros(()),
        "sdgp_1": jnp.ones(()),
        "lscale_1": jnp.ones(()),
        "zgp_1": jnp.zeros(x1.shape[1]),
        "Intercept_sigma": jnp.zeros(()),
        "sdgp_sigma_1": jnp.ones(()),
        "lscale_sigma_1": jnp.ones(()),
        "zgp_sigma_1": jnp.zeros(x2.shape[1]),
    }
    likelihood = Likelihood.from_numpyro(dist.Normal, outputs={"scale": jnp.exp})
    model = Model(
        heteroscedastic_gp(slambda, slambda_sigma),
        likelihood,
        prior=prior,
        params=params,
        name="mcycle_gp-accel_gp",
    )
    x = np.concatenate([x1, x2], axis=1).astype(np.float32)
    y = np.asarray(data["Y"], np.float32)
    return model, Dataset("mcycle_gp-accel_gp", x, y)

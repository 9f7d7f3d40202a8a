"""Negative-binomial regression through ``bdl.Likelihood.from_numpyro``: overdispersed counts

    y_i ~ NB2(μ_i, φ),   log μ_i = β₀ + x_iᵀβ,   Var[y_i] = μ_i + μ_i²/φ,

with a learned concentration φ (prior Exponential(0.1), mean 10; sampled as log φ). Synthetic
data: x_i ~ N(0, I₃), true β₀ = 1, β = (0.5, −0.3, 0.2), φ = 3 — variance well above a Poisson's.
Priors N(0, 2²) on the coefficients.
"""

import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist

import bdl
from bdl.data.dataset import Dataset

TRUE_INTERCEPT, TRUE_COEF, TRUE_CONCENTRATION = 1.0, (0.5, -0.3, 0.2), 3.0


def data(n: int = 400, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2 * n, 3))
    mean = np.exp(TRUE_INTERCEPT + x @ np.asarray(TRUE_COEF))
    # NB2(μ, φ) is Poisson(λ) with λ ~ Gamma(φ, rate φ/μ)
    y = rng.poisson(rng.gamma(TRUE_CONCENTRATION, mean / TRUE_CONCENTRATION))
    return bdl.data.split_draws("negbin_regression", x, y, n)


def log_mean(params, x):
    return params["b0"] + x @ params["b"]


def build(n: int = 400, batch_size: int = 50) -> bdl.ModelSpec:
    likelihood = bdl.Likelihood.from_numpyro(
        dist.NegativeBinomial2, link=jnp.exp, concentration=dist.Exponential(0.1)
    )
    model = bdl.Model(
        network=log_mean,
        params={"b0": jnp.zeros(()), "b": jnp.zeros(3)},
        likelihood=likelihood,
        prior=bdl.Normal(2.0),
        name="negbin_regression",
    )
    # in full, as every model file declares it: the files share no code (bdl/models/__init__.py)
    return bdl.ModelSpec(
        model,
        data(n),
        batch_size=batch_size,
        kernels={
            "sghmc": {"step_size": 5e-3, "friction": 10.0},
            "sgld": {"step_size": 1.5e-4},
        },
        num_steps=40_000,
        burn_in=4_000,
        thin=10,
        description="negative-binomial regression, learned concentration (n = 400)",
    )

"""A correlated trivariate Gaussian with an LKJ prior on its correlation matrix, no network:

    y_i ~ N₃(μ, diag(σ) Ω diag(σ)),   Ω = L Lᵀ,
    L ~ LKJCholesky(3, η = 2),  σ_k ~ N⁺(0, 2.5²),  μ_k ~ N(0, 5²)

(Lewandowski, Kurowicka & Joe 2009; the LKJ density ∝ det(Ω)^(η − 1) on the Cholesky factor,
Stan's ``cholesky_factor_corr[3] L ~ lkj_corr_cholesky(2)``). L is sampled through NumPyro's
``CorrCholeskyTransform`` (3 unconstrained coordinates), σ as log σ. Synthetic data: n = 200
training and 200 held-out observations with μ = (1, −1, 0), σ = (1, 2, 0.5) and correlations
ρ₁₂ = 0.6, ρ₁₃ = −0.3, ρ₂₃ = 0.2.
"""

import numpy as np
import numpyro.distributions as dist

import bdl
from bdl.data.dataset import Dataset

TRUE_LOC = np.array([1.0, -1.0, 0.0])
TRUE_SCALE = np.array([1.0, 2.0, 0.5])
TRUE_CORR = np.array([[1.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 1.0]])


def data(n: int = 200, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    cov = TRUE_CORR * np.outer(TRUE_SCALE, TRUE_SCALE)
    y = rng.multivariate_normal(TRUE_LOC, cov, size=2 * n)
    return bdl.data.split_draws("lkj_correlation", None, y, n)  # no inputs


def correlated_normal(loc, scale, corr_cholesky):
    """N(loc, diag(scale) Ω diag(scale)) with Ω = corr_cholesky corr_choleskyᵀ."""
    return dist.MultivariateNormal(loc, scale_tril=scale[..., :, None] * corr_cholesky)


def likelihood() -> bdl.Likelihood:
    return bdl.Likelihood.from_numpyro(
        correlated_normal,
        loc=dist.Normal(0.0, 5.0).expand([3]),
        scale=dist.HalfNormal(2.5).expand([3]),
        corr_cholesky=dist.LKJCholesky(3, 2.0),
    )


def build(n: int = 200, batch_size: int = 50) -> bdl.ModelSpec:
    model = bdl.Model(likelihood=likelihood(), name="lkj_correlation")
    # in full, as every model file declares it: the files share no code (bdl/models/__init__.py)
    return bdl.ModelSpec(
        model,
        data(n),
        batch_size=batch_size,
        num_steps=30_000,
        burn_in=5_000,
        thin=5,
        description="trivariate Gaussian, LKJ(2) prior on the correlation, no network (n = 200)",
    )

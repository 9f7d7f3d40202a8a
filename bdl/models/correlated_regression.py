"""Linear regression on 24 strongly correlated predictors: an ill-conditioned posterior.

The predictors are an AR(1) sequence along the columns, as adjacent sensors or wavelengths read
one quantity: x = z·A with z ~ N(0, I₂₄) and AᵀA = Σ, Σ_jk = ρ^|j−k|, ρ = 0.998, so every
column has unit variance and mean 0 (no scale or location problem) and the pairwise
correlations run from ρ²³ ≈ 0.955 to ρ ≈ 0.998 (mean ≈ 0.98). Then

    y = b + x·w + ε,   ε ~ N(0, σ²),   w, b ~ N(0, 10²),   σ ~ HalfCauchy(5) learned,

with b = 1, w = (1, −0.5, 0, 1, −1, 0) repeated four times and σ = 1 (n = 4,000 training rows,
1,000 test rows). The eigenvalues of Σ spread from ≈ 23.6 down to ≈ 1.0·10⁻³: the data pin
down w along the common direction (1, …, 1)/√24 to a posterior sd ≈ 0.003, each coefficient
only to ≈ 0.25–0.37, and at σ = 1 the condition number of the posterior covariance of (b, w) is
≈ 2.4·10⁴ (printed by ``python models/correlated_regression.py``). No tuned settings: the
model exists to test sampling that nobody tuned.
"""

import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist

import bdl
from bdl.data.dataset import Dataset

P = 24
RHO = 0.998
WEIGHTS = np.tile([1.0, -0.5, 0.0, 1.0, -1.0, 0.0], P // 6)
INTERCEPT = 1.0
NOISE_SD = 1.0


def data(n: int = 4_000, n_test: int = 1_000, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    lag = np.abs(np.arange(P)[:, None] - np.arange(P)[None, :])
    a = np.linalg.cholesky(RHO**lag).T  # AᵀA = Σ
    x = rng.normal(size=(n + n_test, P)) @ a
    y = INTERCEPT + x @ WEIGHTS + rng.normal(0.0, NOISE_SD, size=n + n_test)
    return bdl.data.split_draws("correlated_regression", x, y, n)


def linear(params, x):
    return x @ params["w"] + params["b"]


def posterior_covariance(x: np.ndarray, sigma: float = NOISE_SD) -> np.ndarray:
    """The posterior covariance of (b, w) given σ, in float64: σ²(DᵀD + σ²/10²·I)⁻¹, D = [1, x]."""
    design = np.column_stack([np.ones(len(x)), x]).astype(np.float64)
    precision = design.T @ design / sigma**2 + np.eye(design.shape[1]) / 10.0**2
    return np.linalg.inv(precision)


def build(n: int = 4_000, batch_size: int = 100) -> bdl.ModelSpec:
    model = bdl.Model(
        network=linear,
        params={"w": jnp.zeros(P), "b": jnp.zeros(())},
        likelihood=bdl.Gaussian(scale=None, scale_prior=dist.HalfCauchy(5.0)),
        prior=bdl.Normal(10.0),
        name="correlated_regression",
    )
    # in full, as every model file declares it: the files share no code (bdl/models/__init__.py)
    return bdl.ModelSpec(
        model,
        data(n),
        batch_size=batch_size,
        num_steps=40_000,
        burn_in=10_000,
        thin=10,
        description=(
            f"linear regression, p = {P} AR(1) predictors (ρ = {RHO}, pairwise correlations "
            f"0.955–0.998), n = {n:,}, learned σ (κ ≈ 2.4e4)"
        ),
    )


if __name__ == "__main__":
    d = data()
    cov = posterior_covariance(d.x_train)
    corr = np.corrcoef(d.x_train, rowvar=False)[np.triu_indices(P, 1)]
    print("posterior covariance of (b, w) at σ = 1: condition number", np.linalg.cond(cov))
    low, high = corr.min(), corr.max()
    print(f"pairwise correlations of x: mean {corr.mean():.4f}, {low:.4f} – {high:.4f}")

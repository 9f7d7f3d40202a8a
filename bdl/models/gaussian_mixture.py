"""A two-component Gaussian mixture without a network, its locations ordered:

    y_i ~ θ·N(μ₁, σ₁²) + (1 − θ)·N(μ₂, σ₂²),
    μ = (μ₁, μ₂) ~ Ordered(N(0, 2²)),  σ_k ~ N⁺(0, 2²),  (θ, 1 − θ) ~ Dirichlet(5, 5),

Stan's ``ordered[2] mu ~ normal(0, 2); sigma ~ normal(0, 2) (lower bound 0); theta ~ beta(5, 5)``.
The weights (θ, 1 − θ) ~ Dirichlet(5, 5) are θ ~ Beta(5, 5) on the simplex. The ordering
μ₁ < μ₂ removes label switching: the posterior has one mode, and both NUTS and SG-MCMC sample it
in the unconstrained coordinates (μ₁, log(μ₂ − μ₁)), (log σ₁, log σ₂) and the stick-breaking
logit of θ. Synthetic data: n = 500 training and 500 held-out observations from θ = 0.35,
μ = (−1, 1.5), σ = (0.6, 0.9).
"""

import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist

import bdl
from bdl.data.dataset import Dataset

TRUE_WEIGHT, TRUE_LOC, TRUE_SCALE = 0.35, (-1.0, 1.5), (0.6, 0.9)


def data(n: int = 500, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    first = rng.random(2 * n) < TRUE_WEIGHT
    y = np.where(
        first,
        rng.normal(TRUE_LOC[0], TRUE_SCALE[0], 2 * n),
        rng.normal(TRUE_LOC[1], TRUE_SCALE[1], 2 * n),
    )
    return bdl.data.split_draws("gaussian_mixture", None, y, n)  # no inputs


def likelihood() -> bdl.Likelihood:
    return bdl.Likelihood.from_numpyro(
        dist.MixtureSameFamily,
        component=dist.Normal,
        weights=dist.Dirichlet(jnp.array([5.0, 5.0])),
        loc=bdl.Ordered(dist.Normal(0.0, 2.0), 2),
        scale=dist.HalfNormal(2.0).expand([2]),
    )


def build(n: int = 500, batch_size: int = 50) -> bdl.ModelSpec:
    model = bdl.Model(likelihood=likelihood(), name="gaussian_mixture")
    # in full, as every model file declares it: the files share no code (bdl/models/__init__.py)
    return bdl.ModelSpec(
        model,
        data(n),
        batch_size=batch_size,
        num_steps=30_000,
        burn_in=5_000,
        thin=5,
        # the chains start at the mode (500 Adam steps from a prior draw): a chain started at a
        # prior draw can fall into the degenerate corner σ_k → 0, where one component sits on one
        # observation and the likelihood is unbounded (docs/models.md, gaussian_mixture)
        init="map",
        description="two-component Gaussian mixture, ordered locations, no network (n = 500)",
    )

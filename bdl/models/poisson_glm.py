"""A Poisson GLM with an exposure offset: counts y_i ~ Poisson(t_i · exp(β₀ + β₁·age_i + β₂·s_i)).

Synthetic data: age ~ N(50, 10²) years in its own units, a binary s, exposures t ~ U(0.5, 5)
years entering as the offset log t (the last input column, added without a coefficient).
Priors N(0, 5²) on the coefficients. No tuned settings.
"""

import jax.numpy as jnp
import numpy as np

import bdl
from bdl.data.dataset import Dataset

TRUE = (-3.0, 0.04, 0.5)


def data(n: int = 500, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    age = rng.normal(50.0, 10.0, size=2 * n)
    s = (rng.uniform(size=2 * n) < 0.4).astype(np.float64)
    exposure = rng.uniform(0.5, 5.0, size=2 * n)
    rate = exposure * np.exp(TRUE[0] + TRUE[1] * age + TRUE[2] * s)
    y = rng.poisson(rate)
    x = np.stack([age, s, np.log(exposure)], axis=1)
    return bdl.data.split_draws("poisson_glm", x, y, n)


def log_rate(params, x):
    return params["b0"] + x[:, :2] @ params["b"] + x[:, 2]


def build(n: int = 500, batch_size: int = 50) -> bdl.ModelSpec:
    model = bdl.Model(
        network=log_rate,
        params={"b0": jnp.zeros(()), "b": jnp.zeros(2)},
        likelihood=bdl.Poisson(),
        prior=bdl.Normal(5.0),
        name="poisson_glm",
    )
    # in full, as every model file declares it: the files share no code (bdl/models/__init__.py)
    return bdl.ModelSpec(
        model,
        data(n),
        batch_size=batch_size,
        num_steps=40_000,
        burn_in=10_000,
        thin=10,
        description="Poisson GLM with an exposure offset, age in years (n = 500)",
    )

"""Linear regression on an unstandardised predictor, as applied regression meets it.

x ~ N(100, 15²), y = a + b·x + ε with ε ~ N(0, σ²); flat (improper) priors on the intercept a and
the slope b, σ ~ HalfCauchy(5) learned. Because x is far from 0 the posterior of (a, b) is a
ridge: their correlation is ≈ −0.99 and the condition number of the posterior covariance ≈ 10⁴–10⁵
(printed by ``python models/linear_unstandardised.py``). No tuned settings: the model exists to
test sampling that nobody tuned.
"""

import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from numpyro.distributions import constraints

import bdl
from bdl.data.dataset import Dataset


def data(n: int = 200, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    x = rng.normal(100.0, 15.0, size=(2 * n, 1))
    y = 3.0 + 0.5 * x[:, 0] + rng.normal(0.0, 2.0, size=2 * n)
    return bdl.data.split_draws("linear_unstandardised", x, y, n)


def line(params, x):
    return params["a"] + params["b"] * x[:, 0]


def build(n: int = 200, batch_size: int = 25) -> bdl.ModelSpec:
    model = bdl.Model(
        network=line,
        params={"a": jnp.zeros(()), "b": jnp.zeros(())},
        likelihood=bdl.Gaussian(scale=None, scale_prior=dist.HalfCauchy(5.0)),
        prior=bdl.Distribution(dist.ImproperUniform(constraints.real, (), ())),
        name="linear_unstandardised",
    )
    # in full, as every model file declares it: the files share no code (bdl/models/__init__.py)
    return bdl.ModelSpec(
        model,
        data(n),
        batch_size=batch_size,
        num_steps=40_000,
        burn_in=10_000,
        thin=10,
        description="linear regression, x ~ N(100, 15²), flat priors, learned σ (κ ≈ 1e4–1e5)",
    )


if __name__ == "__main__":
    d = data()
    design = np.stack([np.ones(len(d.x_train)), d.x_train[:, 0]], axis=1).astype(np.float64)
    cov = 4.0 * np.linalg.inv(design.T @ design)
    print("posterior covariance of (a, b) at σ = 2: condition number", np.linalg.cond(cov))

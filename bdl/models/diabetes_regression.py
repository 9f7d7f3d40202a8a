"""Linear regression with a learned noise scale on scikit-learn's diabetes data.

y (disease progression, ≈ 25…346, not standardised) ~ N(w·x + b, σ²) with standardised features,
w, b ~ N(0, 100²) and σ ~ HalfCauchy(100) learned: the intercept sits at ≈ 150, far from any
start at 0, and σ ≈ 55. No tuned settings.
"""

import jax.numpy as jnp
import numpyro.distributions as dist

import bdl
from bdl.data import diabetes


def linear(params, x):
    return x @ params["w"] + params["b"]


def build(batch_size: int = 32) -> bdl.ModelSpec:
    data = diabetes()
    model = bdl.Model(
        network=linear,
        params={"w": jnp.zeros(data.x_train.shape[1]), "b": jnp.zeros(())},
        likelihood=bdl.Gaussian(scale=None, scale_prior=dist.HalfCauchy(100.0)),
        prior=bdl.Normal(100.0),
        name="diabetes_regression",
    )
    # in full, as every model file declares it: the files share no code (bdl/models/__init__.py)
    return bdl.ModelSpec(
        model,
        data,
        batch_size=batch_size,
        num_steps=40_000,
        burn_in=10_000,
        thin=10,
        parameter_labels={"net/w": data.feature_names},
        description="diabetes, linear regression with learned noise σ (n = 353 train, d = 12)",
    )

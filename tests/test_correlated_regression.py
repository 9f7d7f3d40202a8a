"""bdl/models/correlated_regression.py: an ill-conditioned posterior made by correlated predictors
of one scale, and an energy that is NumPyro's for the same regression."""

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer.util import potential_energy

from bdl.model_files import load_spec


def test_the_posterior_is_ill_conditioned_by_the_correlation_alone():
    spec = load_spec("correlated_regression")
    x = spec.data.x_train
    assert x.shape == (4_000, 24) and spec.data.x_test.shape[1] == 24
    assert x.dtype == np.float32 and spec.data.num_classes is None and spec.batch_size == 100
    assert spec.kernels == {}
    np.testing.assert_array_equal(x, load_spec("correlated_regression").data.x_train)
    # one scale and location for every column: the difficulty is not the other model's
    np.testing.assert_allclose(x.std(0), 1.0, atol=0.1)
    np.testing.assert_allclose(x.mean(0), 0.0, atol=0.1)
    correlations = np.corrcoef(x, rowvar=False)[np.triu_indices(24, 1)]
    assert correlations.mean() > 0.9, correlations.mean()
    design = np.column_stack([np.ones(len(x)), x]).astype(np.float64)
    covariance = np.linalg.inv(design.T @ design + np.eye(25) / 100.0)  # σ = 1, prior N(0, 10²)
    assert 1e4 <= np.linalg.cond(covariance) <= 1e7, np.linalg.cond(covariance)


def test_energy_equals_numpyro_potential():
    spec = load_spec("correlated_regression", n=200, batch_size=50)
    target = spec.compile()
    x, y = jnp.asarray(spec.data.x_train), jnp.asarray(spec.data.y_train)

    def numpyro_model():
        w = numpyro.sample("w", dist.Normal(0.0, 10.0).expand([24]).to_event(1))
        b = numpyro.sample("b", dist.Normal(0.0, 10.0))
        scale = numpyro.sample("scale", dist.HalfCauchy(5.0))
        numpyro.sample("y", dist.Normal(x @ w + b, scale), obs=y)

    w = jnp.linspace(-1.0, 1.0, 24)
    for u in (-0.7, 0.0, 0.9):  # the sampled (unconstrained) log σ
        position = {"net": {"w": w, "b": jnp.asarray(0.3)}, "lik": {"scale": jnp.asarray(u)}}
        values = {"w": w, "b": jnp.asarray(0.3), "scale": jnp.asarray(u)}
        theirs = float(potential_energy(numpyro_model, (), {}, values))
        assert float(target.energy(position)) == pytest.approx(theirs, rel=1e-5), u

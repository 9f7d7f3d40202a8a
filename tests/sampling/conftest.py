"""Fixtures of the sampling tests."""

import jax.numpy as jnp
import numpy as np
import pytest

import bdl


@pytest.fixture(scope="module")
def target():
    """A two-weight linear regression, minibatches of 20 of 60 rows."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 2)).astype(np.float32)
    y = (x @ np.array([1.0, -1.0]) + 0.3 * rng.normal(size=60)).astype(np.float32)
    model = bdl.Model(
        network=lambda p, x: x @ p["w"], params={"w": jnp.zeros(2)}, likelihood=bdl.Gaussian(0.3)
    )
    return bdl.compile(model, (x, y), batch_size=20)

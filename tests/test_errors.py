"""Input checks that are not rows of the bad-input corpus (tests/test_bad_input_*.py): labels
that are accepted after conversion, and a Flax network whose initialisation rejects the inputs
(it compiles the initialiser, so it cannot be a row that compiles nothing)."""

import flax.linen as nn
import jax.numpy as jnp
import numpy as np
import pytest

import bdl

N, D = 10, 3
RNG = np.random.default_rng(0)
X = RNG.normal(size=(N, D)).astype(np.float32)
Y_REG = RNG.normal(size=(N,)).astype(np.float32)
Y_CLS = RNG.integers(0, 3, size=N)


def _linear(p, x):
    return x @ p["w"]


def _fn_model(likelihood, out=1, **kw):
    """A plain-function network with ``out`` outputs (cheap to compile: no initialiser)."""
    return bdl.Model(_linear, likelihood, params={"w": jnp.zeros((D, out))}, **kw)


def test_integer_valued_float_labels_are_accepted():
    """Float labels with integer values (0., 1., 2.) are converted, for Categorical as Bernoulli."""
    compiled = bdl.compile(_fn_model(bdl.Categorical(), out=3), (X, Y_CLS.astype(np.float64)))
    assert compiled.y_train.dtype == jnp.int32
    np.testing.assert_array_equal(compiled.y_train, Y_CLS)
    assert compiled.num_classes == 3


def test_linen_network_whose_initialisation_rejects_inputs():
    """A linen module that cannot be initialised on x raises ValueError naming the input shape."""

    class Bad(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(1)(x.reshape(x.shape[0], 2, -1))  # 3 features do not split in 2

    with pytest.raises(ValueError, match=r"cannot be initialised on inputs of shape \(3,\)"):
        bdl.compile(bdl.Model(Bad(), bdl.Gaussian()), (X, Y_REG))

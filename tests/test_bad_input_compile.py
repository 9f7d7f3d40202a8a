"""Bad input to ``bdl.compile`` and the data loaders of ``bdl.data``: each case raises a clear
error naming the argument, before anything is compiled (tests/bad_input.py)."""

from types import SimpleNamespace

import numpy as np
import numpyro.distributions as dist
import pytest
from bad_input import case, check

import bdl
from bdl import data

N, D = 10, 3


def _linear(p, x):
    return x @ p["w"]


def _model(likelihood=None, out=1, **kw):
    """A plain-function network with ``out`` outputs (no initialiser: nothing to compile)."""
    likelihood = bdl.Gaussian(1.0) if likelihood is None else likelihood
    return bdl.Model(_linear, likelihood, params={"w": np.zeros((D, out), np.float32)}, **kw)


@pytest.fixture(scope="module")
def shared():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, D)).astype(np.float32)
    # warm what every compile runs (the network's first key), so that a case's count is its own
    bdl.compile(_model(), (x, np.zeros(N, np.float32)))
    return SimpleNamespace(
        x=x,
        y=rng.normal(size=N).astype(np.float32),
        labels=rng.integers(0, 3, size=N),
        vector_prior=dist.Normal(np.zeros(2, np.float32), 1.0),
    )


def _with(array, index, value):
    out = array.copy()
    out[index] = value
    return out


def _potential(log_density=None, init=None):
    return bdl.Potential(
        (lambda t: -0.5 * (t**2).sum()) if log_density is None else log_density,
        np.zeros(2, np.float32) if init is None else init,
    )


COMPILE = [
    # what is compiled, on what
    case("a string", lambda e: bdl.compile("model", (e.x, e.y)), TypeError, "bdl.Model"),
    case("no data", lambda e: bdl.compile(_model()), ValueError, "compile(model, data=...)"),
    case(
        "data as a dict without y",
        lambda e: bdl.compile(_model(), {"x": e.x, "targets": e.y}),
        ValueError,
        "needs keys 'x' and 'y'",
    ),
    case(
        "data for a potential",
        lambda e: bdl.compile(_potential(), (e.x, e.y)),
        ValueError,
        "a Potential takes no data",
    ),
    case(
        "seed float",
        lambda e: bdl.compile(_model(), (e.x, e.y), seed=1.5),
        TypeError,
        "compile(seed=...) must be an integer in [0, 2**32)",
    ),
    case(
        "seed negative",
        lambda e: bdl.compile(_potential(), seed=-3),
        ValueError,
        "compile(seed=...) must be in [0, 2**32)",
    ),
    # the data
    case(
        "x and y lengths",
        lambda e: bdl.compile(_model(), (e.x, e.y[:9])),
        ValueError,
        "x_train has 10 examples but y_train has 9",
    ),
    case(
        "NaN in x",
        lambda e: bdl.compile(_model(), (_with(e.x, (3, 1), np.nan), e.y)),
        ValueError,
        "data x_train contains 1 NaN or infinite",
    ),
    case(
        "inf in y",
        lambda e: bdl.compile(_model(), (e.x, _with(e.y, 4, np.inf))),
        ValueError,
        "data y_train contains 1 NaN or infinite",
    ),
    case(
        "text targets",
        lambda e: bdl.compile(_model(), (e.x, np.array(["a"] * N))),
        TypeError,
        "data y_train must be numeric",
    ),
    case(
        "test inputs of other features",
        lambda e: bdl.compile(_model(), (e.x, e.y, e.x[:4, :2], e.y[:4])),
        ValueError,
        "data x_test has examples of shape (2,) but x_train of shape (3,)",
    ),
    case(
        "batch_size zero",
        lambda e: bdl.compile(_model(), (e.x, e.y), batch_size=0),
        ValueError,
        "batch_size must satisfy 1 <= batch_size <= n = 10",
    ),
    case(
        "batch_size negative",
        lambda e: bdl.compile(_model(), (e.x, e.y), batch_size=-3),
        ValueError,
        "batch_size must satisfy 1 <= batch_size <= n = 10",
    ),
    case(
        "batch_size above n",
        lambda e: bdl.compile(_model(), (e.x, e.y), batch_size=N + 1),
        ValueError,
        "batch_size must satisfy 1 <= batch_size <= n = 10",
    ),
    case(
        "batch_size float",
        lambda e: bdl.compile(_model(), (e.x, e.y), batch_size=2.5),
        TypeError,
        "batch_size must be an integer",
    ),
    # labels and outputs against the likelihood
    case(
        "label above the logits",
        lambda e: bdl.compile(_model(bdl.Categorical(), 3), (e.x, _with(e.labels, 0, 3))),
        ValueError,
        "labels y must lie in [0, 2] for a network with 3 output logits",
    ),
    case(
        "negative label",
        lambda e: bdl.compile(_model(bdl.Categorical(), 3), (e.x, _with(e.labels, 0, -1))),
        ValueError,
        "labels y must lie in [0, 2] for a network with 3 output logits; found labels in [-1, 2]. "
        "Map them to 0, …, K−1",
    ),
    case(
        "fractional labels",
        lambda e: bdl.compile(_model(bdl.Categorical(), 3), (e.x, _with(e.labels * 1.0, 2, 0.5))),
        ValueError,
        "integer class labels; y_train has non-integer values",
    ),
    case(
        "one-hot labels",
        lambda e: bdl.compile(_model(bdl.Categorical(), 3), (e.x, np.eye(3)[e.labels])),
        ValueError,
        "Convert one-hot labels with y.argmax(-1)",
    ),
    case(
        "categorical on one output vector",
        lambda e: bdl.compile(
            bdl.Model(_linear, bdl.Categorical(), params={"w": np.zeros(D, np.float32)}),
            (e.x, e.labels),
        ),
        ValueError,
        "Categorical likelihood needs network outputs of shape (batch, num_classes)",
    ),
    case(
        "bernoulli on three outputs",
        lambda e: bdl.compile(_model(bdl.Bernoulli(), 3), (e.x, e.labels % 2)),
        ValueError,
        "Bernoulli likelihood needs one logit per example",
    ),
    case(
        "bernoulli labels not binary",
        lambda e: bdl.compile(_model(bdl.Bernoulli()), (e.x, e.labels)),
        ValueError,
        "Bernoulli likelihood needs labels y in {0, 1}",
    ),
    case(
        "gaussian outputs for fewer targets",
        lambda e: bdl.compile(_model(out=3), (e.x, e.y)),
        ValueError,
        "Gaussian likelihood: network output shape (10, 3) does not match the target shape (10,)",
    ),
    case(
        "gaussian outputs for more targets",
        lambda e: bdl.compile(_model(out=3), (e.x, np.zeros((N, 2), np.float32))),
        ValueError,
        "does not match the target shape (10, 2)",
    ),
    case(
        "network rejects the inputs",
        lambda e: bdl.compile(
            bdl.Model(_linear, bdl.Gaussian(), params={"w": np.zeros((4, 1), np.float32)}),
            (e.x, e.y),
        ),
        ValueError,
        "network cannot be applied to inputs of shape (3,) (per example)",
    ),
    # the declared parameters and priors
    case(
        "integer parameters",
        lambda e: bdl.compile(
            bdl.Model(_linear, bdl.Gaussian(), params={"w": np.zeros((D, 1), int)}), (e.x, e.y)
        ),
        TypeError,
        "Model(params=...) leaf w has dtype int64",
    ),
    case(
        "NaN parameters",
        lambda e: bdl.compile(
            bdl.Model(_linear, bdl.Gaussian(), params={"w": np.full((D, 1), np.nan)}), (e.x, e.y)
        ),
        ValueError,
        "Model(params=...) leaf w has NaN or infinite entries",
    ),
    case(
        "ByPath with no rule for a leaf",
        lambda e: bdl.compile(_model(prior=bdl.ByPath({"bias": bdl.Normal()})), (e.x, e.y)),
        ValueError,
        "no pattern matches parameter 'net/w' and no default was given",
    ),
    case(
        "prior batch shape against a leaf",
        lambda e: bdl.compile(_model(prior=e.vector_prior), (e.x, e.y)),
        ValueError,
        "batch_shape (2,) does not broadcast to parameter 'net/w' of shape (3, 1)",
    ),
    # potentials
    case(
        "potential init of text",
        lambda e: bdl.compile(_potential(init="zeros")),
        TypeError,
        "Potential(init=...) must be a numeric array",
    ),
    case(
        "potential init with NaN",
        lambda e: bdl.compile(_potential(init=np.array([np.nan, 0.0], np.float32))),
        ValueError,
        "Potential(init=...) has NaN or infinite entries",
    ),
    case(
        "potential log-density not a scalar",
        lambda e: bdl.compile(_potential(log_density=lambda t: -(t**2))),
        ValueError,
        "must return a scalar log π(θ); at a position like init an array of shape (2,) it "
        "returns an array of shape (2,)",
    ),
    case(
        "potential log-density fails on init",
        lambda e: bdl.compile(_potential(log_density=lambda t: t["a"])),
        ValueError,
        "Potential(log_density=...) cannot be evaluated at a position like init",
    ),
]

DATA = [
    case("unknown dataset", lambda e: data.load("mnsit"), ValueError, "Did you mean 'mnist'?"),
    case(
        "test fraction of one half and more",
        lambda e: data.iris(test_fraction=1.5),
        ValueError,
        "test_fraction must be in (0, 1); got 1.5",
    ),
    case("split seed float", lambda e: data.iris(seed=1.5), TypeError, "seed must be an integer"),
    case(
        "too few points",
        lambda e: data.regression_1d_gap(1),
        ValueError,
        "regression_1d_gap(n=...) must be >= 2",
    ),
    case(
        "points float",
        lambda e: data.regression_1d_gap(10.5),
        TypeError,
        "regression_1d_gap(n=...) must be an integer",
    ),
    case(
        "negative noise",
        lambda e: data.regression_1d_gap(10, noise_sd=-1.0),
        ValueError,
        "regression_1d_gap(noise_sd=...) must be >= 0",
    ),
    case(
        "negative generator seed",
        lambda e: data.linear_regression(seed=-1),
        ValueError,
        "seed must be >= 0",
    ),
    case(
        "empty regression",
        lambda e: data.linear_regression(n=0),
        ValueError,
        "linear_regression(n=...) must be >= 1",
    ),
    case(
        "one class",
        lambda e: data.mlp_prior_data(num_classes=1),
        ValueError,
        "mlp_prior_network(num_classes=...) must be >= 2",
    ),
]


@pytest.mark.parametrize(("call", "error", "fragment"), COMPILE + DATA)
def test_bad_input(shared, call, error, fragment):
    check(call, error, fragment, shared)

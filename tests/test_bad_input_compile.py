"""Bad input to ``bdl.compile`` and the data loaders of ``bdl.data``: each case raises a clear
error naming the argument, before anything is compiled (tests/bad_input.py)."""

from types import SimpleNamespace

import jax.numpy as jnp
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
    # and NumPyro's validation of integer parameters, traced once (the constant it makes)
    binomial = bdl.Likelihood.from_numpyro(dist.Binomial, parameter="logits", total_count="trials")
    trials = np.full(N, 10.0, np.float32)
    bdl.compile(_model(binomial), {"x": x, "y": np.ones(N, np.float32), "trials": trials})
    return SimpleNamespace(
        x=x,
        y=rng.normal(size=N).astype(np.float32),
        labels=rng.integers(0, 3, size=N),
        counts=rng.poisson(2.0, size=N).astype(np.float32),
        trials=trials,
        poisson=bdl.Likelihood.from_numpyro(dist.Poisson, link=jnp.exp),
        beta=bdl.Likelihood.from_numpyro(dist.Beta, link=jnp.exp, concentration0=2.0),
        binomial=binomial,
        vector_prior=dist.Normal(np.zeros(2, np.float32), 1.0),
    )


def _with(array, index, value):
    out = array.copy()
    out[index] = value
    return out


def _counts_data(e, trials_test):
    """The shared counts with a test split of two, their trials as per-example fields."""
    fields, fields_test = {"trials": e.trials}, {"trials": trials_test}
    return data.Dataset(
        "d", e.x, e.counts, e.x[:2], e.counts[:2], fields=fields, fields_test=fields_test
    )


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
        "y_train holds label 3 but the network has 3 outputs (labels 0, …, 2): fix the labels, "
        "or give the network 4 outputs",
    ),
    case(
        "negative label",
        lambda e: bdl.compile(_model(bdl.Categorical(), 3), (e.x, _with(e.labels, 0, -1))),
        ValueError,
        "y_train holds label -1 but the network has 3 outputs (labels 0, …, 2): map the labels "
        "to 0, …, K−1",
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
        "y_train holds label 2; a Bernoulli likelihood needs labels 0 and 1",
    ),
    case(
        "bernoulli labels of two dimensions",
        lambda e: bdl.compile(_model(bdl.Bernoulli()), (e.x, np.zeros((N, 2), int))),
        ValueError,
        "Bernoulli likelihood needs labels y in {0, 1} of shape (n,); got shape (10, 2)",
    ),
    # test labels, and targets against the likelihood's support
    case(
        "test labels above the logits",
        lambda e: bdl.compile(
            _model(bdl.Categorical(), 3), (e.x, e.labels, e.x[:4], np.array([3, 0, 7, 1]))
        ),
        ValueError,
        "y_test holds labels 3 and 7 but the network has 3 outputs (labels 0, …, 2)",
    ),
    case(
        "fractional test labels",
        lambda e: bdl.compile(
            _model(bdl.Categorical(), 3), (e.x, e.labels, e.x[:2], np.array([0.5, 1.0]))
        ),
        ValueError,
        "integer class labels; y_test has non-integer values",
    ),
    case(
        "bernoulli test labels not binary",
        lambda e: bdl.compile(
            _model(bdl.Bernoulli()), (e.x, e.labels % 2, e.x[:3], np.array([0, 1, -1]))
        ),
        ValueError,
        "y_test holds label -1; a Bernoulli likelihood needs labels 0 and 1",
    ),
    case(
        "poisson negative counts",
        lambda e: bdl.compile(_model(bdl.Poisson()), (e.x, _with(e.counts, 4, -2.0))),
        ValueError,
        "y_train holds values outside the support of Poisson, IntegerNonnegative(lower_bound=0): "
        "1 of 10 rows lie outside it (rows 4), e.g. -2",
    ),
    case(
        "from_numpyro poisson fractional counts",
        lambda e: bdl.compile(_model(e.poisson), (e.x, _with(e.counts, 2, 0.5))),
        ValueError,
        "y_train holds values outside the support of Likelihood.from_numpyro(Poisson, link=exp",
    ),
    case(
        "from_numpyro poisson negative test counts",
        lambda e: bdl.compile(
            _model(e.poisson), (e.x, e.counts, e.x[:3], np.array([1.0, -1.0, -3.0]))
        ),
        ValueError,
        "y_test holds values outside the support of Likelihood.from_numpyro(Poisson",
    ),
    case(
        "from_numpyro beta target of one",
        lambda e: bdl.compile(_model(e.beta), (e.x, _with(np.full(N, 0.5, np.float32), 6, 1.5))),
        ValueError,
        "y_train holds values outside the support of Likelihood.from_numpyro(Beta",
    ),
    case(
        "from_numpyro field outside its parameter's support",
        lambda e: bdl.compile(
            _model(e.binomial), {"x": e.x, "y": e.counts, "trials": _with(e.trials, 1, -4.0)}
        ),
        ValueError,
        "data fields['trials'] feeds the parameter 'total_count' of "
        "Likelihood.from_numpyro(Binomial",
    ),
    case(
        "from_numpyro test field outside its parameter's support",
        lambda e: bdl.compile(_model(e.binomial), _counts_data(e, np.array([2.5, 3.0]))),
        ValueError,
        "data fields_test['trials'] feeds the parameter 'total_count'",
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
        "network output of integers",
        lambda e: bdl.compile(
            bdl.Model(
                lambda p, x: (x @ p["w"]).astype(np.int32),
                bdl.Gaussian(),
                params={"w": np.zeros((D, 1), np.float32)},
            ),
            (e.x, e.y),
        ),
        TypeError,
        "the network's output has dtype int32; a likelihood needs floating-point outputs",
    ),
    case(
        "network output of booleans",
        lambda e: bdl.compile(
            bdl.Model(lambda p, x: x @ p["w"] > 0, bdl.Bernoulli(), params={"w": np.zeros(D)}),
            (e.x, e.labels % 2),
        ),
        TypeError,
        "the network's output has dtype bool",
    ),
    case(
        "network output of two arrays",
        lambda e: bdl.compile(
            bdl.Model(lambda p, x: (x @ p["w"], x), bdl.Gaussian(), params={"w": np.zeros(D)}),
            (e.x, e.y),
        ),
        ValueError,
        "the network must return one array of outputs per batch",
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

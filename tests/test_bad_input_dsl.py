"""Bad input to the declarations (``bdl.Model``, likelihoods, priors, ``bdl.Potential``,
temperatures): each case raises a clear error naming the argument when it is declared, before
anything is traced or compiled (tests/bad_input.py)."""

from types import SimpleNamespace

import numpy as np
import numpyro.distributions as dist
import pytest
from bad_input import case, check

import bdl

NAN, INF = float("nan"), float("inf")


@pytest.fixture(scope="module")
def shared():
    return SimpleNamespace(
        params={"w": np.zeros((3, 1), np.float32)},
        discrete=dist.Poisson(np.float32(3.0)),
    )


def _linear(p, x):
    return x @ p["w"]


def _model(e, **kw):
    return bdl.Model(_linear, kw.pop("likelihood", bdl.Gaussian()), params=e.params, **kw)


def _potential(**kw):
    return bdl.Potential(lambda t: -(t**2).sum(), **{"init": np.zeros(2, np.float32), **kw})


MODEL = [
    case("network a number", lambda e: bdl.Model(42, bdl.Gaussian()), TypeError, "network=..."),
    case(
        "plain function without params",
        lambda e: bdl.Model(_linear, bdl.Gaussian()),
        ValueError,
        "Model(params=...) is required",
    ),
    case(
        "likelihood a NumPyro class",
        lambda e: bdl.Model(_linear, dist.Normal, params=e.params),
        TypeError,
        "Model(likelihood=...) must be a bdl likelihood",
    ),
    case(
        "likelihood a bdl class",
        lambda e: bdl.Model(_linear, bdl.Gaussian, params=e.params),
        TypeError,
        "Model(likelihood=...) must be a bdl likelihood",
    ),
    case("prior a number", lambda e: _model(e, prior=1.0), TypeError, "prior must be a bdl prior"),
    case(
        "prior a class",
        lambda e: _model(e, prior=bdl.Normal),
        TypeError,
        "prior must be a bdl prior",
    ),
    case(
        "batched as text",
        lambda e: _model(e, batched="yes"),
        TypeError,
        "Model(batched=...) must be True, False or None",
    ),
    case("name a number", lambda e: _model(e, name=3), TypeError, "Model(name=...) must be a str"),
    # temperature: a finite T >= 0 or a schedule
    case(
        "temperature negative",
        lambda e: _model(e, temperature=-1.0),
        ValueError,
        "temperature must be >= 0",
    ),
    case(
        "temperature slightly negative",
        lambda e: _model(e, temperature=-1e-6),
        ValueError,
        "temperature must be >= 0",
    ),
    case(
        "temperature infinite",
        lambda e: _model(e, temperature=INF),
        ValueError,
        "temperature must be >= 0 and finite",
    ),
    case("temperature NaN", lambda e: _model(e, temperature=NAN), ValueError, "got nan"),
    case(
        "temperature as text",
        lambda e: _model(e, temperature="cold"),
        TypeError,
        "temperature must be a float T >= 0 or a schedule",
    ),
    case("temperature bool", lambda e: _model(e, temperature=True), TypeError, "got True"),
    case(
        "ramp of a float length",
        lambda e: bdl.linear_ramp(0.0, 1.0, 10.5),
        TypeError,
        "linear_ramp(num_steps=...) must be an integer",
    ),
    case(
        "ramp to a negative temperature",
        lambda e: bdl.linear_ramp(1.0, -1.0, 10),
        ValueError,
        "temperature must be >= 0",
    ),
]

LIKELIHOODS = [
    case(
        "gaussian scale zero",
        lambda e: bdl.Gaussian(scale=0.0),
        ValueError,
        "Gaussian(scale=...) must be > 0",
    ),
    case(
        "gaussian scale infinite",
        lambda e: bdl.Gaussian(scale=INF),
        ValueError,
        "Gaussian(scale=...) must be > 0 and finite; got inf. Give σ > 0, the name of a data field "
        "holding σ_i per example, or None to learn it.",
    ),
    case(
        "gaussian scale text",
        lambda e: bdl.Gaussian(scale="1"),
        TypeError,
        "Gaussian(scale=...) must be a number > 0",
    ),
    case(
        "gaussian scale prior on the line",
        lambda e: bdl.Gaussian(None, scale_prior=dist.Normal()),
        ValueError,
        "a scalar distribution on a subset of (0, ∞)",
    ),
    case(
        "student-t degrees of freedom negative",
        lambda e: bdl.StudentT(df=-1.0),
        ValueError,
        "StudentT(df=...) must be > 0",
    ),
    case(
        "student-t degrees of freedom infinite",
        lambda e: bdl.StudentT(df=INF),
        ValueError,
        "StudentT(df=...) must be > 0 and finite",
    ),
]

PRIORS = [
    case("normal scale zero", lambda e: bdl.Normal(0.0), ValueError, "Normal(scale=...) must be"),
    case(
        "normal scale text",
        lambda e: bdl.Normal("1"),
        TypeError,
        "Normal(scale=...) must be a number > 0",
    ),
    case(
        "normal loc NaN",
        lambda e: bdl.Normal(1.0, loc=NAN),
        ValueError,
        "Normal(loc=...) must be finite",
    ),
    case(
        "laplace scale negative",
        lambda e: bdl.Laplace(-1.0),
        ValueError,
        "Laplace(scale=...) must be > 0",
    ),
    case(
        "he-normal gain zero",
        lambda e: bdl.HeNormal(gain=0.0),
        ValueError,
        "HeNormal(gain=..., bias_scale=...): gain must be > 0",
    ),
    case(
        "he-normal gain infinite",
        lambda e: bdl.HeNormal(gain=INF),
        ValueError,
        "gain must be > 0 and finite",
    ),
    case(
        "discrete prior",
        lambda e: bdl.Distribution(e.discrete),
        ValueError,
        "prior Poisson is discrete",
    ),
    case(
        "by-path pattern not a regex",
        lambda e: bdl.ByPath({"[bias": bdl.Normal()}),
        ValueError,
        "ByPath: '[bias' is not a regular expression",
    ),
    case(
        "by-path rules a list of patterns",
        lambda e: bdl.ByPath(["bias"]),
        TypeError,
        "a list of (pattern, prior) pairs",
    ),
    case(
        "by-path rule to a number",
        lambda e: bdl.ByPath({"bias": 0.1}),
        TypeError,
        "prior must be a bdl prior",
    ),
]

POTENTIAL = [
    case(
        "log-density not a function",
        lambda e: bdl.Potential(3, init=np.zeros(2, np.float32)),
        TypeError,
        "Potential(log_density=...) must be a function",
    ),
    case(
        "no init",
        lambda e: _potential(init=None),
        ValueError,
        "Potential(init=...) is required",
    ),
    case(
        "potential temperature negative",
        lambda e: _potential(temperature=-2.0),
        ValueError,
        "temperature must be >= 0",
    ),
    case(
        "gradient noise negative",
        lambda e: _potential(grad_noise=-0.1),
        ValueError,
        "Potential(grad_noise=...) must be >= 0",
    ),
    case(
        "gradient noise text",
        lambda e: _potential(grad_noise="1"),
        TypeError,
        "Potential(grad_noise=...) must be a number",
    ),
]


@pytest.mark.parametrize(("call", "error", "fragment"), MODEL + LIKELIHOODS + PRIORS + POTENTIAL)
def test_bad_input(shared, call, error, fragment):
    check(call, error, fragment, shared)


def test_zero_temperature_is_legal():
    """T = 0 (the optimiser limit) is a legal declaration."""
    model = bdl.Model(_linear, bdl.Gaussian(), params={"w": np.zeros(3)}, temperature=0.0)
    assert model.temperature == 0.0

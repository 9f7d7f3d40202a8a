"""Priors that cannot be sampled are refused before anything compiles (docs/compiler.md, *Input
checks*): an argument outside NumPyro's constraint for it (checked as NumPyro's
``validate_args`` would, also where its validation was off when the prior was built), an empty
support, an event shape that leaves the parameter nothing to sample, and a declared start
outside its prior's support. Each message names the parameter, the value and the fix
(tests/bad_input.py: no compilation before the error)."""

from __future__ import annotations

from types import SimpleNamespace

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from bad_input import case, check

import bdl

N = 10


def _network(p, x):
    return x @ p["v"] + 0.0 * jnp.sum(p["w"])


def _model(prior, w=None, likelihood=None):
    """A plain-function regression on 3 inputs (no initialiser: nothing to compile) with an
    extra parameter w under ``prior``."""
    w = np.full(3, 1.0 / 3.0, np.float32) if w is None else np.asarray(w, np.float32)
    return bdl.Model(
        _network,
        likelihood or bdl.Gaussian(1.0),
        params={"v": np.zeros(3, np.float32), "w": w},
        prior=bdl.ByPath({"^net/w$": prior}, default=bdl.Normal(1.0)),
    )


with numpyro.validation_enabled(False):  # as a user may build them: NumPyro does not refuse
    LKJ_ZERO = dist.LKJCholesky(3, 0.0)
    LKJ_NEGATIVE = dist.LKJCholesky(3, -1.0)
    NEGATIVE_SCALE = dist.Normal(0.0, -1.0)
    HALF_CAUCHY_NEGATIVE = dist.HalfCauchy(-1.0)
    NESTED = dist.TruncatedDistribution(dist.StudentT(-3.0, 0.0, 10.0), low=0.0)
    NAN_LOC = dist.Normal(np.nan, 1.0)
    HALF_NORMAL_NEGATIVE = dist.HalfNormal(-1.0)


@pytest.fixture(scope="module")
def shared():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 3)).astype(np.float32)
    y = rng.normal(size=N).astype(np.float32)
    bdl.compile(_model(bdl.Normal(1.0)), (x, y))  # warm what every compile runs
    simplex = _model(dist.Dirichlet(np.ones(3, np.float32)), w=[0.5, 0.6, 0.2])
    beta = _model(dist.Beta(2.0, 2.0), w=[0.5, 1.6, 0.2])
    return SimpleNamespace(
        x=x,
        y=y,
        off_simplex=bdl.compile(simplex, (x, y), check_gradient=False),
        off_interval=bdl.compile(beta, (x, y), check_gradient=False),
        kernel=bdl.kernels.sgld(1e-3),
    )


def _compile(e, model):
    return bdl.compile(model, (e.x, e.y))


def _fixed(e, target):
    return bdl.sample(target, e.kernel, num_steps=10, init="fixed", progress=False)


CASES = [
    case(
        "LKJ concentration 0",
        lambda e: _compile(e, _model(LKJ_ZERO, w=np.eye(3))),
        ValueError,
        "the prior of net/w, LKJCholesky, has concentration = 0, but NumPyro's LKJCholesky "
        "needs concentration > 0",
    ),
    case(
        "LKJ concentration negative",
        lambda e: _compile(e, _model(LKJ_NEGATIVE, w=np.eye(3))),
        ValueError,
        "Give LKJCholesky(..., concentration=...) a value > 0 (η = 1 is uniform",
    ),
    case(
        "Normal scale negative",
        lambda e: _compile(e, _model(NEGATIVE_SCALE)),
        ValueError,
        "the prior of net/w, Normal, has scale = -1",
    ),
    case(
        "Normal loc NaN",
        lambda e: _compile(e, _model(NAN_LOC)),
        ValueError,
        "has loc = nan, but NumPyro's Normal needs loc a finite number",
    ),
    case(
        "a nested distribution's argument",
        lambda e: _compile(e, _model(NESTED)),
        ValueError,
        "(its base_dist), StudentT, has df = -3",
    ),
    case(
        "a hierarchical prior's hyper-prior",
        lambda e: _compile(e, _model(bdl.HierarchicalNormal(scale=HALF_CAUCHY_NEGATIVE, name="g"))),
        ValueError,
        "the scale prior of HierarchicalNormal(name='g'), HalfCauchy, has scale = -1",
    ),
    case(
        "a learned likelihood parameter's prior",
        lambda e: _compile(
            e, _model(bdl.Normal(), likelihood=bdl.Gaussian(None, scale_prior=HALF_NORMAL_NEGATIVE))
        ),
        ValueError,
        "the prior of lik/scale, HalfNormal, has scale = -1",
    ),
    case(
        "Uniform with reversed bounds",
        lambda e: _compile(e, _model(dist.Uniform(2.0, 1.0))),
        ValueError,
        "has an empty support: low = 2 and high = 1, and the lower bound must lie below the "
        "upper one; its density would be sampled through a map onto an empty interval (a NaN "
        "start). Fix: put the lower bound first: Uniform(low=1, high=2)",
    ),
    case(
        "Dirichlet of one entry on a (3, 1) weight",
        lambda e: _compile(e, _model(dist.Dirichlet(np.ones(1)), w=np.ones((3, 1)))),
        ValueError,
        "the prior of net/w, Dirichlet with event shape (1,), leaves nothing to sample",
    ),
    case(
        "init fixed off the simplex",
        lambda e: _fixed(e, e.off_simplex),
        ValueError,
        "init='fixed' starts from the declared parameters, but they lie outside their prior's "
        "support: net/w = [0.5, 0.6, 0.2], and its prior Dirichlet needs values on the simplex "
        "(entries ≥ 0 that sum to 1), and its entries sum to 1.3",
    ),
    case(
        "init fixed outside an interval",
        lambda e: _fixed(e, e.off_interval),
        ValueError,
        "net/w = [0.5, 1.6, 0.2], and its prior Beta needs values in [0, 1]",
    ),
]


@pytest.mark.parametrize(("call", "error", "fragment"), CASES)
def test_bad_prior(shared, call, error, fragment):
    check(call, error, fragment, shared)


def test_numpyro_refuses_an_lkj_concentration_of_0_when_it_validates():
    """With NumPyro's validation on (its default), the distribution itself refuses, in the
    user's own line, with the message docs/troubleshooting.md explains."""
    with pytest.raises(ValueError, match="Beta distribution got invalid concentration0"):
        dist.LKJCholesky(3, 0.0)


def test_valid_priors_and_a_declared_start_inside_the_support_pass(shared):
    for prior, w in [
        (dist.Dirichlet(np.ones(3)), np.full(3, 1.0 / 3.0)),
        (dist.Uniform(-1.0, 2.0), np.zeros(3)),
        (dist.LKJCholesky(3, 1.0), np.eye(3)),
    ]:
        target = bdl.compile(_model(prior, w=w), (shared.x, shared.y), check_gradient=False)
        target.check_init("fixed", 1)

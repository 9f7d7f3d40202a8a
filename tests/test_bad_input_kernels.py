"""Bad input to the kernels (``bdl.kernels.get``, the factories, wrappers, schedules,
preconditioners, the checker) and to the meta-trainers' configurations: each case raises a clear
error naming the argument when the kernel or config is built, before anything is compiled
(tests/bad_input.py)."""

from types import SimpleNamespace

import jax
import numpy as np
import pytest
from bad_input import case, check

import bdl
from bdl import kernels
from bdl.kernels import preconditioners, schedules
from bdl.meta import l2e_training, nnsghmc_training
from bdl.meta.l2e_config import L2EConfig
from bdl.meta.nnsghmc_config import NNSGHMCConfig

NAN, INF = float("nan"), float("inf")


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    return SimpleNamespace(
        out=tmp_path_factory.mktemp("meta"),
        nan_step=jax.numpy.asarray(NAN),  # a concrete array step size, built outside the case
    )


REGISTRY = [
    case(
        "unknown kernel name",
        lambda e: kernels.get("sghcm"),
        ValueError,
        "unknown kernel name 'sghcm'. Did you mean 'sghmc'?",
    ),
    case(
        "unknown hyper-parameter",
        lambda e: kernels.get("sghmc", stepsize=1e-3),
        ValueError,
        "sghmc: unknown hyper-parameter 'stepsize' (did you mean 'step_size'?). Valid: "
        "collect_momentum, friction",
    ),
    case(
        "unknown hyper-parameter of a wrapper",
        lambda e: kernels.get("cyclical", step_size=1e-3, cycle_lenght=10),
        ValueError,
        "cyclical: unknown hyper-parameter 'cycle_lenght' (did you mean 'cycle_length'?)",
    ),
    case(
        "unknown hyper-parameter of a wrapper's base",
        lambda e: kernels.get("entropy", eta=1.0, stepsize=1e-3),
        ValueError,
        "Valid: base, eta, variant; for base 'sgld': preconditioner, step_size",
    ),
    case(
        "unknown base kernel",
        lambda e: kernels.get("cyclical", base="sgdl", step_size=1e-3, cycle_length=10),
        ValueError,
        "unknown kernel name 'sgdl'. Did you mean 'sgld'?",
    ),
    case(
        "base of another type",
        lambda e: kernels.cyclical(3, cycle_length=10),
        ValueError,
        "cyclical: base must be a kernel name or a bdl kernel",
    ),
    case(
        "register a non-function",
        lambda e: kernels.register("mine", 3, "a kernel"),
        TypeError,
        "register('mine'): factory must be a function",
    ),
    case(
        "register defaults the factory lacks",
        lambda e: kernels.register("mine", kernels.sgld, "a kernel", {"stepsize": 1e-3}),
        ValueError,
        "register('mine') defaults: unknown hyper-parameter 'stepsize'",
    ),
    case(
        "check a name",
        lambda e: kernels.check("sgld"),
        TypeError,
        "check(kernel) needs a kernel object",
    ),
    case(
        "check at T = 0",
        lambda e: kernels.check(kernels.get("sgld", step_size=1e-3), temperature=0.0),
        ValueError,
        "check(temperature=...) must be a finite number >= 0.01",
    ),
]

STEP_SIZES = [
    case("step size zero", lambda e: kernels.get("sgld", step_size=0.0), ValueError, "must be > 0"),
    case(
        "step size negative",
        lambda e: kernels.get("sghmc", step_size=-1e-3),
        ValueError,
        "sghmc: step_size must be > 0",
    ),
    case("step size NaN", lambda e: kernels.sgld(NAN), ValueError, "sgld: step_size must be > 0"),
    case("step size infinite", lambda e: kernels.sgnht(INF), ValueError, "and finite; got inf"),
    case(
        "step size as text",
        lambda e: kernels.sgld("1e-3"),
        TypeError,
        "sgld: step_size must be a float > 0 or a schedule step -> value; got '1e-3'",
    ),
    case("step size bool", lambda e: kernels.psgld(True), TypeError, "got True"),
    case(
        "step size a NaN array",
        lambda e: kernels.sgld(e.nan_step),
        ValueError,
        "sgld: step_size must be > 0 and finite; got nan",
    ),
    case(
        "schedule of a float cycle",
        lambda e: schedules.cyclical_cosine(1e-3, 10.5),
        TypeError,
        "cyclical_cosine(cycle_length=...) must be an integer",
    ),
    case(
        "decay to a negative step",
        lambda e: schedules.polynomial_decay(1e-3, -1e-4, 1.0, 100),
        ValueError,
        "polynomial_decay(end=...) must be > 0",
    ),
]

FACTORIES = [
    case(
        "friction zero",
        lambda e: kernels.sghmc(1e-3, 0.0),
        ValueError,
        "sghmc: friction must be > 0",
    ),
    case(
        "friction infinite", lambda e: kernels.sghmc(1e-3, INF), ValueError, "friction must be > 0"
    ),
    case(
        "friction text", lambda e: kernels.sghmc(1e-3, "1"), TypeError, "friction must be a number"
    ),
    case(
        "friction negative entries",
        lambda e: kernels.sghmc(1e-3, {"w": -np.ones(3)}),
        ValueError,
        "sghmc: friction leaf w must have finite entries > 0; got -1",
    ),
    case(
        "mass NaN", lambda e: kernels.sghmc(1e-3, mass=NAN), ValueError, "sghmc: mass must be > 0"
    ),
    case(
        "friction without a step size",
        lambda e: kernels.sghmc(friction=2.0),
        ValueError,
        "friction is adapted with the step size",
    ),
    case(
        "learning rate infinite",
        lambda e: kernels.sghmc(learning_rate=INF, momentum=0.9),
        ValueError,
        "sghmc: learning_rate must be > 0 and finite",
    ),
    case(
        "momentum one",
        lambda e: kernels.sghmc(learning_rate=0.1, momentum=1.0),
        ValueError,
        "sghmc: momentum must be in [0, 1); got 1",
    ),
    case(
        "momentum text",
        lambda e: kernels.sghmc(learning_rate=0.1, momentum="0.9"),
        TypeError,
        "sghmc: momentum must be a number in [0, 1)",
    ),
    case(
        "momentum without a learning rate",
        lambda e: kernels.sghmc(momentum=0.9),
        ValueError,
        "momentum goes with learning_rate",
    ),
    case(
        "collect_momentum text",
        lambda e: kernels.sghmc(1e-3, collect_momentum="yes"),
        TypeError,
        "collect_momentum must be True or False",
    ),
    case(
        "init_momentum unknown",
        lambda e: kernels.sghmc(1e-3, init_momentum="random"),
        ValueError,
        "init_momentum must be 'zero' or 'sample'",
    ),
    case(
        "preconditioner a name",
        lambda e: kernels.sgld(1e-3, preconditioner="rmsprop"),
        ValueError,
        "preconditioner must be a bdl.kernels.preconditioners object",
    ),
    case(
        "thermostat diffusion infinite",
        lambda e: kernels.sgnht(1e-3, INF),
        ValueError,
        "sgnht: diffusion (A) must be > 0 and finite",
    ),
    case(
        "initial thermostat NaN",
        lambda e: kernels.sgnht(1e-3, init_thermostat=NAN),
        ValueError,
        "sgnht: init_thermostat must be finite",
    ),
    case(
        "rmsprop decay text",
        lambda e: kernels.psgld(1e-3, alpha="0.9"),
        TypeError,
        "rmsprop: alpha must be a number in [0, 1)",
    ),
    case(
        "rmsprop decay one",
        lambda e: kernels.get("psgld", alpha=1.0),
        ValueError,
        "rmsprop: alpha must be in [0, 1)",
    ),
    case(
        "layerwise eps negative",
        lambda e: preconditioners.layerwise(eps=-1.0),
        ValueError,
        "layerwise: eps must be >= 0",
    ),
    case(
        "nnsghmc alpha text",
        lambda e: kernels.nnsghmc(1e-2, alpha="1"),
        TypeError,
        "nnsghmc: alpha must be a number >= 0",
    ),
    case(
        "l2e friction zero", lambda e: kernels.l2e(1e-2, 0.0), ValueError, "l2e: friction must be"
    ),
    case(
        "wenzel learning rate negative",
        lambda e: kernels.wenzel(-0.1),
        ValueError,
        "wenzel: learning_rate must be > 0",
    ),
    case("wenzel schedule", lambda e: kernels.wenzel(schedule="linear"), ValueError, "'cosine' or"),
    case(
        "cyclical without a cycle",
        lambda e: kernels.cyclical("sgld", step_size=1e-3),
        ValueError,
        "give cycle_length (steps per cycle), or num_cycles with num_steps",
    ),
    case(
        "cyclical cycle float",
        lambda e: kernels.cyclical("sgld", step_size=1e-3, cycle_length=10.0),
        ValueError,
        "cycle_length must be an integer >= 1",
    ),
    case(
        "cyclical exploration of the whole cycle",
        lambda e: kernels.cyclical("sgld", step_size=1e-3, cycle_length=10, exploration=1.0),
        ValueError,
        "exploration must be a fraction in [0, 1)",
    ),
    case(
        "cyclical base object with hyper-parameters",
        lambda e: kernels.cyclical(kernels.sgld(1e-3), cycle_length=10, friction=2.0),
        ValueError,
        "pass them to the kernel object instead",
    ),
    case(
        "entropy without eta",
        lambda e: kernels.entropy("sgld", step_size=1e-3),
        ValueError,
        "entropy: eta (the coupling variance η > 0) is required",
    ),
    case(
        "entropy variant",
        lambda e: kernels.entropy("sgld", eta=1.0, variant="gibs", step_size=1e-3),
        ValueError,
        "variant must be one of ('joint', 'gibbs')",
    ),
]


def _l2e(e, **config):
    return l2e_training.train({"kernel": "l2e", **config}, e.out, progress=False)


META = [
    case(
        "config key misspelt",
        lambda e: _l2e(e, num_pair=3),
        ValueError,
        "unknown config keys ['num_pair']. Did you mean 'num_pairs'?",
    ),
    case(
        "config value of another type",
        lambda e: _l2e(e, num_pairs="3"),
        ValueError,
        "config key 'num_pairs' must be an integer; got '3'",
    ),
    case(
        "config value out of range",
        lambda e: _l2e(e, sigma=-1.0),
        ValueError,
        "config key 'sigma' must be > 0",
    ),
    case(
        "config NaN",
        lambda e: nnsghmc_training.train({"step_size": NAN}, e.out, progress=False),
        ValueError,
        "config key 'step_size' must be a finite number",
    ),
    case(
        "config built directly with text",
        lambda e: NNSGHMCConfig(step_size="0.1"),
        ValueError,
        "config key 'step_size' must be a finite number; got '0.1'",
    ),
    case(
        "config built for another kernel",
        lambda e: L2EConfig(kernel="sgld"),
        ValueError,
        "config key 'kernel' must be one of ['l2e', 'kinetic-l2e']",
    ),
    case(
        "meta-train a kernel without a trainer",
        lambda e: bdl.meta.trainer("sgld"),
        ValueError,
        "kernel must be one of ['kinetic-l2e', 'l2e', 'nnsghmc'] for meta-training",
    ),
]


@pytest.mark.parametrize(("call", "error", "fragment"), REGISTRY + STEP_SIZES + FACTORIES + META)
def test_bad_input(shared, call, error, fragment):
    check(call, error, fragment, shared)


def test_registry_is_unchanged_by_refused_registrations():
    """A refused ``register`` leaves nothing behind."""
    assert "mine" not in kernels.names()

"""Bad input to ``bdl.sample``, ``bdl.validate`` and ``bdl.optimise.minimise``: each case raises
a clear error naming the argument, before anything is compiled (tests/bad_input.py)."""

from types import SimpleNamespace

import jax
import numpy as np
import numpyro.distributions as dist
import optax
import pytest
from bad_input import case, check

import bdl
from bdl.optimise import minimise

N, D = 20, 5
RUN = dict(num_steps=10, progress=False)


def _linear(p, x):
    return x @ p["w"]


@pytest.fixture(scope="module")
def shared():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, D)).astype(np.float32)
    y = rng.normal(size=N).astype(np.float32)
    model = bdl.Model(_linear, bdl.Gaussian(1.0), params={"w": np.zeros(D, np.float32)})
    half_normal = bdl.Model(
        _linear,
        bdl.Gaussian(1.0),
        params={"w": np.zeros(D, np.float32)},
        prior=dist.HalfNormal(1.0),
    )
    potential = bdl.Potential(lambda t: -0.5 * (t**2).sum(), init=np.zeros(2, np.float32))
    return SimpleNamespace(
        model=model,
        compiled=bdl.compile(model, (x, y), batch_size=10),
        outside_support=bdl.compile(half_normal, (x, y)),
        potential=bdl.compile(potential),
        sgld=bdl.kernels.get("sgld", step_size=1e-3),
        key=jax.random.key(0),
        raw_key=jax.random.PRNGKey(0),
    )


def _sample(e, target=None, kernel=None, **options):
    target = e.compiled if target is None else target
    kernel = e.sgld if kernel is None else kernel
    return bdl.sample(target, kernel, **{**RUN, **options})


def _w(value):
    return {"net": {"w": value}}


SAMPLE = [
    # seed: an integer in [0, 2**32); JAX keeps 32 bits, so others alias another seed
    case("seed float", lambda e: _sample(e, seed=1.5), TypeError, "seed must be an integer"),
    case("seed string", lambda e: _sample(e, seed="0"), TypeError, "got '0'"),
    case("seed bool", lambda e: _sample(e, seed=True), TypeError, "got True"),
    case("seed negative", lambda e: _sample(e, seed=-1), ValueError, "reduce to 4294967295"),
    case("seed 2**32", lambda e: _sample(e, seed=2**32), ValueError, "[0, 2**32)"),
    case("seed a typed key", lambda e: _sample(e, seed=e.key), TypeError, "not a JAX key"),
    case("seed a raw key", lambda e: _sample(e, seed=e.raw_key), TypeError, "not a JAX key"),
    # init: names, and positions against the model's structure and shapes
    case(
        "init an array for a dict position",
        lambda e: _sample(e, init=np.zeros(D, np.float32)),
        ValueError,
        "like the model's, {net/w: (5,)}; got an array of shape (5,)",
    ),
    case(
        "init of another structure",
        lambda e: _sample(e, init={"net": {"v": np.zeros(D, np.float32)}}),
        ValueError,
        "{net/w: (5,)}; got {net/v: (5,)}",
    ),
    case(
        "init leaf of another shape",
        lambda e: _sample(e, init=_w(np.zeros(4, np.float32))),
        ValueError,
        "init leaf net/w has shape (4,); the model's is (5,)",
    ),
    case(
        "init chain axis not num_chains",
        lambda e: _sample(e, init=_w(np.zeros((3, D), np.float32)), num_chains=2),
        ValueError,
        "(or (2, 5) with a leading chain axis)",
    ),
    case(
        "init with NaN",
        lambda e: _sample(e, init=_w(np.array([0, 0, np.nan, 0, 0], np.float32))),
        ValueError,
        "init leaf net/w has 1 NaN or infinite entry",
    ),
    case(
        "init of strings",
        lambda e: _sample(e, init=_w(np.array(["0"] * D))),
        TypeError,
        "init leaf net/w must be a numeric array",
    ),
    case(
        "init name misspelt",
        lambda e: _sample(e, init="netwrok"),
        ValueError,
        "init must be one of 'auto', 'network'",
    ),
    case("init name suggestion", lambda e: _sample(e, init="priors"), ValueError, "'prior'?"),
    case(
        "init network for fixed parameters",
        lambda e: _sample(e, init="network"),
        ValueError,
        "init='network' needs a network that initialises from a key",
    ),
    case(
        "init fixed outside the prior's support",
        lambda e: _sample(e, e.outside_support, init="fixed"),
        ValueError,
        "outside their prior's support",
    ),
    case(
        "potential init name",
        lambda e: _sample(e, e.potential, init="network"),
        ValueError,
        "init must be one of 'auto', 'fixed'",
    ),
    case(
        "potential init shape",
        lambda e: _sample(e, e.potential, init=np.zeros(3, np.float32)),
        ValueError,
        "init has shape (3,); the potential's is (2,)",
    ),
    # run lengths
    case(
        "num_steps float",
        lambda e: _sample(e, num_steps=10.0),
        TypeError,
        "num_steps must be an integer",
    ),
    case("num_steps zero", lambda e: _sample(e, num_steps=0), ValueError, "num_steps must be >= 1"),
    case(
        "burn_in equal to num_steps",
        lambda e: _sample(e, burn_in=10),
        ValueError,
        "burn_in (10) must be smaller than num_steps",
    ),
    case("burn_in negative", lambda e: _sample(e, burn_in=-1), ValueError, "burn_in must be >= 0"),
    case("thin zero", lambda e: _sample(e, thin=0), ValueError, "thin must be >= 1"),
    case("thin negative", lambda e: _sample(e, thin=-2), ValueError, "thin must be >= 1"),
    case(
        "thin beyond the run",
        lambda e: _sample(e, thin=20),
        ValueError,
        "nothing would be collected",
    ),
    case("num_chains zero", lambda e: _sample(e, num_chains=0), ValueError, "num_chains must be"),
    case("num_chains bool", lambda e: _sample(e, num_chains=True), TypeError, "num_chains must be"),
    # what is sampled, and how
    case(
        "an uncompiled model",
        lambda e: _sample(e, e.model),
        TypeError,
        "compiled target from bdl.compile",
    ),
    case("a kernel name", lambda e: _sample(e, kernel="sgld"), TypeError, "must be a bdl kernel"),
    case(
        "progress as text",
        lambda e: _sample(e, progress="yes"),
        TypeError,
        "progress must be True or False",
    ),
    case(
        "friction of another shape",
        lambda e: _sample(e, kernel=bdl.kernels.sghmc(1e-3, _w(np.ones(3, np.float32)))),
        ValueError,
        "friction {net/w: (3,)} does not fit the positions {net/w: (5,)}",
    ),
    case(
        "mass of another structure",
        lambda e: _sample(e, kernel=bdl.kernels.sghmc(1e-3, mass={"w": np.ones(D, np.float32)})),
        ValueError,
        "mass {w: (5,)} does not fit the positions",
    ),
    # devices and mesh: checked against this process's devices before anything compiles
    case(
        "devices zero", lambda e: _sample(e, devices=0), ValueError, "devices=0: this process has"
    ),
    case(
        "devices more than there are",
        lambda e: _sample(e, devices=len(jax.local_devices()) + 1),
        ValueError,
        f"give 1 to {len(jax.local_devices())}",
    ),
    case("devices a string", lambda e: _sample(e, devices="gpu"), TypeError, "devices must be"),
    case(
        "devices an empty list",
        lambda e: _sample(e, devices=[]),
        TypeError,
        "a non-empty list of jax devices",
    ),
    case(
        "devices and mesh",
        lambda e: _sample(e, devices=1, mesh=bdl.make_mesh()),
        ValueError,
        "give devices= or mesh=, not both",
    ),
    case("mesh not a Mesh", lambda e: _sample(e, mesh=4), TypeError, "mesh must be a jax"),
    case(
        "mesh with other axis names",
        lambda e: _sample(e, mesh=jax.make_mesh((1,), ("batch",))),
        ValueError,
        "bdl.sample uses axes named 'chain'",
    ),
]

VALIDATE = [
    # checked before NUTS runs (a NUTS run would compile)
    case(
        "validate thin zero",
        lambda e: bdl.validate(e.compiled, e.sgld, num_steps=10, thin=0),
        ValueError,
        "thin must be >= 1",
    ),
    case(
        "validate seed float",
        lambda e: bdl.validate(e.compiled, e.sgld, num_steps=10, seed=0.5),
        TypeError,
        "seed must be an integer",
    ),
    case(
        "validate kernel name",
        lambda e: bdl.validate(e.compiled, "sgld", num_steps=10),
        TypeError,
        "validate(kernel=...) must be a bdl kernel",
    ),
    case(
        "validate unknown NUTS option",
        lambda e: bdl.validate(e.compiled, e.sgld, num_steps=10, nuts={"warmup": 10}),
        ValueError,
        "unknown option 'warmup'. Did you mean 'num_warmup'?",
    ),
]


def _minimise(e, target=None, optimizer=None, position=None, key=None, num_steps=5):
    return minimise(
        e.compiled if target is None else target,
        optax.sgd(0.1) if optimizer is None else optimizer,
        e.compiled.initial_position if position is None else position,
        e.key if key is None else key,
        num_steps,
    )


MINIMISE = [
    case(
        "minimise an uncompiled model",
        lambda e: _minimise(e, target=e.model),
        TypeError,
        "minimise() needs a compiled target",
    ),
    case(
        "minimise optimiser name",
        lambda e: _minimise(e, optimizer="sgd"),
        TypeError,
        "must be an Optax optimiser",
    ),
    case("minimise integer key", lambda e: _minimise(e, key=0), TypeError, "must be one JAX key"),
    case(
        "minimise num_steps float",
        lambda e: _minimise(e, num_steps=1.5),
        TypeError,
        "minimise(num_steps=...) must be an integer",
    ),
    case(
        "minimise position of another structure",
        lambda e: _minimise(e, position={"w": np.zeros(D, np.float32)}),
        ValueError,
        "minimise(position=...) must be a position like the model's",
    ),
    case(
        "minimise position with a chain axis",
        lambda e: _minimise(e, position=_w(np.zeros((2, D), np.float32))),
        ValueError,
        "minimise(position=...) leaf net/w has shape (2, 5); the model's is (5,).",
    ),
]


@pytest.mark.parametrize(("call", "error", "fragment"), SAMPLE + VALIDATE + MINIMISE)
def test_bad_input(shared, call, error, fragment):
    check(call, error, fragment, shared)


def test_a_numpy_integer_seed_is_a_seed(shared):
    """``seed=np.int64(3)`` is accepted as the seed 3: the same draws as ``seed=3``."""
    a = _sample(shared, seed=np.int64(3), num_steps=4)
    b = _sample(shared, seed=3, num_steps=4)
    np.testing.assert_array_equal(a.positions["net"]["w"], b.positions["net"]["w"])

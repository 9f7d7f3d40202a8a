"""Bad input to ``bdl.sample``, ``bdl.validate``, ``bdl.optimise.minimise``, the predictions
(``compiled.predict``, ``predictive``, ``log_predictive``) and the evaluation
(``bdl.evaluation.RunningBMA``, ``bdl.sample(..., evaluate=...)``): each case raises
a clear error naming the argument, before anything is compiled (tests/bad_input.py); a start at
which the energy is not finite is refused before sampling, naming the rows or the prior; inputs
with NaN rows are predicted with a warning naming the rows."""

import re
import warnings
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import optax
import pytest
from bad_input import case, check

import bdl
from bdl.model_files import load_spec
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
    classifier = bdl.Model(_linear, bdl.Categorical(), params={"w": np.zeros((D, 3), np.float32)})
    return SimpleNamespace(
        model=model,
        compiled=bdl.compile(model, (x, y), batch_size=10),
        classifier=bdl.compile(classifier, (x, rng.integers(0, 3, size=N))),
        x=x,
        draws=_w(np.zeros((4, D), np.float32)),
        class_draws=_w(np.zeros((4, D, 3), np.float32)),
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


def _labels(last):
    """Labels 0, 1, 2, 0, … of the N inputs with the last one ``last``."""
    labels = (np.arange(N) % 3).astype(np.float64 if isinstance(last, float) else np.int64)
    labels[-1] = last
    return labels


def _targets(last):
    """Regression targets of the N inputs, the last one ``last``."""
    y = np.zeros(N, np.float32)
    y[-1] = last
    return y


def _nan_rows(x, *rows):
    x = x.copy()
    x[list(rows), 1] = np.nan
    return x


def _evaluate(e, target, x=None, y=None):
    x = e.x if x is None else x
    return _sample(e, target, evaluate=bdl.evaluation.RunningBMA(x, y), num_chains=2)


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


PREDICT = [
    # draws against the model's positions, inputs against its training inputs
    case(
        "predict a position without a draw axis",
        lambda e: e.compiled.predict(_w(np.zeros(D, np.float32)), e.x),
        ValueError,
        "positions need at least one leading draw axis",
    ),
    case(
        "predict draws of another model",
        lambda e: e.compiled.predict({"net": {"v": np.zeros((4, D), np.float32)}}, e.x),
        ValueError,
        "positions: the draws have parameters {net/v} but this model's are {net/w}: draws of "
        "another model?",
    ),
    case(
        "predict draws of another shape",
        lambda e: e.compiled.predict(_w(np.zeros((4, D + 1), np.float32)), e.x),
        ValueError,
        "positions leaf net/w has shape (4, 6); with the leading draw axes (4,) of the first leaf "
        "it must be (4, 5)",
    ),
    case(
        "predict no draws",
        lambda e: e.compiled.predict(_w(np.zeros((0, D), np.float32)), e.x),
        ValueError,
        "positions hold no draws",
    ),
    case(
        "predict draws of text",
        lambda e: e.compiled.predict(_w(np.full((4, D), "0")), e.x),
        TypeError,
        "positions leaf net/w must be a numeric array",
    ),
    case(
        "predict inputs of other features",
        lambda e: e.compiled.predict(e.draws, e.x[:, :4]),
        ValueError,
        "x has 4 features per row; the model was compiled with 5.",
    ),
    case(
        "predict one input without a batch axis",
        lambda e: e.compiled.predict(e.draws, e.x[0]),
        ValueError,
        "x is one example of shape (5,); give a batch with a leading axis, e.g. x[None].",
    ),
    case(
        "predictive inputs of other features",
        lambda e: e.compiled.predictive(e.draws, e.x[:, :2]),
        ValueError,
        "x has 2 features per row; the model was compiled with 5.",
    ),
    case(
        "predictive draws of another model",
        lambda e: e.compiled.predictive({"w": np.zeros((4, D), np.float32)}, e.x),
        ValueError,
        "the draws have parameters {w} but this model's are {net/w}",
    ),
    case(
        "log_predictive inputs of other features",
        lambda e: e.compiled.log_predictive(e.draws, e.x[:, :3], np.zeros(N, np.float32)),
        ValueError,
        "x has 3 features per row; the model was compiled with 5.",
    ),
    case(
        "log_predictive targets of another length",
        lambda e: e.compiled.log_predictive(e.draws, e.x, np.zeros(N - 1, np.float32)),
        ValueError,
        "y has shape (19,); it needs one target per row of x, shape (20,)",
    ),
    case(
        "log_predictive labels outside the classes",
        lambda e: e.classifier.log_predictive(
            _w(np.zeros((4, D, 3), np.float32)), e.x[:3], np.array([0, 3, 1])
        ),
        ValueError,
        "y holds label 3 but this model has 3 classes (labels 0, …, 2): fix the labels",
    ),
    case(
        "log_predictive a negative label",
        lambda e: e.classifier.log_predictive(e.class_draws, e.x, _labels(-1)),
        ValueError,
        "y holds label -1 but this model has 3 classes (labels 0, …, 2): map the labels to 0",
    ),
    case(
        "log_predictive a fractional label",
        lambda e: e.classifier.log_predictive(e.class_draws, e.x, _labels(1.5)),
        ValueError,
        "integer class labels; y has non-integer values (1.5)",
    ),
    case(
        "log_predictive a NaN label",
        lambda e: e.classifier.log_predictive(e.class_draws, e.x, _labels(np.nan)),
        ValueError,
        "y contains 1 NaN or infinite value(s), in row 19",
    ),
    case(
        "log_predictive a NaN target",
        lambda e: e.compiled.log_predictive(e.draws, e.x, _targets(np.nan)),
        ValueError,
        "y contains 1 NaN or infinite value(s), in row 19; drop those rows",
    ),
]

EVALUATE = [
    # RunningBMA's test data: what needs no model when it is made, the rest when bdl.sample
    # binds it to the model, before the run starts
    case(
        "evaluate a negative label",
        lambda e: _evaluate(e, e.classifier, y=_labels(-1)),
        ValueError,
        "RunningBMA(y=...) holds label -1 but this model has 3 classes (labels 0, …, 2): map "
        "the labels to 0, …, K−1",
    ),
    case(
        "evaluate a label beyond the classes",
        lambda e: _evaluate(e, e.classifier, y=_labels(3)),
        ValueError,
        "RunningBMA(y=...) holds label 3 but this model has 3 classes (labels 0, …, 2): fix "
        "the labels, or compile the model with a network of 4 outputs",
    ),
    case(
        "evaluate a fractional label",
        lambda e: _evaluate(e, e.classifier, y=_labels(1.5)),
        ValueError,
        "Categorical likelihood needs integer class labels; RunningBMA(y=...) has non-integer "
        "values (1.5)",
    ),
    case(
        "evaluate a NaN label",
        lambda e: _evaluate(e, e.classifier, y=_labels(np.nan)),
        ValueError,
        "RunningBMA(y=...) contains 1 NaN or infinite value(s), in row 19; drop those rows",
    ),
    case(
        "evaluate fewer labels than inputs",
        lambda e: _evaluate(e, e.classifier, y=_labels(0)[:-1]),
        ValueError,
        "RunningBMA(x, y): x has 20 inputs and y 19 targets; give the same number",
    ),
    case(
        "evaluate one-hot labels",
        lambda e: _evaluate(e, e.classifier, y=np.eye(3)[_labels(0).astype(int)]),
        ValueError,
        "RunningBMA(x, y): inputs (20, 5) and targets (20, 3) do not match the training data's",
    ),
    case(
        "evaluate labels of text",
        lambda e: _evaluate(e, e.classifier, y=np.array(["0"] * N)),
        TypeError,
        "RunningBMA(y=...) must be numeric",
    ),
    case(
        "evaluate inputs with NaN rows",
        lambda e: _evaluate(e, e.classifier, x=_nan_rows(e.x, 3, 11), y=_labels(0)),
        ValueError,
        "RunningBMA(x=...) has NaN or infinite entries in rows 3, 11 (2 of 20): the prediction "
        "of such a row is NaN, and so would every metric be",
    ),
    case(
        "evaluate a NaN regression target",
        lambda e: _evaluate(e, e.compiled, y=_targets(np.inf)),
        ValueError,
        "RunningBMA(y=...) contains 1 NaN or infinite value(s), in row 19",
    ),
    case(
        "evaluate bound directly, a label beyond the classes",
        lambda e: bdl.evaluation.RunningBMA(e.x, _labels(5)).bind(e.classifier, 2),
        ValueError,
        "RunningBMA(y=...) holds label 5 but this model has 3 classes",
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


@pytest.mark.parametrize(
    ("call", "error", "fragment"), SAMPLE + VALIDATE + MINIMISE + PREDICT + EVALUATE
)
def test_bad_input(shared, call, error, fragment):
    check(call, error, fragment, shared)


def test_evaluate_accepts_integral_float_labels_as_compile_does(shared):
    """Labels 0.0, 1.0, 2.0 are read as 0, 1, 2 (bdl.compile reads y_train so)."""
    labels = np.arange(N) % 3
    as_floats = bdl.evaluation.RunningBMA(shared.x, labels.astype(np.float32), batch_size=8)
    as_ints = bdl.evaluation.RunningBMA(shared.x, labels, batch_size=8)
    a, b = as_floats.bind(shared.classifier, 2), as_ints.bind(shared.classifier, 2)
    assert a.y.dtype == b.y.dtype == np.int32
    np.testing.assert_array_equal(a.y, b.y)
    assert a.fingerprint() == b.fingerprint()


@pytest.mark.parametrize(
    "call",
    [
        lambda e, x: e.compiled.predict(e.draws, x),
        lambda e, x: e.compiled.predictive(e.draws, x),
        lambda e, x: e.compiled.log_predictive(e.draws, x, _targets(0.0)),
    ],
    ids=["predict", "predictive", "log_predictive"],
)
@pytest.mark.parametrize("device", [False, True], ids=["numpy", "device"])
def test_predicting_on_nan_rows_warns_naming_them(shared, call, device):
    """A NaN input gives a NaN prediction: predicted, with a warning that names the rows and
    points at the caller's line; the other rows' predictions are those of the clean inputs."""
    x = _nan_rows(shared.x, 2, 7)
    x = jnp.asarray(x) if device else x
    with pytest.warns(RuntimeWarning) as caught:
        got = call(shared, x)
    message = str(caught[0].message)
    assert "x has NaN or infinite entries in rows 2, 7 (2 of 20)" in message, message
    assert "np.isfinite(x).all(axis=1)" in message, message
    assert caught[0].filename == __file__, caught[0].filename
    mean = np.asarray(got.mean if isinstance(got, tuple) else got)  # a predictive: its mean
    assert np.isnan(mean[[2, 7]]).all() and np.isfinite(np.delete(mean, [2, 7], 0)).all()
    with pytest.warns(RuntimeWarning, match="rows 2, 7"):  # again: NaN rows are not remembered
        call(shared, x)


def test_predicting_on_finite_inputs_does_not_warn(shared):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        shared.compiled.predict(shared.draws, shared.x)
        shared.compiled.predict(shared.draws, jnp.asarray(shared.x))
        shared.compiled.predictive(shared.draws, shared.x, quantiles=())


def test_a_numpy_integer_seed_is_a_seed(shared):
    """``seed=np.int64(3)`` is accepted as the seed 3: the same draws as ``seed=3``."""
    a = _sample(shared, seed=np.int64(3), num_steps=4)
    b = _sample(shared, seed=3, num_steps=4)
    np.testing.assert_array_equal(a.positions["net"]["w"], b.positions["net"]["w"])


# A start at which the full-data energy is not finite is refused before sampling, naming the
# rows or the prior: found by the start program (it compiles), probed term by term only then.


def _rows_model(network, likelihood=None):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(N, 2)).astype(np.float32)
    y = (x @ np.array([1.0, -1.0])).astype(np.float32)
    x[[7, 12], 0] = 10.0  # the inputs on which the networks below fail
    likelihood = bdl.Gaussian(0.5) if likelihood is None else likelihood
    model = bdl.Model(network, likelihood, params={"w": np.zeros(2, np.float32)})
    return x, y, model


@pytest.mark.parametrize("kernel", ["sgld", "adapted sghmc"])
@pytest.mark.parametrize("batch_size", [None, 8])
def test_a_start_where_the_network_returns_nan_names_the_rows(kernel, batch_size):
    """Without the check, every chain diverged at step 0 (adapted: step size NaN)."""
    x, y, model = _rows_model(lambda p, x: jnp.where(x[:, 0] > 5.0, jnp.nan, x @ p["w"]))
    target = bdl.compile(model, (x, y), batch_size=batch_size)
    k = bdl.kernels.sgld(1e-3) if kernel == "sgld" else bdl.kernels.get("sghmc")
    with pytest.raises(ValueError) as info:
        bdl.sample(target, k, num_steps=200, burn_in=150, num_chains=2, progress=False)
    message = str(info.value)
    assert message.startswith("chains 0, 1 cannot start"), message
    assert "the network returns NaN or ±inf for rows [7, 12] of x_train" in message, message


def test_a_default_start_whose_prior_draw_overflows_starts_from_the_declared_parameters():
    """A Poisson regression with a wide prior: some prior draws of w give exp(x·w) = inf, so
    the energy there is not finite. init="prior" is refused naming those chains; the default
    start gives them the declared parameters plus noise instead, and the run starts."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(N, 2)).astype(np.float32) * 30.0
    y = rng.poisson(1.0, size=N).astype(np.float32)
    model = bdl.Model(
        lambda p, x: x @ p["w"],
        bdl.Poisson(),
        prior=bdl.Normal(10.0),
        params={"w": np.zeros(2, np.float32)},
    )
    target = bdl.compile(model, (x, y))
    run = dict(num_steps=20, num_chains=8, seed=0, progress=False)
    with pytest.raises(ValueError, match="cannot start"):
        bdl.sample(target, bdl.kernels.sgld(1e-6), init="prior", **run)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bdl.ConvergenceWarning)
        samples = bdl.sample(target, bdl.kernels.sgld(1e-6), **run)
    assert not samples.diverged.any()


def test_a_default_start_whose_prior_draw_has_an_infinite_gradient_is_replaced():
    """bdl/models/poisson_glm.py, seed 0: one chain's prior draw has every rate exp(η) infinite.
    Compiled, its energy stays finite (XLA turns y·log(exp(η)) into y·η) but its gradient
    (y − exp(η))·x does not, and every warm-up step from there failed until the chain was
    marked diverged at step 40. The default start now checks the gradient too."""
    target = load_spec("poisson_glm").compile()
    run = dict(num_steps=260, burn_in=200, thin=10, num_chains=4, seed=0, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bdl.ConvergenceWarning)
        samples = bdl.sample(target, bdl.kernels.get("sghmc"), **run)
    assert not samples.diverged.any(), samples.divergence_report()
    assert np.all(np.isfinite(samples.adapted["step_size"]))


def test_a_start_where_the_gradient_is_not_finite_names_the_rows():
    """sqrt(|w₀ (x − 10)|) has a finite value but no finite derivative at x = 10: the start
    program checks the energy's value only (the backward pass would double its compilation),
    so a chain diverges on the first minibatch holding those rows — at its first step (refused:
    no draw kept) or later (a divergence) — and either report names them."""
    x, y, model = _rows_model(
        lambda p, x: jnp.sqrt(jnp.abs(p["w"][0] * (x[:, 0] - 10.0))) + x @ p["w"]
    )
    named = r"gradient of the log-likelihood is NaN or ±inf for rows \[7, 12\] of x_train"
    target = bdl.compile(model, (x, y), batch_size=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            bdl.sample(target, bdl.kernels.sgld(1e-3), num_steps=5)
        except ValueError as error:
            reports = [str(error)]
        else:
            reports = [str(w.message) for w in caught if w.category is bdl.DivergenceWarning]
    assert reports and re.search(named, reports[0]), reports


def test_targets_outside_a_support_known_only_per_row_are_named_at_the_start():
    """y ≤ trials_i is a support that depends on a data field: not checked by bdl.compile
    (it checks supports with fixed bounds), found at the start with the rows."""
    binomial = bdl.Likelihood.from_numpyro(dist.Binomial, parameter="logits", total_count="n")
    x, _, model = _rows_model(lambda p, x: x @ p["w"], binomial)
    trials = np.full(N, 4.0, np.float32)
    y = np.full(N, 2.0, np.float32)
    y[3] = 6.0  # more successes than trials
    target = bdl.compile(model, {"x": x, "y": y, "n": trials})
    with pytest.raises(ValueError, match=r"log-likelihood is −∞ or NaN for row \[3\] of y_train"):
        bdl.sample(target, bdl.kernels.sgld(1e-3), num_steps=5)


def test_a_start_where_the_prior_is_minus_infinity_names_the_prior(shared):
    """θ = 1e30: log N(θ; 0, 1) overflows to −∞ in float32 (and so does every row's
    log-likelihood), in chain 1 only."""
    init = _w(np.zeros((3, D), np.float32))
    init["net"]["w"][1, 0] = 1e30
    with pytest.raises(ValueError) as info:
        _sample(shared, num_chains=3, init=init)
    message = str(info.value)
    assert message.startswith("chain 1 cannot start"), message
    assert "the prior's log-density is -inf" in message, message
    assert "rows [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, …] (20 of 20) of y_train" in message, message


def test_a_potential_infinite_at_its_start_is_refused():
    potential = bdl.Potential(
        lambda t: jnp.where(t[0] > 0, -jnp.inf, -0.5 * jnp.sum(t**2)), init=np.ones(2, np.float32)
    )
    with pytest.raises(ValueError, match=r"Potential\(log_density=...\) gives the energy U = inf"):
        bdl.sample(bdl.compile(potential), bdl.kernels.sgld(1e-3), num_steps=5)

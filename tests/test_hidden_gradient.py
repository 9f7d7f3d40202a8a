"""``bdl.compile`` refuses a model whose network hides its gradient, and compiles legitimate ones.

A network whose output is rounded, cast to integers and back, or passed through
``jax.lax.stop_gradient`` has a likelihood whose autodiff gradient is zero: the chains would
sample the prior while the energy depends on the data. The check (docs/compiler.md, *The
gradient check*) compares the change of the energy along random directions, one confined to
each leaf, with what autodiff predicts; it must catch these and nothing legitimate: ReLU kinks,
smooth activations, float32 energies of 10⁶, hierarchical and constrained priors, Equinox
networks, shipped models, potentials."""

from __future__ import annotations

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest

import bdl
from bdl.data import digits, linear_regression
from bdl.model_files import load_spec

LINEAR = linear_regression(n=100, dim=5, noise_sd=0.5)
DIGITS = digits()
#: 300 digits: enough rows for the check (it reads at most a few hundred), quick to compile
SMALL_DIGITS = (DIGITS.x_train[:300], DIGITS.y_train[:300])
CAUSES = ("jnp.round", "jnp.floor", ".astype(jnp.int32)", "jax.lax.stop_gradient")


def _linear(network, params=None, likelihood=None, prior=None) -> bdl.Model:
    return bdl.Model(
        network=network,
        params={"w": jnp.zeros(5)} if params is None else params,
        likelihood=bdl.Gaussian(scale=0.5) if likelihood is None else likelihood,
        prior=bdl.Normal(1.0) if prior is None else prior,
    )


class MLP(nn.Module):
    """64-100-10; ``hide`` names where the gradient is hidden, if anywhere."""

    activation: str = "relu"
    hide: str = ""

    @nn.compact
    def __call__(self, x):
        h = nn.Dense(100)(x)
        if self.hide == "first layer":
            h = jax.lax.stop_gradient(h)
        h = getattr(nn, self.activation)(h)
        if self.hide == "rounded hidden units":
            h = jnp.round(h)
        out = nn.Dense(10)(h)
        return jax.lax.stop_gradient(out) if self.hide == "output" else out


def _refusal(model, data=None, **options) -> str:
    with pytest.raises(ValueError, match="does not see how it changes") as info:
        bdl.compile(model, data, **options)
    return str(info.value)


# ------------------------------------------------------------------------------ refused
@pytest.mark.parametrize(
    "network",
    [
        lambda p, x: jnp.round(x @ p["w"]),
        lambda p, x: jnp.floor(x @ p["w"]),
        lambda p, x: (x @ p["w"]).astype(jnp.int32).astype(jnp.float32),
        lambda p, x: jax.lax.stop_gradient(x @ p["w"]),
    ],
    ids=["round", "floor", "integer cast", "stop_gradient"],
)
def test_a_hidden_gradient_is_refused_with_the_leaf_the_causes_and_the_switch(network):
    message = _refusal(_linear(network), LINEAR)
    assert "net/w" in message and "log-likelihood" in message
    assert all(cause in message for cause in CAUSES)
    assert "check_gradient=False" in message


def test_an_integer_output_is_refused_before_anything_runs():
    with pytest.raises(TypeError, match="zero gradient"):
        bdl.compile(_linear(lambda p, x: (x @ p["w"]).astype(jnp.int32)), LINEAR)


def test_stop_gradient_on_the_output_names_every_leaf():
    message = _refusal(bdl.Model(MLP(hide="output"), bdl.Categorical()), SMALL_DIGITS)
    assert "every parameter" in message
    for leaf in ("Dense_0/kernel", "Dense_0/bias", "Dense_1/kernel", "Dense_1/bias"):
        assert f"net/{leaf}" in message


@pytest.mark.parametrize("hide", ["first layer", "rounded hidden units"])
def test_a_gradient_hidden_in_one_layer_names_that_layer_only(hide):
    message = _refusal(bdl.Model(MLP(hide=hide), bdl.Categorical()), SMALL_DIGITS)
    assert "net/Dense_0/kernel" in message and "net/Dense_0/bias" in message
    assert "Dense_1" not in message


def test_one_stopped_leaf_among_differentiable_ones_is_named():
    params = {"w": jnp.zeros(5), "v": jnp.zeros(5), "b": jnp.zeros(())}
    network = lambda p, x: x @ p["w"] + jax.lax.stop_gradient(x @ p["v"]) + p["b"]  # noqa: E731
    message = _refusal(_linear(network, params), LINEAR)
    assert "with net/v:" in message and "net/w" not in message


def test_a_gradient_hidden_in_an_energy_of_a_million_is_refused():
    x = np.asarray(LINEAR.x_train) * 1000
    model = _linear(
        lambda p, x: jnp.round(x @ p["w"]), {"w": jnp.full(5, 0.01)}, bdl.Gaussian(0.01)
    )
    _refusal(model, (x, LINEAR.y_train))


def test_a_potential_with_a_stopped_gradient_is_refused():
    potential = bdl.Potential(lambda t: -0.5 * jnp.sum(jax.lax.stop_gradient(t) ** 2), jnp.ones(3))
    message = _refusal(potential)
    assert "the energy" in message and "the position" in message


def test_the_switch_compiles_it_and_its_gradient_is_the_priors_alone():
    """What the check prevents: with it off, ∇U = −∇log p(θ) although U depends on the data."""
    compiled = bdl.compile(
        _linear(lambda p, x: jnp.round(x @ p["w"])), LINEAR, check_gradient=False
    )
    position = {"net": {"w": jnp.full(5, 0.7)}}
    _, grad = compiled.energy_and_grad(position)
    prior_grad = jax.grad(lambda p: -compiled.log_prior(p))(position)
    np.testing.assert_allclose(grad["net"]["w"], prior_grad["net"]["w"], rtol=1e-6)
    assert float(compiled.energy(position)) != pytest.approx(
        float(compiled.energy({"net": {"w": jnp.full(5, 0.0)}})), rel=1e-3
    )


@pytest.mark.parametrize("value", [0, "no", None])
def test_the_switch_must_be_a_bool(value):
    with pytest.raises(TypeError, match="check_gradient"):
        bdl.compile(_linear(lambda p, x: x @ p["w"]), LINEAR, check_gradient=value)


# ------------------------------------------------------------------------------ compiled
@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_flax_mlps_compile(activation):
    bdl.compile(bdl.Model(MLP(activation), bdl.Categorical()), SMALL_DIGITS, batch_size=32)


def test_plain_functions_with_kinks_compile():
    for network in (
        lambda p, x: x @ p["w"],  # every weight at 0: the scale falls back to 1
        lambda p, x: jnp.abs(x @ p["w"]),  # a kink at the start itself
        lambda p, x: jax.nn.relu(x @ p["w"]),
    ):
        bdl.compile(_linear(network, prior=bdl.Laplace(1.0)), LINEAR)


def test_an_equinox_network_compiles():
    class Net(eqx.Module):
        first: eqx.nn.Linear
        last: eqx.nn.Linear

        def __init__(self, key):
            k1, k2 = jax.random.split(key)
            self.first, self.last = eqx.nn.Linear(5, 32, key=k1), eqx.nn.Linear(32, 1, key=k2)

        def __call__(self, x):
            return self.last(jax.nn.relu(self.first(x)))

    y = np.asarray(LINEAR.y_train)[:, None]
    bdl.compile(bdl.Model(Net(jax.random.key(0)), bdl.Gaussian(0.5)), (LINEAR.x_train, y))


def test_a_float32_energy_of_a_million_compiles():
    x = np.asarray(LINEAR.x_train) * 1000
    compiled = bdl.compile(
        _linear(lambda p, x: x @ p["w"], {"w": jnp.full(5, 0.01)}, bdl.Gaussian(0.01)),
        (x, LINEAR.y_train),
    )
    assert float(compiled.energy(compiled.initial_position)) > 1e6


def test_constrained_and_hierarchical_priors_compile():
    prior = bdl.ByPath(
        {"theta": dist.Dirichlet(jnp.array([1.0, 2.0, 3.0])), "s": dist.HalfNormal(1.0)},
        default=bdl.HierarchicalNormal(precision=dist.Gamma(1.0, 1.0), name="precision"),
    )
    params = {"w": jnp.full(5, 0.1), "theta": jnp.array([0.2, 0.3, 0.5]), "s": jnp.ones(())}
    network = lambda p, x: p["s"] * (x @ p["w"]) + jnp.sum(p["theta"] * jnp.arange(3.0))  # noqa: E731
    bdl.compile(_linear(network, params, prior=prior), LINEAR)


@pytest.mark.parametrize("name", ["mlp_digits_hierarchical", "linear_unstandardised"])
def test_shipped_models_compile(name):
    load_spec(name).compile()


def test_legitimate_potentials_compile():
    for log_density, init in (
        (lambda t: -0.25 * jnp.sum(t["x"] ** 4), {"x": jnp.zeros(2)}),  # no slope at the start
        (lambda t: -jnp.sum(jnp.abs(t)), jnp.zeros(3)),  # a kink at the start
        (lambda t: -1e6 * jnp.sum((t - 3.0) ** 2), jnp.ones(3)),
    ):
        bdl.compile(bdl.Potential(log_density, init))


def test_the_check_runs_in_float64_too():
    with jax.enable_x64(True):
        bdl.compile(_linear(lambda p, x: jnp.tanh(x @ p["w"])), LINEAR)
        _refusal(_linear(lambda p, x: jnp.round(x @ p["w"])), LINEAR)

"""``bdl.Likelihood.from_numpyro``: any NumPyro distribution as a likelihood, scored against the
distribution's own ``log_prob``; learned parameters enter the compiled energy with their prior
and log-Jacobian."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from numpyro.distributions.transforms import biject_to

import bdl

RTOL, ATOL = 1e-5, 1e-5


@pytest.fixture
def rng():
    return np.random.default_rng(1)


def test_negative_binomial_mean_link_and_learned_concentration(rng):
    """NB2(y; μ = exp f, φ): the network feeds the first parameter through the link."""
    lik = bdl.Likelihood.from_numpyro(
        dist.NegativeBinomial2, link=jnp.exp, concentration=dist.Exponential(0.5)
    )
    f = rng.normal(size=(8, 1)).astype(np.float32)
    y = rng.poisson(3.0, size=8).astype(np.float32)
    got = jax.jit(lik.log_prob)(jnp.asarray(f), jnp.asarray(y), {"concentration": 2.5})
    want = dist.NegativeBinomial2(jnp.exp(f[:, 0]), 2.5).log_prob(y)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    assert lik.task == "regression"
    assert set(lik.param_priors) == {"concentration"}
    np.testing.assert_allclose(lik.param_init["concentration"], 1.0)
    np.testing.assert_allclose(lik.mean(jnp.asarray(f), {"concentration": 2.5}), np.exp(f[:, 0]))


def test_beta_with_a_second_network_output(rng):
    """Beta(y; a = softplus(f₀), b = softplus(f₁)): outputs= feeds the second parameter from
    column 1 of a two-column network output."""
    lik = bdl.Likelihood.from_numpyro(
        dist.Beta, link=jax.nn.softplus, outputs={"concentration0": jax.nn.softplus}
    )
    f = rng.normal(size=(7, 2)).astype(np.float32)
    y = rng.uniform(0.05, 0.95, size=7).astype(np.float32)
    got = lik.log_prob(jnp.asarray(f), jnp.asarray(y))
    want = dist.Beta(jax.nn.softplus(f[:, 0]), jax.nn.softplus(f[:, 1])).log_prob(y)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_gamma_with_a_fixed_rate(rng):
    lik = bdl.Likelihood.from_numpyro(dist.Gamma, link=jnp.exp, rate=2.0)
    f = rng.normal(size=(6,)).astype(np.float32)
    y = rng.gamma(2.0, size=6).astype(np.float32)
    got = lik.log_prob(jnp.asarray(f), jnp.asarray(y))
    np.testing.assert_allclose(got, dist.Gamma(jnp.exp(f), 2.0).log_prob(y), rtol=RTOL, atol=ATOL)


def test_ordered_logistic_is_a_classifier_with_class_probabilities(rng):
    cut = np.array([-1.0, 0.0, 1.5], np.float32)
    lik = bdl.Likelihood.from_numpyro(dist.OrderedLogistic, cutpoints=cut)
    f = rng.normal(size=(9, 1)).astype(np.float32)
    y = rng.integers(0, 4, size=9)
    got = lik.log_prob(jnp.asarray(f), jnp.asarray(y))
    d = dist.OrderedLogistic(jnp.asarray(f[:, 0]), jnp.asarray(cut))
    np.testing.assert_allclose(got, d.log_prob(y), rtol=RTOL, atol=ATOL)
    assert lik.task == "classification"
    np.testing.assert_allclose(lik.mean(jnp.asarray(f)), d.probs, rtol=RTOL, atol=ATOL)


def test_categorical_through_its_logits_parameter(rng):
    lik = bdl.Likelihood.from_numpyro(dist.Categorical, parameter="logits")
    f = rng.normal(size=(5, 3)).astype(np.float32)
    y = rng.integers(0, 3, size=5)
    np.testing.assert_allclose(
        lik.log_prob(jnp.asarray(f), jnp.asarray(y)),
        dist.Categorical(logits=f).log_prob(y),
        rtol=RTOL,
        atol=ATOL,
    )
    np.testing.assert_allclose(lik.mean(jnp.asarray(f)), jax.nn.softmax(f), rtol=RTOL)


def test_binomial_total_count_from_a_data_field(rng):
    """A parameter given as a string is a per-example data field."""
    lik = bdl.Likelihood.from_numpyro(dist.BinomialLogits, total_count="trials")
    assert lik.fields == ("trials",)
    f = rng.normal(size=(6, 1)).astype(np.float32)
    trials = rng.integers(1, 10, size=6).astype(np.float32)
    y = np.floor(trials / 2).astype(np.float32)
    got = lik.log_prob(jnp.asarray(f), jnp.asarray(y), {"trials": trials})
    want = dist.BinomialLogits(f[:, 0], trials).log_prob(y)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_compiled_energy_includes_the_learned_parameters_prior_and_jacobian(rng):
    """U = −Σ_i log NB2(y_i; exp(x_i w), φ) − log p(w) − log p(φ) − log |dφ/du|, φ = exp(u)."""
    x = rng.normal(size=(20, 2)).astype(np.float32)
    y = rng.poisson(2.0, size=20).astype(np.float32)
    prior = dist.Exponential(0.5)
    model = bdl.Model(
        network=lambda p, x: x @ p["w"],
        params={"w": jnp.zeros((2, 1))},
        likelihood=bdl.Likelihood.from_numpyro(
            dist.NegativeBinomial2, link=jnp.exp, concentration=prior
        ),
    )
    compiled = bdl.compile(model, (x, y))
    w = np.array([[0.2], [-0.4]], np.float32)
    u = np.float32(0.7)
    position = {"net": {"w": jnp.asarray(w)}, "lik": {"concentration": jnp.asarray(u)}}
    phi = np.exp(u)
    want = -(
        dist.NegativeBinomial2(jnp.exp(x @ w)[:, 0], phi).log_prob(y).sum()
        + dist.Normal(0.0, 1.0).log_prob(w).sum()
        + prior.log_prob(phi)
        + u
    )
    np.testing.assert_allclose(compiled.energy(position), want, rtol=1e-5)
    _, lik = compiled.constrain(compiled.initial_position)
    np.testing.assert_allclose(lik["concentration"], 1.0, rtol=1e-6)


def test_ordered_logistic_learned_cutpoints_start_ordered(rng):
    prior = dist.TransformedDistribution(
        dist.Normal(jnp.zeros(3), 3.0).to_event(1), dist.transforms.OrderedTransform()
    )
    lik = bdl.Likelihood.from_numpyro(dist.OrderedLogistic, cutpoints=prior)
    init = lik.param_init["cutpoints"]
    assert init.shape == (3,) and np.all(np.diff(init) > 0)
    x = rng.normal(size=(30, 2)).astype(np.float32)
    y = rng.integers(0, 4, size=30)
    model = bdl.Model(
        network=lambda p, x: x @ p["w"], params={"w": jnp.zeros((2, 1))}, likelihood=lik
    )
    compiled = bdl.compile(model, (x, y))
    assert compiled.num_classes == 4
    position = compiled.initial_position
    u = position["lik"]["cutpoints"]
    t = biject_to(prior.support)
    c = t(u)
    want = -(
        dist.OrderedLogistic(jnp.zeros(30), c).log_prob(y).sum()
        + dist.Normal(0.0, 1.0).log_prob(jnp.zeros(2)).sum()
        + prior.log_prob(c)
        + t.log_abs_det_jacobian(u, c)
    )
    np.testing.assert_allclose(compiled.energy(position), want, rtol=1e-5)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: bdl.Likelihood.from_numpyro(dist.Gamma, rates=1.0), ValueError, "rates="),
        (lambda: bdl.Likelihood.from_numpyro(dist.Gamma, link=3.0), TypeError, "link="),
        (
            lambda: bdl.Likelihood.from_numpyro(dist.Gamma, parameter="rate", rate=1.0),
            ValueError,
            "twice",
        ),
        (
            lambda: bdl.Likelihood.from_numpyro(dist.Normal, scale=[1, "a"]),
            TypeError,
            "number or array",
        ),
        (lambda: bdl.Likelihood.from_numpyro("Normal"), TypeError, "distribution class"),
        (lambda: bdl.Likelihood.from_numpyro(dist.Normal, task="ranking"), ValueError, "task="),
        (
            lambda: bdl.Likelihood.from_numpyro(dist.Normal, parameter="mu"),
            ValueError,
            "parameter='mu'",
        ),
    ],
)
def test_bad_declarations_raise(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_wrong_number_of_output_columns_named_at_compile():
    lik = bdl.Likelihood.from_numpyro(dist.Beta, outputs={"concentration0": jax.nn.softplus})
    model = bdl.Model(
        network=lambda p, x: x @ p["w"], params={"w": jnp.zeros((2, 1))}, likelihood=lik
    )
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        bdl.compile(model, (np.zeros((4, 2)), np.full(4, 0.5)))


def test_unbroadcastable_parameters_named_at_compile():
    lik = bdl.Likelihood.from_numpyro(dist.Normal, scale=np.ones(3))
    model = bdl.Model(
        network=lambda p, x: x @ p["w"], params={"w": jnp.zeros((2, 1))}, likelihood=lik
    )
    with pytest.raises(ValueError, match="cannot score network outputs"):
        bdl.compile(model, (np.zeros((4, 2)), np.zeros(4)))


def test_negbin_regression_model_file():
    """bdl/models/negbin_regression.py: overdispersed counts, the energy is the NB2 GLM's with the
    concentration's prior and log-Jacobian."""
    from bdl.model_files import load_spec

    spec = load_spec("negbin_regression", n=120)
    y = np.asarray(spec.data.y_train)
    assert y.var() > 2 * y.mean()  # far from Poisson
    compiled = spec.compile()
    x = np.asarray(compiled.x_train)
    b0, b, u = 0.8, np.array([0.4, -0.2, 0.1], np.float32), np.float32(1.2)
    position = {
        "net": {"b0": jnp.asarray(b0), "b": jnp.asarray(b)},
        "lik": {"concentration": jnp.asarray(u)},
    }
    phi = np.exp(u)
    want = -(
        dist.NegativeBinomial2(jnp.exp(b0 + x @ b), phi).log_prob(y).sum()
        + dist.Normal(0.0, 2.0).log_prob(jnp.concatenate([jnp.asarray([b0]), b])).sum()
        + dist.Exponential(0.1).log_prob(phi)
        + u
    )
    np.testing.assert_allclose(compiled.energy(position), want, rtol=1e-5)

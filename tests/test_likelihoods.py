"""Likelihoods: per-example log-densities against SciPy, predictive means, learned noise scales."""

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

import bdl

RTOL, ATOL = 1e-5, 1e-5  # float32 log-densities of size O(1-10)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def test_gaussian_log_prob_matches_scipy(rng):
    """Gaussian(scale=σ): log p(y|f) = log N(y; f, σ²) per example."""
    f = rng.normal(size=(7,)).astype(np.float32)
    y = rng.normal(size=(7,)).astype(np.float32)
    got = jax.jit(bdl.Gaussian(scale=0.7).log_prob)(jnp.asarray(f), jnp.asarray(y))
    assert got.shape == (7,)
    np.testing.assert_allclose(got, stats.norm.logpdf(y, f, 0.7), rtol=RTOL, atol=ATOL)


def test_gaussian_squeezes_singleton_output_axis(rng):
    """An (n, 1) network output against (n,) targets is scored per example, not broadcast (n, n)."""
    f = rng.normal(size=(6, 1)).astype(np.float32)
    y = rng.normal(size=(6,)).astype(np.float32)
    got = jax.jit(bdl.Gaussian(scale=0.5).log_prob)(jnp.asarray(f), jnp.asarray(y))
    assert got.shape == (6,)
    np.testing.assert_allclose(got, stats.norm.logpdf(y, f[:, 0], 0.5), rtol=RTOL, atol=ATOL)


def test_gaussian_multi_output_sums_over_target_entries(rng):
    """With (n, d) targets the per-example log-likelihood sums the d independent entries."""
    f = rng.normal(size=(5, 3)).astype(np.float32)
    y = rng.normal(size=(5, 3)).astype(np.float32)
    got = jax.jit(bdl.Gaussian(scale=1.3).log_prob)(jnp.asarray(f), jnp.asarray(y))
    assert got.shape == (5,)
    np.testing.assert_allclose(got, stats.norm.logpdf(y, f, 1.3).sum(-1), rtol=RTOL, atol=ATOL)


def test_gaussian_learned_scale_log_prob_uses_params(rng):
    """Gaussian(scale=None) reads σ from params['scale']."""
    f = rng.normal(size=(6, 1)).astype(np.float32)
    y = rng.normal(size=(6,)).astype(np.float32)
    log_prob = jax.jit(bdl.Gaussian(scale=None).log_prob)
    got = log_prob(jnp.asarray(f), jnp.asarray(y), {"scale": jnp.asarray(0.3)})
    np.testing.assert_allclose(got, stats.norm.logpdf(y, f[:, 0], 0.3), rtol=RTOL, atol=ATOL)


def test_bernoulli_log_prob_matches_scipy(rng):
    """Bernoulli: log p(y|f) = log Bernoulli(y; sigmoid(f)), with (n, 1) logits squeezed."""
    f = rng.normal(size=(8, 1)).astype(np.float32) * 2
    y = rng.integers(0, 2, size=8)
    got = jax.jit(bdl.Bernoulli().log_prob)(jnp.asarray(f), jnp.asarray(y))
    assert got.shape == (8,)
    want = stats.bernoulli.logpmf(y, special.expit(f[:, 0].astype(np.float64)))
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_poisson_log_prob_matches_scipy(rng):
    """Poisson: log p(k|f) = log Poisson(k; exp(f)) (the network outputs the log-rate)."""
    f = rng.normal(size=(9,)).astype(np.float32)
    k = rng.poisson(2.0, size=9).astype(np.float32)
    got = jax.jit(bdl.Poisson().log_prob)(jnp.asarray(f), jnp.asarray(k))
    np.testing.assert_allclose(
        got, stats.poisson.logpmf(k, np.exp(f.astype(np.float64))), rtol=RTOL, atol=ATOL
    )


def test_student_t_log_prob_matches_scipy(rng):
    """StudentT(df, scale): log p(y|f) = log t_df((y − f)/σ) − log σ."""
    f = rng.normal(size=(7, 1)).astype(np.float32)
    y = (rng.standard_t(3, size=7)).astype(np.float32)
    got = jax.jit(bdl.StudentT(df=3.0, scale=0.4).log_prob)(jnp.asarray(f), jnp.asarray(y))
    np.testing.assert_allclose(
        got, stats.t.logpdf(y, 3.0, loc=f[:, 0], scale=0.4), rtol=RTOL, atol=ATOL
    )


def test_categorical_log_prob_is_log_softmax(rng):
    """Categorical: log p(y=k|f) = log softmax(f)_k."""
    f = rng.normal(size=(6, 4)).astype(np.float32) * 3
    y = rng.integers(0, 4, size=6)
    got = jax.jit(bdl.Categorical().log_prob)(jnp.asarray(f), jnp.asarray(y))
    want = np.log(special.softmax(f.astype(np.float64), axis=-1))[np.arange(6), y]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_categorical_mean_is_softmax(rng):
    """Categorical.mean gives the class probabilities softmax(f), rows summing to one."""
    f = rng.normal(size=(5, 3)).astype(np.float32)
    got = jax.jit(bdl.Categorical().mean)(jnp.asarray(f))
    np.testing.assert_allclose(got, special.softmax(f, axis=-1), rtol=1e-5, atol=1e-6)


def test_bernoulli_mean_is_two_class_probabilities(rng):
    """Bernoulli.mean gives [1 − p, p] with p = sigmoid(f), for (n,) and (n, 1) logits."""
    f = rng.normal(size=(5,)).astype(np.float32)
    p = special.expit(f)
    want = np.stack([1 - p, p], axis=-1)
    for logits in (f, f[:, None]):
        got = jax.jit(bdl.Bernoulli().mean)(jnp.asarray(logits))
        assert got.shape == (5, 2)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_regression_means(rng):
    """Gaussian/StudentT mean is f; Poisson mean is exp(f)."""
    f = rng.normal(size=(4,)).astype(np.float32)
    np.testing.assert_allclose(jax.jit(bdl.Gaussian(0.3).mean)(jnp.asarray(f)), f, rtol=1e-6)
    np.testing.assert_allclose(jax.jit(bdl.StudentT(5.0).mean)(jnp.asarray(f)), f, rtol=1e-6)
    np.testing.assert_allclose(jax.jit(bdl.Poisson().mean)(jnp.asarray(f)), np.exp(f), rtol=1e-5)


@pytest.fixture(scope="module")
def learned():
    """A compiled Dense(1) regression with a learned Gaussian σ, and its data."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(10, 2)).astype(np.float32)
    y = rng.normal(size=(10,)).astype(np.float32)
    model = bdl.Model(nn.Dense(1), bdl.Gaussian(scale=None), prior=bdl.Normal(1.0))
    return bdl.compile(model, (x, y), batch_size=5), x, y


def test_learned_scale_is_unconstrained_log_space_in_position(learned):
    """A learned σ lives at position['lik']['scale'] as u = log σ (init σ = 1 → u = 0)."""
    compiled, _, _ = learned
    u = compiled.initial_position["lik"]["scale"]
    assert jnp.shape(u) == ()
    np.testing.assert_allclose(u, 0.0, atol=1e-7)
    position = jax.tree.map(lambda a: a, compiled.initial_position)
    position["lik"]["scale"] = jnp.asarray(-1.2)
    _, lik = eqx.filter_jit(compiled.constrain)(position)
    np.testing.assert_allclose(lik["scale"], np.exp(-1.2), rtol=1e-6)


def test_learned_scale_log_prior_includes_log_jacobian(learned):
    """log_prior = Σ log N(w; 0, 1) + log HalfNormal(e^u; 1) + u (Jacobian of σ = e^u)."""
    compiled, _, _ = learned
    position = jax.tree.map(lambda a: a, compiled.initial_position)
    u = -0.8
    position["lik"]["scale"] = jnp.asarray(u, jnp.float32)
    weights = np.concatenate([np.ravel(w) for w in jax.tree.leaves(position["net"])])
    want = stats.norm.logpdf(weights).sum() + stats.halfnorm.logpdf(np.exp(u)) + u
    np.testing.assert_allclose(eqx.filter_jit(compiled.log_prior)(position), want, rtol=1e-5)


def test_learned_scale_enters_the_energy(learned):
    """With a learned σ = e^u the energy is U = −Σ log N(y; f, e^{2u}) − log p."""
    compiled, x, y = learned
    position = jax.tree.map(lambda a: a, compiled.initial_position)
    position["lik"]["scale"] = jnp.asarray(0.4, jnp.float32)
    f = np.asarray(eqx.filter_jit(compiled.forward)(position, jnp.asarray(x)))[:, 0]
    log_prior = float(eqx.filter_jit(compiled.log_prior)(position))
    want = -stats.norm.logpdf(y, f, np.exp(0.4)).sum() - log_prior
    np.testing.assert_allclose(eqx.filter_jit(compiled.energy)(position), want, rtol=1e-5)

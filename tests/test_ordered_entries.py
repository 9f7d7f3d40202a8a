"""``bdl.Ordered`` with one density per entry: Stan's ``ordered[2] mu; mu[1] ~ normal(a, 1);
mu[2] ~ normal(b, 1);`` — the base's log-density at the ordered values plus the ordered
transform's log-Jacobian, for ordered and positive-ordered vectors, as a network weight's prior
and as a learned likelihood parameter's; its draws; the order NumPyro composes the
positive-ordered bijector in."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from numpyro.distributions import constraints
from numpyro.distributions.transforms import biject_to
from scipy import stats
from stat_utils import mean_and_mcse, z_threshold

import bdl
from bdl.compile.fingerprint import describe

A, B = -0.5, 1.0

BASES = {
    "batched base": lambda: bdl.Ordered(dist.Normal(jnp.array([A, B]), 1.0)),
    "list of bases": lambda: bdl.Ordered([dist.Normal(A, 1.0), dist.Normal(B, 1.0)]),
    "vector base": lambda: bdl.Ordered(dist.Normal(jnp.array([A, B]), 1.0).to_event(1)),
}


def _stan_ordered(u: np.ndarray) -> float:
    """Stan: x₁ = u₁, x₂ = x₁ + e^{u₂}, target = normal_lpdf(x₁ | a, 1) + normal_lpdf(x₂ | b, 1)
    + u₂ (the log-Jacobian)."""
    x1 = u[0]
    x2 = x1 + math.exp(u[1])
    return stats.norm.logpdf(x1, A, 1.0) + stats.norm.logpdf(x2, B, 1.0) + u[1]


def _stan_positive_ordered(u: np.ndarray, shapes: np.ndarray) -> float:
    """NumPyro's (and Stan's) positive-ordered transform: ordered, then exp — y₁ = u₁,
    y₂ = y₁ + e^{u₂}, x = e^y, log|J| = u₂ + y₁ + y₂; target Σ_k gamma_lpdf(x_k | s_k, 1)."""
    y1 = u[0]
    y2 = y1 + math.exp(u[1])
    x = np.exp([y1, y2])
    return float(stats.gamma.logpdf(x, shapes).sum()) + u[1] + y1 + y2


def _weight_model(prior: dist.Distribution) -> bdl.CompiledModel:
    x = np.ones((6, 1), np.float32)
    model = bdl.Model(
        lambda p, x: x @ p["w"] + 0.0 * jnp.sum(p["mu"]),
        bdl.Gaussian(1.0),
        prior=bdl.ByPath({"mu": prior}, default=bdl.Normal(1.0)),
        params={"w": jnp.zeros(1), "mu": jnp.array([0.5, 2.0])},
    )
    return bdl.compile(model, (x, np.zeros(6, np.float32)), check_gradient=False)


@pytest.mark.parametrize("form", list(BASES))
def test_per_entry_prior_energy_is_stans_target(form):
    compiled = _weight_model(BASES[form]())
    for u in np.random.default_rng(0).normal(size=(3, 2)):
        position = {"net": {"w": jnp.zeros(1), "mu": jnp.asarray(u, jnp.float32)}}
        got = float(compiled.log_prior(position)) - float(stats.norm.logpdf(0.0))
        assert got == pytest.approx(_stan_ordered(u), rel=1e-5)
    net, _ = compiled.constrain(compiled.initial_position)
    np.testing.assert_allclose(net["mu"], [0.5, 2.0], rtol=1e-6)


def test_per_entry_positive_ordered_energy_is_stans_target():
    """Per-entry Gamma densities on (0, ∞): the positive-ordered bijector."""
    shapes = np.array([2.0, 5.0])
    prior = bdl.Ordered(dist.Gamma(jnp.asarray(shapes), 1.0))
    assert prior.support is constraints.positive_ordered_vector
    compiled = _weight_model(prior)
    for u in np.random.default_rng(1).normal(size=(3, 2)):
        position = {"net": {"w": jnp.zeros(1), "mu": jnp.asarray(u, jnp.float32)}}
        got = float(compiled.log_prior(position)) - float(stats.norm.logpdf(0.0))
        assert got == pytest.approx(_stan_positive_ordered(u, shapes), rel=1e-5)


def test_positive_ordered_bijector_is_ordered_then_exp():
    """NumPyro's biject_to(positive_ordered_vector) is ComposeTransform([OrderedTransform(),
    ExpTransform()]): exp applied to an ordered vector, not an ordered map of exp(u)."""
    u = jnp.array([0.3, -0.4, 0.2])
    y = jnp.cumsum(jnp.concatenate([u[:1], jnp.exp(u[1:])]))
    np.testing.assert_allclose(
        biject_to(constraints.positive_ordered_vector)(u), jnp.exp(y), rtol=1e-6
    )


def test_per_entry_learned_likelihood_parameter():
    """Without a network: mixture locations with one prior per component, U as Stan's."""
    y = np.array([-1.0, -0.8, 1.2, 1.5, 0.9], np.float32)
    mixture = bdl.Likelihood.from_numpyro(
        dist.MixtureSameFamily,
        component=dist.Normal,
        weights=jnp.array([0.5, 0.5]),
        loc=bdl.Ordered(dist.Normal(jnp.array([A, B]), 1.0)),
        scale=jnp.array([0.7, 0.7]),
    )
    compiled = bdl.compile(bdl.Model(likelihood=mixture), y)
    u = np.array([0.2, -0.3])
    x = np.array([u[0], u[0] + math.exp(u[1])])
    lik = np.log(0.5 * stats.norm.pdf(y[:, None], x, 0.7).sum(-1)).sum()
    position = {"net": {}, "lik": {"loc": jnp.asarray(u, jnp.float32)}}
    assert -float(compiled.energy(position)) == pytest.approx(lik + _stan_ordered(u), rel=1e-5)


def test_per_entry_draws_are_the_conditioned_independent_entries():
    """X₁ ~ N(a, 1), X₂ ~ N(b, 1) independent, conditioned on X₁ < X₂: with D = X₂ − X₁ ~
    N(δ, 2), δ = b − a, and S = X₁ + X₂ independent of D, E[X₂ − X₁] = δ + √2 φ(δ/√2)/Φ(δ/√2)
    and E[X₁ + X₂] = a + b."""
    draws = np.asarray(BASES["list of bases"]().sample(jax.random.key(0), (20_000,)), np.float64)
    assert np.all(draws[:, 0] < draws[:, 1])
    delta, r = B - A, math.sqrt(2.0)
    gap = delta + r * stats.norm.pdf(delta / r) / stats.norm.cdf(delta / r)
    threshold = z_threshold(2)
    for series, want in ((draws[:, 1] - draws[:, 0], gap), (draws.sum(-1), A + B)):
        m, se, _ = mean_and_mcse(series[None])
        assert abs(m - want) / se < threshold


def test_iid_form_keeps_the_order_statistics():
    d = bdl.Ordered(dist.Normal(0.0, 1.0), 2)
    x = jnp.array([-0.3, 0.4])
    assert d.iid and not bdl.Ordered(dist.Normal(jnp.zeros(2), 1.0)).iid
    want = math.log(2) + stats.norm.logpdf([-0.3, 0.4]).sum()
    assert float(d.log_prob(x)) == pytest.approx(want, rel=1e-6)
    # the same densities per entry: the product, without the normaliser K! of iid entries
    per_entry = bdl.Ordered(dist.Normal(jnp.zeros(2), 1.0)).log_prob(x)
    assert float(d.log_prob(x) - per_entry) == pytest.approx(math.log(2), rel=1e-6)


def test_batched_per_entry_prior():
    """Batch axes before the entries: m ordered vectors, each with its own per-entry prior."""
    loc = jnp.array([[-1.0, 1.0], [0.0, 3.0], [2.0, 2.5]])
    d = bdl.Ordered(dist.Normal(loc, 1.0))
    assert d.batch_shape == (3,) and d.event_shape == (2,)
    x = jnp.array([[-1.0, 0.0], [0.5, 1.0], [1.0, 3.0]])
    np.testing.assert_allclose(d.log_prob(x), stats.norm.logpdf(x, loc).sum(-1), rtol=1e-6)
    draws = d.sample(jax.random.key(0), (5,))
    assert draws.shape == (5, 3, 2) and bool(jnp.all(draws[..., 0] < draws[..., 1]))


@pytest.mark.parametrize(
    "bad, fragment",
    [
        (lambda: bdl.Ordered(dist.Normal(jnp.zeros(2), 1.0), 2), "reads two ways"),
        (lambda: bdl.Ordered(dist.Normal(0.0, 1.0)), "give the length"),
        (lambda: bdl.Ordered([dist.Normal(0.0, 1.0), dist.Gamma(2.0, 1.0)]), "share one support"),
        (lambda: bdl.Ordered([dist.Normal(0.0, 1.0)] * 2, 3), "leave size out or give 2"),
        (lambda: bdl.Ordered([dist.Normal(0.0, 1.0), 1.0]), r"base\[1\]\) must be a NumPyro"),
        (lambda: bdl.Ordered([]), "one distribution per entry"),
    ],
)
def test_per_entry_bad_input(bad, fragment):
    with pytest.raises((ValueError, TypeError), match=fragment):
        bad()


def test_fingerprint_declarations_tell_ordered_priors_apart():
    """A checkpoint's declarations describe an ordered prior by its base, not by its class
    alone (bdl.Ordered has no NumPyro parameters of its own)."""
    texts = {
        describe(bdl.Ordered(dist.Normal(0.0, 2.0), 2)),
        describe(bdl.Ordered(dist.Normal(0.0, 3.0), 2)),
        describe(BASES["batched base"]()),
        describe(BASES["list of bases"]()),
    }
    assert len(texts) == 4

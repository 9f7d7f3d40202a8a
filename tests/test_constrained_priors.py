"""Priors by value on any support ``biject_to`` reaches, ``bdl.Ordered``, and mixtures.

The energy of a compiled model equals NumPyro's ``potential_energy`` of the same model written
in NumPyro, at random unconstrained positions, for every support: real, positive, interval,
lower- and upper-bounded, simplex, ordered, positive-ordered and correlation-Cholesky, and their
batched forms; both as a network weight's prior and as a learned likelihood parameter's.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer.util import potential_energy
from scipy import stats
from stat_utils import mean_and_mcse, z_threshold

import bdl

X = np.random.default_rng(0).normal(size=(12, 2)).astype(np.float32)
Y = (X @ np.array([0.5, -0.25]) + 0.3 * np.random.default_rng(1).normal(size=12)).astype(np.float32)

PRIORS = {
    "real": lambda: dist.Normal(0.5, 2.0),
    "positive": lambda: dist.HalfNormal(1.5),
    "interval (0, 1)": lambda: dist.Beta(2.0, 3.0),
    "interval (-1, 2)": lambda: dist.Uniform(-1.0, 2.0),
    "lower bounded": lambda: dist.TruncatedNormal(0.0, 1.0, low=0.5),
    "upper bounded": lambda: dist.TruncatedNormal(0.0, 1.0, high=0.5),
    "positive vector": lambda: dist.HalfNormal(1.0).expand([4]),
    "simplex": lambda: dist.Dirichlet(jnp.array([1.0, 2.0, 3.0])),
    "batched simplex": lambda: dist.Dirichlet(jnp.ones((2, 3))),
    "ordered": lambda: bdl.Ordered(dist.Normal(0.0, 2.0), 3),
    "batched ordered": lambda: bdl.Ordered(dist.Normal(0.0, 1.0), 3).expand([2]),
    "positive ordered": lambda: bdl.Ordered(dist.Gamma(2.0, 1.0), 3),
    "ordered cut-points": lambda: dist.TransformedDistribution(
        dist.Normal(jnp.zeros(3), 3.0).to_event(1), dist.transforms.OrderedTransform()
    ),
    "corr-Cholesky": lambda: dist.LKJCholesky(3, 2.0),
    "batched corr-Cholesky": lambda: dist.LKJCholesky(3, 1.5).expand([2]),
}


def _shape(prior: dist.Distribution) -> tuple[int, ...]:
    return tuple(prior.batch_shape + prior.event_shape)


def _random_position(compiled, seed: int):
    leaves, treedef = jax.tree.flatten(compiled.initial_position)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    return treedef.unflatten(
        [0.7 * jax.random.normal(k, jnp.shape(a)) for k, a in zip(keys, leaves, strict=True)]
    )


def _assert_energy(compiled, numpyro_model, sites) -> None:
    for seed in range(1):  # one random point per case: every coordinate away from 0
        position = _random_position(compiled, seed)
        got = float(compiled.potential_fn()(position))
        want = float(potential_energy(numpyro_model, (), {}, sites(position)))
        assert math.isfinite(want)
        assert got == pytest.approx(want, rel=2e-5, abs=2e-4)


@pytest.mark.parametrize("support", list(PRIORS))
def test_network_weight_prior_energy_is_numpyros(support):
    """A weight leaf θ under the prior (through ByPath), the network reading t(u): U equals
    NumPyro's potential energy of w ~ N(0, 1), θ ~ prior, y ~ N(x w + 0.1 Σθ, 0.5²)."""
    prior = PRIORS[support]()
    shape = _shape(prior)

    def net(p, x):
        return x @ p["w"] + 0.1 * jnp.sum(p["theta"])

    start = {"w": jnp.zeros(2), "theta": prior.sample(jax.random.key(0))}
    model = bdl.Model(
        net,
        bdl.Gaussian(0.5),
        prior=bdl.ByPath({"theta": prior}, default=bdl.Normal(1.0)),
        params=start,
    )
    compiled = bdl.compile(model, (X, Y))
    t = dist.transforms.biject_to(prior.support)
    assert compiled.initial_position["net"]["theta"].shape == t.inverse_shape(shape)

    def numpyro_model():
        w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([2]))
        theta = numpyro.sample("theta", prior)
        numpyro.sample("y", dist.Normal(X @ w + 0.1 * jnp.sum(theta), 0.5), obs=Y)

    _assert_energy(compiled, numpyro_model, lambda p: p["net"])
    # constrain and unconstrain are inverse, and the constrained value is in the support
    net, _ = compiled.constrain(_random_position(compiled, 7))
    assert net["theta"].shape == shape
    assert bool(jnp.all(prior.support(net["theta"])))
    back = compiled.unconstrain(net)["net"]["theta"]
    np.testing.assert_allclose(back, _random_position(compiled, 7)["net"]["theta"], atol=2e-4)


def _reads_sum(loc_shift, scale):
    """N(Σ loc_shift / 10, scale²) per example (loc_shift repeated per example, (n, ...))."""
    return dist.Normal(
        jnp.sum(jnp.reshape(loc_shift, (jnp.shape(loc_shift)[0], -1)), -1) / 10, scale
    )


@pytest.mark.parametrize(
    "support",
    ["interval (-1, 2)", "upper bounded", "batched simplex", "positive ordered", "corr-Cholesky"],
)
def test_learned_likelihood_parameter_energy_is_numpyros(support):
    """Without a network: the likelihood reads a learned parameter θ ~ prior and σ ~ N⁺(0, 1);
    U equals NumPyro's potential energy of the same model."""
    prior = PRIORS[support]()
    likelihood = bdl.Likelihood.from_numpyro(
        _reads_sum, loc_shift=prior, scale=dist.HalfNormal(1.0)
    )
    compiled = bdl.compile(bdl.Model(likelihood=likelihood), Y)
    assert compiled.initial_position["net"] == {}

    def numpyro_model():
        theta = numpyro.sample("loc_shift", prior)
        scale = numpyro.sample("scale", dist.HalfNormal(1.0))
        numpyro.sample("y", dist.Normal(jnp.sum(theta) / 10, scale), obs=Y)

    _assert_energy(compiled, numpyro_model, lambda p: p["lik"])
    _, lik = compiled.constrain(_random_position(compiled, 3))
    assert lik["loc_shift"].shape == _shape(prior)
    assert bool(jnp.all(prior.support(lik["loc_shift"])))


# ------------------------------------------------------------------------------ bdl.Ordered
def test_ordered_density_is_the_order_statistics_and_integrates_to_one():
    """log p(x) = log 2 + log N(x₁) + log N(x₂) for K = 2, and ∫∫_{x₁<x₂} p = 1 (quadrature)."""
    d = bdl.Ordered(dist.Normal(0.5, 2.0), 2)
    x = jnp.array([-1.0, 0.3])
    want = math.log(2) + stats.norm.logpdf([-1.0, 0.3], 0.5, 2.0).sum()
    assert float(d.log_prob(x)) == pytest.approx(want, rel=1e-6)
    grid = np.linspace(-15.0, 16.0, 1201)
    step = grid[1] - grid[0]
    a, b = np.meshgrid(grid, grid, indexing="ij")
    dens = np.exp(np.asarray(d.log_prob(jnp.stack([a, b], -1)))) * (a < b)
    assert float(dens.sum() * step**2) == pytest.approx(1.0, abs=5e-3)
    assert d.support is dist.constraints.ordered_vector
    assert bdl.Ordered(dist.Exponential(1.0), 3).support is dist.constraints.positive_ordered_vector


def test_ordered_draws_are_sorted_order_statistics():
    """The larger of two iid N(0, 2²) draws has mean 2/√π (David & Nagaraja 2003)."""
    draws = np.asarray(bdl.Ordered(dist.Normal(0.0, 2.0), 2).sample(jax.random.key(0), (20_000,)))
    assert np.all(np.diff(draws, axis=-1) > 0)
    m, se, _ = mean_and_mcse(draws[None, :, 1])
    assert abs(m - 2 / math.sqrt(math.pi)) / se < z_threshold(2)
    m, se, _ = mean_and_mcse(draws[None, :, 0])
    assert abs(m + 2 / math.sqrt(math.pi)) / se < z_threshold(2)


def test_ordered_is_not_the_cut_points_prior():
    """The iid-ordered density and the cut-points pattern differ at the same point: the latter
    is a density on (x₁, log(x₂ − x₁)), the Normal on the unconstrained coordinates."""
    x = jnp.array([-0.5, 1.0])
    iid = bdl.Ordered(dist.Normal(0.0, 1.0), 2).log_prob(x)
    cut = dist.TransformedDistribution(
        dist.Normal(jnp.zeros(2), 1.0).to_event(1), dist.transforms.OrderedTransform()
    ).log_prob(x)
    u = jnp.array([-0.5, math.log(1.5)])  # the cut-points' unconstrained point
    want_cut = stats.norm.logpdf(np.asarray(u)).sum() - math.log(1.5)  # minus log|dx/du|
    assert float(cut) == pytest.approx(want_cut, rel=1e-5)
    assert abs(float(iid) - float(cut)) > 0.5


@pytest.mark.parametrize(
    "bad, fragment",
    [
        (lambda: bdl.Ordered(dist.Beta(2.0, 2.0), 2), "needs densities on ℝ or on (0, ∞)"),
        (lambda: bdl.Ordered(dist.Normal(0.0, 1.0), 0), "must be an integer K ≥ 1"),
        (lambda: bdl.Ordered(dist.Dirichlet(jnp.ones(2)), 2), "needs densities on ℝ or on (0, ∞)"),
        (lambda: bdl.Ordered(dist.LKJCholesky(2)), "must be univariate"),
    ],
)
def test_ordered_refuses_bad_input(bad, fragment):
    with pytest.raises(
        (ValueError, TypeError), match=fragment.replace("(", r"\(").replace(")", r"\)")
    ):
        bad()


def test_multivariate_prior_must_fit_the_leaf():
    model = bdl.Model(
        lambda p, x: x @ p["w"],
        bdl.Gaussian(0.5),
        params={"w": np.zeros(2, np.float32)},
        prior=dist.Dirichlet(np.ones(3, np.float32)),
    )
    with pytest.raises(ValueError, match=r"event shape \(3,\) but parameter 'net/w' has shape"):
        bdl.compile(model, (X, Y))


# ------------------------------------------------------------------------------ mixtures
COMPONENTS = {
    "Normal": (
        dist.Normal,
        {"loc": jnp.array([-1.0, 0.5, 2.0]), "scale": jnp.array([0.5, 1.0, 0.7])},
    ),
    "StudentT": (
        dist.StudentT,
        {
            "df": jnp.array([3.0, 5.0, 9.0]),
            "loc": jnp.array([-1.0, 0.5, 2.0]),
            "scale": jnp.array([0.5, 1.0, 0.7]),
        },
    ),
    "Gamma": (
        dist.Gamma,
        {"concentration": jnp.array([1.5, 4.0, 9.0]), "rate": jnp.array([1.0, 2.0, 3.0])},
    ),
    "Poisson": (dist.Poisson, {"rate": jnp.array([0.5, 3.0, 8.0])}),
}


@pytest.mark.parametrize("family", list(COMPONENTS))
def test_mixture_log_prob_is_numpyros(family):
    """from_numpyro(dist.MixtureSameFamily, component=F, weights=…, **φ) scores y as NumPyro's
    MixtureSameFamily(Categorical(weights), F(φ)), per example."""
    component, params = COMPONENTS[family]
    weights = jnp.array([0.2, 0.5, 0.3])
    likelihood = bdl.Likelihood.from_numpyro(
        dist.MixtureSameFamily, component=component, weights=weights, **params
    )
    y = jnp.asarray(
        dist.MixtureSameFamily(dist.Categorical(probs=weights), component(**params)).sample(
            jax.random.key(1), (9,)
        )
    )
    want = dist.MixtureSameFamily(dist.Categorical(probs=weights), component(**params)).log_prob(y)
    got = likelihood.log_prob(jnp.zeros((9, 0)), y, {})
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_mixture_locations_fed_by_a_network():
    """A mixture-density regression: the network outputs the K component locations per example
    (parameter="loc"), weights and scales learned; per-example log p equals NumPyro's."""
    likelihood = bdl.Likelihood.from_numpyro(
        dist.MixtureSameFamily,
        component=dist.Normal,
        parameter="loc",
        weights=dist.Dirichlet(jnp.ones(2)),
        scale=dist.HalfNormal(1.0).expand([2]),
    )
    model = bdl.Model(
        lambda p, x: x @ p["w"], likelihood, params={"w": np.ones((2, 2), np.float32)}
    )
    compiled = bdl.compile(model, (X, Y))
    position = _random_position(compiled, 0)
    net, lik = compiled.constrain(position)
    want = dist.MixtureSameFamily(
        dist.Categorical(probs=lik["weights"]), dist.Normal(X @ net["w"], lik["scale"])
    ).log_prob(Y)
    np.testing.assert_allclose(compiled.log_likelihood(position, X, Y), want, rtol=1e-5)


def test_mixture_refuses_a_component_that_is_not_a_family():
    with pytest.raises(TypeError, match="must name the component family"):
        bdl.Likelihood.from_numpyro(dist.MixtureSameFamily, component=dist.Normal(0.0, 1.0))

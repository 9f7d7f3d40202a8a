"""The default start never fails on a prior NumPyro can evaluate (docs/compiler.md, *Initial
positions*): every prior family of docs/dsl.md draws a start whose energy is finite, and a
parameter whose prior cannot be drawn from — its sampler raises, or its draw is not finite —
starts from uniform(−2, 2) on the unconstrained scale, with a warning naming it."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest

import bdl

#: NumPyro's inverse CDF of a Student-t needs TensorFlow Probability: its sampler raises
TRUNCATED_T = dist.TruncatedDistribution(dist.StudentT(3.0, 0.0, 10.0), low=0.0)
CUT_POINTS = dist.TransformedDistribution(
    dist.Normal(jnp.zeros(3), 3.0).to_event(1), dist.transforms.OrderedTransform()
)
FALLBACK = "is not a draw from its prior"

#: (id, prior of the parameter w, its shape, the parameters whose start falls back)
FAMILIES = [
    ("Normal", bdl.Normal(1.0), (3,), []),
    ("Laplace", bdl.Laplace(1.0), (3,), []),
    ("HeNormal", bdl.HeNormal(), (3, 2), []),
    ("StudentT", dist.StudentT(3.0, 0.0, 1.0), (3,), []),
    ("HalfNormal", dist.HalfNormal(1.0), (3,), []),
    ("HalfCauchy", dist.HalfCauchy(5.0), (3,), []),
    ("Gamma", dist.Gamma(2.0, 1.0), (3,), []),
    ("Exponential", dist.Exponential(1.0), (3,), []),
    ("Beta", dist.Beta(2.0, 2.0), (3,), []),
    ("Uniform", dist.Uniform(-1.0, 2.0), (3,), []),
    ("TruncatedNormal low", dist.TruncatedNormal(0.0, 1.0, low=0.5), (3,), []),
    ("TruncatedNormal high", dist.TruncatedNormal(0.0, 1.0, high=-0.5), (3,), []),
    ("truncated Student-t", TRUNCATED_T, (3,), ["net/w"]),
    ("Dirichlet", dist.Dirichlet(jnp.ones(3)), (3,), []),
    ("Dirichlet batched", dist.Dirichlet(jnp.ones((2, 3))), (2, 3), []),
    ("LKJCholesky", dist.LKJCholesky(3, 2.0), (3, 3), []),
    ("LKJCholesky expanded", dist.LKJCholesky(3, 2.0).expand([2]), (2, 3, 3), []),
    ("Ordered", bdl.Ordered(dist.Normal(0.0, 2.0), 3), (3,), []),
    ("Ordered positive", bdl.Ordered(dist.Gamma(2.0, 1.0), 3), (3,), []),
    ("cut-points", CUT_POINTS, (3,), []),
    ("to_event", dist.Normal(jnp.zeros(3), 1.0).to_event(1), (3,), []),
    (
        "Hierarchical scale",
        bdl.HierarchicalNormal(scale=dist.HalfCauchy(5.0), name="h"),
        (3, 2),
        [],
    ),
    (
        "Hierarchical precision per leaf",
        bdl.HierarchicalNormal(precision=dist.Gamma(1.0, 1.0), per="leaf", name="h"),
        (3, 2),
        [],
    ),
    (
        "Hierarchical non-centred, truncated Student-t scale per input",
        bdl.HierarchicalNormal(
            scale=TRUNCATED_T, loc=dist.Normal(0.0, 5.0), per="input", centred=False, name="h"
        ),
        (3, 2),
        ["hyper/h/w/scale"],
    ),
]


def _compiled(prior, shape, likelihood=None):
    """A regression whose extra parameter w (of ``shape``) has ``prior``; its plain-function
    network has no initialiser, so ``init="auto"`` draws from the prior."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20, 2))
    y = x @ np.array([1.0, -0.5]) + 0.3 * rng.normal(size=20)
    model = bdl.Model(
        lambda p, x: x @ p["v"] + 0.0 * jnp.sum(p["w"]),
        likelihood or bdl.Gaussian(0.3),
        params={"v": np.zeros(2), "w": np.full(shape, 0.5)},
        prior=bdl.ByPath({"^net/w$": prior}, default=bdl.Normal(1.0)),
    )
    return bdl.compile(model, (x, y), check_gradient=False)


def _starts(compiled, num_chains=4):
    """``init="auto"`` starts and the energy at each, in one program; the warnings they give."""

    @jax.jit
    def starts(key):
        positions = compiled.init_positions(key, num_chains, "auto")
        return positions, jax.vmap(compiled.energy)(positions)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        positions, energies = starts(jax.random.key(0))
        jax.block_until_ready(energies)
        jax.effects_barrier()
    fallbacks = {str(w.message).split()[3] for w in caught if FALLBACK in str(w.message)}
    return positions, np.asarray(energies), fallbacks


@pytest.mark.parametrize(
    ("prior", "shape", "falls_back"),
    [pytest.param(p, s, f, id=name) for name, p, s, f in FAMILIES],
)
def test_every_prior_family_draws_a_start_with_a_finite_energy(prior, shape, falls_back):
    positions, energies, fallbacks = _starts(_compiled(prior, shape))
    assert np.all(np.isfinite(energies)), energies
    for leaf in jax.tree.leaves(positions):
        assert np.all(np.isfinite(np.asarray(leaf)))
    assert sorted(fallbacks) == sorted(falls_back)


def test_the_chains_of_a_fallback_start_differ_and_lie_in_two_of_the_unconstrained_scale():
    positions, _, fallbacks = _starts(_compiled(TRUNCATED_T, (3,)), num_chains=8)
    assert fallbacks == {"net/w"}
    u = np.asarray(positions["net"]["w"])  # log σ, uniform on (−2, 2)
    assert np.all(np.abs(u) < 2.0) and np.unique(u).size == u.size


def test_a_learned_likelihood_scale_with_a_prior_that_cannot_be_drawn_starts():
    likelihood = bdl.Gaussian(scale=None, scale_prior=TRUNCATED_T)
    compiled = _compiled(bdl.Normal(1.0), (3,), likelihood)
    _, energies, fallbacks = _starts(compiled)
    assert fallbacks == {"lik/scale"} and np.all(np.isfinite(energies))
    with pytest.warns(UserWarning, match="lik/scale is not a draw from its prior"):
        samples = bdl.sample(
            compiled, bdl.kernels.sgld(1e-4), num_steps=20, thin=10, num_chains=2, progress=False
        )
    assert np.all(np.isfinite(np.asarray(samples.positions["lik"]["scale"])))


class _NaNDraws(dist.Normal):
    """A Normal whose sampler returns NaN."""

    def sample(self, key, sample_shape=()):
        return jnp.full(sample_shape + self.batch_shape + self.event_shape, jnp.nan)


def test_a_draw_that_is_not_finite_falls_back_with_a_warning():
    positions, energies, fallbacks = _starts(_compiled(_NaNDraws(0.0, 1.0), (3,)))
    assert fallbacks == {"net/w"} and np.all(np.isfinite(energies))
    assert np.all(np.abs(np.asarray(positions["net"]["w"])) < 2.0)

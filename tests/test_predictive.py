"""``compiled.predictive``: the BMA predictive distribution against direct NumPy/SciPy
computations from the same draws (mean, variance split, mixture quantiles; entropy and mutual
information)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from scipy import optimize, stats

import bdl

K, M, DIM = 6, 7, 2


def _compiled(likelihood, y, fields=None):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20, DIM)).astype(np.float32)
    data = {"x": x, "y": y, **(fields or {})}
    model = bdl.Model(
        network=lambda p, x: x @ p["w"] + p["b"],
        params={"w": jnp.zeros((DIM, 1)), "b": jnp.zeros(1)},
        likelihood=likelihood,
    )
    return bdl.compile(model, data)


def _draws(compiled, seed=1, scale=0.7):
    """K positions, with the learned likelihood parameters (if any) spread out too."""
    rng = np.random.default_rng(seed)
    return jax.tree.map(
        lambda a: jnp.asarray(scale * rng.normal(size=(K, *np.shape(a))), jnp.float32),
        compiled.initial_position,
    )


def _outputs(compiled, draws, x):
    w = np.asarray(draws["net"]["w"], np.float64)  # (K, DIM, 1)
    b = np.asarray(draws["net"]["b"], np.float64)  # (K, 1)
    return np.einsum("md,kdo->kmo", x, w)[..., 0] + b  # (K, M)


def _x():
    return np.random.default_rng(5).normal(size=(M, DIM)).astype(np.float32)


def _mixture_quantile(cdf, alpha, lo=-1e3, hi=1e3):
    return optimize.brentq(lambda q: np.mean(cdf(q)) - alpha, lo, hi, xtol=1e-10)


LEVELS = (0.025, 0.3, 0.5, 0.975)


def test_gaussian_learned_scale_matches_numpy():
    compiled = _compiled(bdl.Gaussian(scale=None), np.zeros(20, np.float32))
    draws, x = _draws(compiled), _x()
    got = compiled.predictive(draws, x, quantiles=LEVELS)
    f = _outputs(compiled, draws, x)
    sigma = np.exp(np.asarray(draws["lik"]["scale"], np.float64))[:, None]  # (K, 1)
    mean = f.mean(0)
    aleatoric = np.broadcast_to(sigma**2, f.shape).mean(0)
    epistemic = ((f - mean) ** 2).mean(0)
    np.testing.assert_allclose(got.mean, mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.aleatoric, aleatoric, rtol=1e-5)
    np.testing.assert_allclose(got.epistemic, epistemic, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(got.sd, np.sqrt(aleatoric + epistemic), rtol=1e-5)
    assert got.quantiles.shape == (len(LEVELS), M) and got.levels == LEVELS
    for i in range(M):
        for j, alpha in enumerate(LEVELS):
            q = _mixture_quantile(lambda v, i=i: stats.norm.cdf(v, f[:, i], sigma[:, 0]), alpha)
            np.testing.assert_allclose(got.quantiles[j, i], q, atol=2e-5 * max(1, abs(q)))


def test_student_t_quantiles_in_heavy_tails():
    compiled = _compiled(bdl.StudentT(df=2.5, scale=0.4), np.zeros(20, np.float32))
    draws, x = _draws(compiled), _x()
    got = compiled.predictive(draws, x, quantiles=(0.001, 0.999))
    f = _outputs(compiled, draws, x)
    np.testing.assert_allclose(got.aleatoric, 0.4**2 * 2.5 / 0.5, rtol=1e-5)
    for i in range(M):
        for j, alpha in enumerate((0.001, 0.999)):
            q = _mixture_quantile(lambda v, i=i: stats.t.cdf(v, 2.5, f[:, i], 0.4), alpha)
            # a float32 CDF resolves α to ~eps, so q to ~eps / p(q) where the density is low
            density = stats.t.pdf(q, 2.5, f[:, i], 0.4).mean()
            tol = 10 * np.finfo(np.float32).eps / density
            np.testing.assert_allclose(got.quantiles[j, i], q, rtol=1e-5, atol=tol)


def test_poisson_quantiles_are_the_smallest_integers_reaching_the_level():
    compiled = _compiled(bdl.Poisson(), np.ones(20, np.float32))
    draws, x = _draws(compiled), _x()
    got = compiled.predictive(draws, x, quantiles=LEVELS)
    rate = np.exp(_outputs(compiled, draws, x))
    np.testing.assert_allclose(got.mean, rate.mean(0), rtol=1e-5)
    np.testing.assert_allclose(got.aleatoric, rate.mean(0), rtol=1e-5)
    grid = np.arange(0, 200)
    for i in range(M):
        cdf = stats.poisson.cdf(grid[:, None], rate[:, i]).mean(1)
        for j, alpha in enumerate(LEVELS):
            assert got.quantiles[j, i] == grid[np.argmax(cdf >= alpha)], (i, alpha)


def test_gamma_through_from_numpyro_stays_in_its_support():
    lik = bdl.Likelihood.from_numpyro(dist.Gamma, link=jnp.exp, rate=2.0)
    compiled = _compiled(lik, np.ones(20, np.float32))
    draws, x = _draws(compiled), _x()
    got = compiled.predictive(draws, x, quantiles=(0.01, 0.5))
    conc = np.exp(_outputs(compiled, draws, x))
    np.testing.assert_allclose(got.mean, (conc / 2.0).mean(0), rtol=1e-5)
    np.testing.assert_allclose(got.aleatoric, (conc / 4.0).mean(0), rtol=1e-5)
    for i in range(M):
        for j, alpha in enumerate((0.01, 0.5)):
            q = _mixture_quantile(
                lambda v, i=i: stats.gamma.cdf(v, conc[:, i], scale=0.5), alpha, lo=0.0, hi=1e3
            )
            np.testing.assert_allclose(got.quantiles[j, i], q, rtol=1e-4, atol=1e-6)


def test_per_example_scale_is_the_aleatoric_variance():
    sigma = np.linspace(0.5, 2.0, 20).astype(np.float32)
    compiled = _compiled(bdl.Gaussian(scale="sigma"), np.zeros(20, np.float32), {"sigma": sigma})
    draws, x = _draws(compiled), _x()
    s = np.linspace(0.1, 3.0, M)
    got = compiled.predictive(draws, x, fields={"sigma": s}, quantiles=())
    np.testing.assert_allclose(got.aleatoric, s**2, rtol=1e-5)
    assert got.quantiles.shape == (0, M)
    with pytest.raises(ValueError, match="fields="):
        compiled.predictive(draws, x)
    with pytest.raises(ValueError, match="one entry per input"):
        compiled.predictive(draws, x, fields={"sigma": s[:3]})


def test_classification_entropy_and_mutual_information_match_numpy():
    rng = np.random.default_rng(2)
    x_train = rng.normal(size=(30, DIM)).astype(np.float32)
    model = bdl.Model(
        network=lambda p, x: x @ p["w"],
        params={"w": jnp.zeros((DIM, 3))},
        likelihood=bdl.Categorical(),
    )
    compiled = bdl.compile(model, (x_train, rng.integers(0, 3, size=30)))
    draws = {"net": {"w": jnp.asarray(2.0 * rng.normal(size=(4, K // 2, DIM, 3)), jnp.float32)}}
    x = _x()
    got = compiled.predictive(draws, x)  # (chains, draws) axes
    logits = np.einsum("md,ckdj->ckmj", x, np.asarray(draws["net"]["w"], np.float64))
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p = (p / p.sum(-1, keepdims=True)).reshape(-1, M, 3)
    pbar = p.mean(0)
    entropy = -(pbar * np.log(pbar)).sum(-1)
    expected = (-(p * np.log(p)).sum(-1)).mean(0)
    np.testing.assert_allclose(got.probs, pbar, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got.entropy, entropy, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.expected_entropy, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.mutual_information, entropy - expected, atol=2e-6)
    assert np.all(np.asarray(got.mutual_information) > -1e-6)


def test_chain_and_draw_axes_are_pooled():
    compiled = _compiled(bdl.Gaussian(scale=0.3), np.zeros(20, np.float32))
    draws, x = _draws(compiled), _x()
    split = jax.tree.map(lambda a: a.reshape(2, K // 2, *a.shape[1:]), draws)
    a = compiled.predictive(draws, x)
    b = compiled.predictive(split, x)
    for u, v in zip(a[:5], b[:5], strict=True):
        np.testing.assert_allclose(u, v, rtol=1e-6)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda c, d: c.predictive(d, np.zeros((3, DIM + 1))), "3 features per row"),
        (lambda c, d: c.predictive(d, np.zeros((3, DIM)), quantiles=(0.5, 1.0)), r"\(0, 1\)"),
        (lambda c, d: c.predictive(c.initial_position, np.zeros((3, DIM))), "leading draw axis"),
    ],
)
def test_bad_arguments_raise(call, match):
    compiled = _compiled(bdl.Gaussian(scale=0.3), np.zeros(20, np.float32))
    with pytest.raises(ValueError, match=match):
        call(compiled, _draws(compiled))


def _samples(compiled, diverged, divergence_step, draws=4):
    """Two chains of ``draws`` draws (steps 0, 1, …) as bdl.sample returns them."""
    rng = np.random.default_rng(2)
    positions = jax.tree.map(
        lambda a: (0.5 * rng.normal(size=(2, draws, *np.shape(a)))).astype(np.float32),
        compiled.initial_position,
    )
    return bdl.Samples(
        positions, {}, {}, np.arange(draws), "sgld", draws,
        diverged=np.array(diverged), divergence_step=np.array(divergence_step),
    )  # fmt: skip


def test_a_samples_is_read_as_its_valid_draws():
    """predict, predictive and log_predictive take a Samples as samples.flat(): a diverged
    chain's draws after its divergence are left out (here the last two of chain 1)."""
    compiled = _compiled(bdl.Gaussian(scale=0.3), np.zeros(20, np.float32))
    samples = _samples(compiled, [False, True], [-1, 2])
    x, y = _x(), np.zeros(M, np.float32)
    valid = samples.flat()
    assert valid["net"]["w"].shape[0] == 6
    np.testing.assert_array_equal(compiled.predict(samples, x), compiled.predict(valid, x))
    np.testing.assert_array_equal(
        compiled.log_predictive(samples, x, y), compiled.log_predictive(valid, x, y)
    )
    np.testing.assert_array_equal(
        compiled.predictive(samples, x).mean, compiled.predictive(valid, x).mean
    )
    # (chains, draws, …) positions are pooled like (draws, …): every draw, the frozen ones too
    frozen = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), samples.positions)
    np.testing.assert_allclose(
        compiled.predict(samples.positions, x), compiled.predict(frozen, x), rtol=1e-6
    )


def test_draws_after_a_divergence_or_of_failed_chains_warn():
    """flat(frozen=True) over a diverged chain, and anything read from a Samples whose every
    chain diverged, warn; a healthy Samples does not."""
    compiled = _compiled(bdl.Gaussian(scale=0.3), np.zeros(20, np.float32))
    x = _x()
    one = _samples(compiled, [False, True], [-1, 2])
    with pytest.warns(bdl.DivergenceWarning, match="2 draws taken after their chain diverged"):
        one.flat(frozen=True)
    both = _samples(compiled, [True, True], [3, 2])
    for read in (
        both.flat,
        lambda: compiled.predict(both, x),
        lambda: compiled.predictive(both, x),
        lambda: compiled.log_predictive(both, x, np.zeros(M, np.float32)),
    ):
        with pytest.warns(bdl.DivergenceWarning, match=r"every chain diverged \(chain 0 at step 3"):
            read()
    healthy = _samples(compiled, [False, False], [-1, -1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", bdl.DivergenceWarning)
        healthy.flat()
        healthy.flat(frozen=True)
        compiled.predict(healthy, x)
        one.flat()  # the valid draws: no repeat after the divergence


def test_a_samples_without_valid_draws_is_refused():
    compiled = _compiled(bdl.Gaussian(scale=0.3), np.zeros(20, np.float32))
    none = _samples(compiled, [True, True], [0, 0])
    refused = pytest.raises(ValueError, match="a Samples without valid draws")
    with pytest.warns(bdl.DivergenceWarning), refused:
        compiled.predict(none, _x())

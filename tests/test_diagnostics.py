"""bdl.diagnostics: the ESS and R̂ wrappers' conventions and AR(1) theory; temperature diagnostics.

Every test has a fixed seed. Statistical tolerances are stated where they are used: binomial
quantiles for band coverage, standard errors derived from the sample size for means.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import signal, stats
from stat_utils import arviz_per_entry

from bdl.diagnostics import (
    bulk_rhat,
    configurational_temperature,
    effective_sample_size,
    ess_bulk,
    ess_tail,
    group_sizes,
    kinetic_temperature,
    kinetic_temperature_band,
    kinetic_temperature_from_energy,
    parameter_groups,
    rank_rhat,
    split_rhat,
    tail_rhat,
    temperature_report,
)

ROOT = Path(__file__).resolve().parents[1]
RHOS = np.array([0.9, 0.5, 0.0, -0.3])

# each wrapper and the ArviZ function and method it stands for
ARVIZ_METHODS = [
    (ess_bulk, az.ess, "bulk"),
    (ess_tail, az.ess, "tail"),
    (effective_sample_size, az.ess, "identity"),
    (lambda x: effective_sample_size(x, split=True), az.ess, "mean"),
    (split_rhat, az.rhat, "split"),
    (bulk_rhat, az.rhat, "z_scale"),
    (tail_rhat, az.rhat, "folded"),
    (rank_rhat, az.rhat, "rank"),
]


def ar1(rng: np.random.Generator, rho: np.ndarray, chains: int, draws: int, reps: int):
    """Stationary AR(1) chains x_t = ρ x_{t−1} + √(1−ρ²) ε_t, unit marginal variance.

    Shape (chains, draws, len(rho), reps); the integrated autocorrelation time is (1+ρ)/(1−ρ).
    """
    out = np.empty((chains, draws, len(rho), reps))
    for j, r in enumerate(rho):
        eps = rng.normal(size=(chains, draws, reps)) * np.sqrt(1 - r**2)
        eps[:, 0] = rng.normal(size=(chains, reps))
        out[:, :, j] = signal.lfilter([1.0], [1.0, -r], eps, axis=1)
    return out


@pytest.fixture(scope="module")
def ar_draws() -> np.ndarray:
    """4 chains × 1001 draws × 4 ρ × 2 reps, and one chain shifted by 1 (one marginal sd) in the
    second rep so that R̂ is clearly above 1."""
    x = ar1(np.random.default_rng(0), RHOS, 4, 1001, 2)
    x[1, :, :, 1] += 1.0
    return x


# ---------------------------------------------------------------- ESS and R̂


def test_import_bdl_leaves_arviz_and_scipy_stats_unimported():
    code = "import sys, bdl; print(sorted({'arviz', 'scipy.stats'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_axes_and_events_follow_arviz(ar_draws):
    """Axis 0 is chains, axis 1 draws, the rest one value each: every entry of the batched call
    equals ArviZ's own (chain, draw) array path with the method the wrapper names."""
    x = ar_draws.astype(np.float32)  # float32 in, float64 out
    for fn, arviz_fn, method in ARVIZ_METHODS:
        whole = fn(x)
        assert isinstance(whole, np.ndarray) and whole.dtype == np.float64
        assert whole.shape == (4, 2), method
        for i in range(4):
            for j in range(2):
                series = ar_draws[:, :, i, j].astype(np.float32).astype(np.float64)
                expected = arviz_fn(series, method=method)
                np.testing.assert_allclose(whole[i, j], expected, rtol=1e-12, err_msg=method)
        one = fn(jnp.asarray(x[:, :, 1, 0]))  # a JAX array and a scalar event
        assert one.shape == () and np.isclose(one, whole[1, 0], rtol=1e-12)
    # The chains axis is axis 0: the shifted chain of the second rep is detected, the others pass
    # (at ρ = 0.9 the ESS is only ≈ 200, too few for R̂ < 1.01 to be reliable; left out).
    rank = rank_rhat(x)
    assert np.all(rank[:, 1] > 1.05) and np.all(rank[1:, 0] < 1.01)


def hard_cases() -> dict[str, np.ndarray]:
    """Draws where the arithmetic's corners show: ties, an odd and a minimal number of draws, a
    constant entry, a frozen chain, a chain far from the others, strong anticorrelation."""
    rng = np.random.default_rng(11)
    normal = rng.normal(size=(4, 61, 3))
    return {
        "ties": rng.integers(0, 3, size=(4, 50, 3)).astype(float),
        "odd draws": normal,
        "four draws": normal[:3, :4],
        "nine draws, two chains": normal[:2, :9],
        "a constant entry": np.concatenate([normal, np.ones((4, 61, 1))], axis=-1),
        "a frozen chain": np.concatenate([normal[:3], np.full((1, 61, 3), -87.3)], axis=0),
        "a distant chain": normal + np.array([0.0, 0.0, 0.0, 9.0])[:, None, None],
        "anticorrelated": ar1(rng, np.array([-0.8]), 4, 40, 3)[:, :, 0],
        "trend": normal + np.linspace(0.0, 3.0, 61)[None, :, None],
    }


@pytest.mark.parametrize("case", list(hard_cases()))
def test_every_function_agrees_with_arviz_entry_by_entry(case):
    """The vectorised arithmetic against ArviZ's own loop over entries, on corner cases."""
    x = hard_cases()[case]
    for fn, arviz_fn, method in ARVIZ_METHODS:
        ours, theirs = fn(x), arviz_per_entry(arviz_fn, x, method)
        assert np.array_equal(np.isnan(ours), np.isnan(theirs)), (case, method)
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, err_msg=f"{case}: {method}")


def test_ess_matches_ar1_theory():
    """ESS ≈ C·N(1−ρ)/(1+ρ). Per replicate the estimator's relative sd is ≈ 11 % at ρ = 0.9
    (≈ 3–6 % for smaller |ρ|; measured over 64 replicates), so the mean over 32 replicates has
    sd ≲ 2 %: we allow 8 % (4 sd)."""
    chains, draws, reps = 4, 2000, 32
    x = ar1(np.random.default_rng(1), RHOS, chains, draws, reps)
    truth = chains * draws * (1 - RHOS) / (1 + RHOS)
    for estimator in (effective_sample_size, ess_bulk):
        ratio = estimator(x) / truth[:, None]
        assert ratio.shape == (len(RHOS), reps)
        np.testing.assert_allclose(ratio.mean(axis=1), 1.0, atol=0.08, err_msg=str(estimator))
    tail = ess_tail(x)
    # Independent draws: the tail ESS is ≈ C·N too (indicators of iid draws are iid).
    np.testing.assert_allclose(tail[2].mean() / truth[2], 1.0, atol=0.08)
    # And strong autocorrelation is penalised in the tails as well.
    assert np.all(tail[0] < 0.25 * truth[2])


def test_rhat_detects_stuck_and_scale_mismatched_chains():
    rng = np.random.default_rng(3)
    chains, draws = 4, 1001
    mixed = rng.normal(size=(chains, draws))
    assert float(rank_rhat(mixed)) < 1.01 and float(split_rhat(mixed)) < 1.01

    stuck = rng.normal(size=(chains, draws)) + np.array([0.0, 0.0, 3.0, 3.0])[:, None]
    assert float(split_rhat(stuck)) > 1.5 and float(rank_rhat(stuck)) > 1.5

    # Same location, different scales: invisible to the bulk, caught by the folded R̂.
    scaled = rng.normal(size=(chains, draws)) * np.array([1.0, 1.0, 3.0, 3.0])[:, None]
    assert float(split_rhat(scaled)) < 1.01 and float(bulk_rhat(scaled)) < 1.01
    assert float(tail_rhat(scaled)) > 1.1 and float(rank_rhat(scaled)) > 1.1

    # A trend within the chains: splitting turns it into between-chain disagreement.
    trend = rng.normal(size=(2, draws)) + np.linspace(0.0, 2.0, draws)
    assert float(split_rhat(trend)) > 1.1


def test_degenerate_inputs():
    x = np.ones((4, 1001))
    # ArviZ convention: a constant parameter has ESS = number of (split) draws.
    assert float(ess_bulk(x)) == 4000.0 and float(effective_sample_size(x)) == 4004.0
    y = np.random.default_rng(5).normal(size=(4, 1001))
    y[0, 3] = np.nan
    for fn, _, method in ARVIZ_METHODS:
        assert np.isnan(fn(y)), method
    # R̂ needs two chains; fewer than 4 draws give NaN.
    assert np.isnan(rank_rhat(y[1:2])) and np.isfinite(ess_bulk(y[1:2]))
    assert np.isnan(ess_bulk(y[1:, :3]))
    with pytest.raises(ValueError, match="chains, draws"):
        ess_bulk(np.ones(10))


# ---------------------------------------------------------------- temperatures


def _momentum_tree(rng: np.random.Generator, n: int, temperature: float, scale: float = 1.0):
    """n exact draws r ~ N(0, scale·T·M) for a small network-like pytree and its diagonal mass."""
    mass = {
        "dense": {"kernel": rng.uniform(0.2, 5.0, size=(20, 10)), "bias": np.float64(2.5)},
        "out": rng.uniform(0.5, 2.0, size=(3,)),
        "scale": np.float64(0.3),
    }
    shapes = {"dense": {"kernel": (20, 10), "bias": (10,)}, "out": (3,), "scale": ()}
    momentum = jax.tree.map(
        lambda shape, m: (
            rng.normal(size=(n, *shape)) * np.sqrt(scale * temperature * np.asarray(m))
        ).astype(np.float32),
        shapes,
        mass,
        is_leaf=lambda s: isinstance(s, tuple),
    )
    return momentum, mass


def test_band_is_the_chi2_interval():
    for d, t, level in [(1, 1.0, 0.99), (7, 0.1, 0.99), (250, 3.0, 0.95), (10_000, 1.0, 0.9)]:
        lo, hi = kinetic_temperature_band(d, t, level)
        np.testing.assert_allclose(lo, t * stats.chi2.ppf((1 - level) / 2, d) / d, rtol=1e-12)
        np.testing.assert_allclose(hi, t * stats.chi2.ppf((1 + level) / 2, d) / d, rtol=1e-12)
    lo, hi = kinetic_temperature_band(np.array([1, 50]), np.array([[0.5], [2.0]]))
    assert lo.shape == hi.shape == (2, 2) and np.all(lo < hi)
    with pytest.raises(ValueError):
        kinetic_temperature_band(10, 1.0, level=1.0)


def test_kinetic_temperature_coverage_and_mean():
    """On exact momenta N(0, T·M): the number outside the 99 % band is Binomial(n, 0.01) per
    group; we accept the central 1 − 10⁻³/G region (Bonferroni over the G groups). The mean of
    n draws of T̂_K has sd T·√(2/(d·n)); we accept 4.5 sd."""
    temperature, n, level = 0.3, 4000, 0.99
    momentum, mass = _momentum_tree(np.random.default_rng(8), n, temperature)
    values = kinetic_temperature(momentum, mass, batch_ndim=1)
    sizes = group_sizes(momentum, batch_ndim=1)
    assert sizes == {"dense/bias": 10, "dense/kernel": 200, "out": 3, "scale": 1}
    alpha = 1e-3 / len(values)
    lo_count, hi_count = (
        stats.binom.ppf(alpha / 2, n, 1 - level),
        stats.binom.isf(alpha / 2, n, 1 - level),
    )
    for name, value in values.items():
        value = np.asarray(value)
        assert value.shape == (n,)
        lo, hi = kinetic_temperature_band(sizes[name], temperature, level)
        outside = int(np.sum((value < lo) | (value > hi)))
        assert lo_count <= outside <= hi_count, (name, outside, lo_count, hi_count)
        se = temperature * np.sqrt(2.0 / (sizes[name] * n))
        assert abs(value.mean() - temperature) < 4.5 * se, (name, value.mean())

    report = temperature_report(momentum=momentum, mass=mass, temperature=temperature, batch_ndim=1)
    assert abs(report.fraction_inside - level) < 0.01
    assert report.overall.size == 214 and report.mean_configurational is None
    assert "dense/kernel" in str(report)

    # Power: momenta 30 % too hot leave the 200-dimensional group's band most of the time.
    hot, _ = _momentum_tree(np.random.default_rng(8), n, temperature, scale=1.3)
    hot_report = temperature_report(momentum=hot, mass=mass, temperature=temperature, batch_ndim=1)
    assert np.mean(hot_report.groups["dense/kernel"].inside) < 0.5
    assert np.mean(hot_report.overall.inside) < 0.5


def test_kinetic_temperature_groups_and_energy():
    momentum, mass = _momentum_tree(np.random.default_rng(9), 8, 1.0)
    groups = {"weights": "kernel", "all": ".*"}
    assert parameter_groups(momentum, groups) == {
        "weights": ["dense/kernel"],
        "all": ["dense/bias", "dense/kernel", "out", "scale"],
    }
    values = kinetic_temperature(momentum, mass, groups=groups, batch_ndim=1)
    r, m = momentum["dense"]["kernel"], mass["dense"]["kernel"]
    np.testing.assert_allclose(values["weights"], (r**2 / m).sum(axis=(1, 2)) / 200, rtol=1e-5)
    kinetic_energy = 0.5 * sum(
        np.sum(ri**2 / mi, axis=tuple(range(1, ri.ndim)))
        for ri, mi in zip(jax.tree.leaves(momentum), jax.tree.leaves(mass), strict=True)
    )
    np.testing.assert_allclose(
        kinetic_temperature_from_energy(kinetic_energy, 214), values["all"], rtol=1e-5
    )
    # A scalar mass applies to every leaf; jit works with the groups closed over.
    jitted = jax.jit(lambda p: kinetic_temperature(p, 2.0, groups=groups, batch_ndim=1))
    unit = kinetic_temperature(momentum, 1.0, groups=groups, batch_ndim=1)
    np.testing.assert_allclose(jitted(momentum)["all"], unit["all"] / 2.0, rtol=1e-5)
    with pytest.raises(ValueError, match="matches no parameter"):
        kinetic_temperature(momentum, mass, groups={"conv": "conv"})
    with pytest.raises(ValueError, match="mass must be"):
        kinetic_temperature(momentum, {"dense": 1.0, "out": 1.0})
    with pytest.raises(ValueError, match="give momentum"):
        temperature_report(position=momentum)


def test_configurational_temperature_on_exact_gaussian_draws():
    """θ ~ π_T ∝ exp(−U/T) with U(θ) = ½(θ−μ)ᵀΣ⁻¹(θ−μ), drawn exactly. Over all d coordinates
    d·T̂_C/T ~ χ²(d), so the mean of n draws has sd T√(2/(dn)); per group the sd is estimated
    from the n draws. We accept 4.5 standard errors. A minibatch-like unbiased gradient noise
    keeps the mean at T; draws from the wrong temperature are rejected."""
    rng = np.random.default_rng(10)
    d, n, temperature = 17, 20_000, 0.25
    a = rng.normal(size=(d, d))
    cov = a @ a.T / d + 0.1 * np.eye(d)
    precision = np.linalg.inv(cov)
    mu = rng.normal(size=d)

    def unflatten(flat):
        return {"w": flat[..., :12].reshape(*flat.shape[:-1], 3, 4), "b": flat[..., 12:]}

    def energy(theta):
        flat = jnp.concatenate([theta["w"].reshape(-1), theta["b"]]) - mu
        return 0.5 * flat @ jnp.asarray(precision, flat.dtype) @ flat

    def draws(temp):
        z = rng.normal(size=(n, d)) @ np.linalg.cholesky(cov).T
        return unflatten((mu + np.sqrt(temp) * z).astype(np.float32))

    theta = draws(temperature)
    grad = jax.vmap(jax.grad(energy))(theta)
    values = configurational_temperature(
        theta, grad, groups={"w": "w", "b": "b", "all": ".*"}, batch_ndim=1
    )
    for name, value in values.items():
        value = np.asarray(value, np.float64)
        se = value.std(ddof=1) / np.sqrt(n)
        assert abs(value.mean() - temperature) < 4.5 * se, (name, value.mean(), se)
    exact_se = temperature * np.sqrt(2.0 / (d * n))
    assert abs(float(np.mean(values["all"])) - temperature) < 4.5 * exact_se

    noise = jax.tree.map(lambda g: g + rng.normal(size=g.shape).astype(np.float32) * 3.0, grad)
    noisy = np.asarray(
        configurational_temperature(theta, noise, groups={"all": ".*"}, batch_ndim=1)["all"],
        np.float64,
    )
    assert abs(noisy.mean() - temperature) < 4.5 * noisy.std(ddof=1) / np.sqrt(n)

    hot = draws(1.3 * temperature)
    hot_values = np.asarray(
        configurational_temperature(
            hot, jax.vmap(jax.grad(energy))(hot), groups={"all": ".*"}, batch_ndim=1
        )["all"]
    )
    assert (hot_values.mean() - temperature) / exact_se > 10

    report = temperature_report(position=theta, grad=grad, temperature=temperature, batch_ndim=1)
    assert set(report.groups) == {"b", "w"} and report.fraction_inside is None
    np.testing.assert_allclose(report.mean_configurational, np.mean(values["all"]), rtol=1e-5)


def test_kinetic_temperature_takes_a_collected_layerwise_mass():
    """A layerwise mass collected with each draw (one value per leaf and draw, shaped like the
    batch) gives T̂_K = mean(r²)/m per draw, as the same mass broadcast by hand."""
    rng = np.random.default_rng(11)
    draws = 6
    mass = {"w": rng.uniform(0.5, 2.0, draws), "b": rng.uniform(0.5, 2.0, draws)}
    momentum = {
        "w": rng.normal(size=(draws, 4, 3)) * np.sqrt(mass["w"])[:, None, None],
        "b": rng.normal(size=(draws, 3)) * np.sqrt(mass["b"])[:, None],
    }
    values = kinetic_temperature(momentum, mass, batch_ndim=1)
    for name in ("w", "b"):
        r, m = momentum[name], mass[name]
        expected = np.mean(r.reshape(draws, -1) ** 2, axis=1) / m
        np.testing.assert_allclose(np.asarray(values[name]), expected, rtol=1e-5)
    # a shared θ-shaped mass whose shape happens to be the batch's is still read as θ-shaped
    shared = {"w": rng.uniform(0.5, 2.0, (4, 3)), "b": rng.uniform(0.5, 2.0, draws)[:3]}
    values = kinetic_temperature(momentum, shared, batch_ndim=1)
    np.testing.assert_allclose(
        np.asarray(values["w"]),
        np.mean((momentum["w"] ** 2 / shared["w"]).reshape(draws, -1), axis=1),
        rtol=1e-5,
    )

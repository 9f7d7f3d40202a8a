"""The run-away and heat tests of bdl.diagnostics.runaway: their false-alarm rate on stationary
autocorrelated series, and their power on growth and heat."""

import math

import numpy as np
import pytest

from bdl.diagnostics.runaway import FALSE_ALARM, SD_TOLERANCE, growth, heat, quantile


def ar1(rng, n, phi, size=None):
    """Stationary AR(1) series with unit marginal variance, shape (size, n)."""
    size = 1 if size is None else size
    x = np.empty((size, n))
    x[:, 0] = rng.normal(size=size)
    noise = rng.normal(size=(size, n)) * math.sqrt(1 - phi**2)
    for t in range(1, n):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    return x


def test_quantile_splits_the_false_alarm_rate_over_the_tests():
    # Bonferroni: 12 one-sided tests (4 chains × 3) at a run-wide rate of 1e-3
    assert quantile(12) == pytest.approx(3.765, abs=1e-3)
    assert quantile(1) == pytest.approx(3.090, abs=1e-3)
    assert FALSE_ALARM == 1e-3


@pytest.mark.parametrize("phi", [0.0, 0.9, 0.99])
def test_growth_rarely_fires_on_a_stationary_gaussian_energy(phi):
    """U/T of a d-dimensional Gaussian posterior is d/2 + Gamma noise of variance d/2; 1,000
    stationary chains of 60 tested draws, from independent to ESS ≈ 0.3 per third. The bound
    Var(U/T) ≤ d holds however correlated the draws are, so at 1e-3/8 per chain more than 3
    alarms (P < 1e-4 under a Poisson(0.13) count) means the limit is wrong."""
    rng = np.random.default_rng(1)
    d = 20
    energy = d / 2 + math.sqrt(d / 2) * ar1(rng, 60, phi, 1000)
    alarms = sum(growth(u, d, 8).flagged for u in energy)
    assert alarms <= 3


def test_a_limit_from_the_chains_own_spread_would_fire_on_slow_stationary_chains():
    """Why the limit is a bound and not the chain's estimate: over 20-draw thirds of AR(1)
    series with φ = 0.9 the first third's sd and Geyer's ESS are both far off, and a Welch-like
    limit s_F·q·√(2/ESS_F) fires on several per cent of stationary chains."""
    from bdl.diagnostics import effective_sample_size

    rng = np.random.default_rng(1)
    alarms = 0
    for x in ar1(rng, 60, 0.9, 300):
        first, middle, last = x[:20], x[20:40], x[40:]
        ess = float(effective_sample_size(first[None]))
        limit = first.std(ddof=1) * max(quantile(8) * math.sqrt(2 / ess), 1.0)
        rise = last.mean() - first.mean()
        alarms += bool(first.mean() < middle.mean() < last.mean() and rise > limit)
    assert alarms >= 6  # ≥ 2 %: the naive test is not at its nominal 1.25e-4


def test_growth_fires_on_a_rising_energy_and_says_where():
    rng = np.random.default_rng(2)
    d = 20
    u = d / 2 + math.sqrt(d / 2) * ar1(rng, 90, 0.5)[0] + np.linspace(0.0, 60.0, 90)
    result = growth(u, d, 8)
    assert result.flagged and result.statistic > result.limit
    assert result.limit == pytest.approx(quantile(8) * math.sqrt(2 * d))
    assert 30 <= result.index < 90  # after the first third, where it left its range
    assert "energy kept growing" in result.detail


def test_growth_fires_on_an_explosion_that_stays_finite():
    rng = np.random.default_rng(3)
    u = np.exp(np.linspace(0.0, 60.0, 60)) * (1 + 0.1 * rng.normal(size=60))
    assert growth(u, 5, 8).flagged


def test_growth_ignores_a_falling_energy():
    u = np.linspace(1000.0, 10.0, 60) + np.random.default_rng(4).normal(size=60)
    assert not growth(u, 5, 8).flagged


def test_heat_passes_a_chain_at_its_temperature_and_within_the_tolerance():
    rng = np.random.default_rng(5)
    assert not heat(1.0 + 0.05 * rng.normal(size=64), 1000, 8).flagged
    # hotter than T but within the sd tolerance (sds 1.2× too wide): not a hot chain
    assert not heat(1.2**2 + 0.05 * rng.normal(size=64), 1000, 8).flagged


def test_heat_fires_beyond_the_tolerance_by_more_than_its_error():
    rng = np.random.default_rng(6)
    v = 4.0 + 0.5 * rng.normal(size=64)  # sds 2× too wide
    result = heat(v, 1000, 8)
    assert result.flagged and result.index == 0
    assert result.statistic == pytest.approx(4.0, abs=0.3)
    assert result.limit > SD_TOLERANCE**2
    assert "sds ≈ 2" in result.detail
    # the same mean with a standard error too large to tell: not flagged
    assert not heat(np.array([-40.0, 48.0] * 4), 1000, 8).flagged
    # nor in one dimension, where v ~ χ²(1)·T'/T: its floor ρ²·√2 needs v̄ > 1.56 + 3.66·2.2
    assert not heat(4.0 + 0.01 * rng.normal(size=64), 1, 8).flagged


@pytest.mark.parametrize("d", [5, 50, 5_000])
def test_heat_rarely_fires_at_the_boundary_of_its_tolerance(d):
    """2,000 chains of 32 independent draws of a Gaussian posterior sampled at exactly ρ²·T
    (v = ρ²·χ²(d)/d): both heat criteria are at about 1e-3/12 there, so more than 3 alarms
    (P < 1e-4 under a Poisson(0.33) count) means a limit is too low."""
    rng = np.random.default_rng(7)
    v = SD_TOLERANCE**2 * rng.chisquare(d, size=(2_000, 32)) / d
    assert sum(heat(x, d, 12).flagged for x in v) <= 3


def test_heat_fires_when_every_draw_is_far_too_hot_though_the_mean_swings():
    """NNSGHMC on the MNIST-1D CNN: 8 draws between 20·T and 300·T, a mean too noisy to judge
    by its standard error, every draw far above what one draw at 1.25²·T reaches (1.66·T for
    d = 5,210)."""
    v = np.array([300.0, 20.0, 250.0, 25.0, 280.0, 22.0, 260.0, 30.0])
    result = heat(v, 5_210, 12)
    assert result.statistic < result.limit  # the mean alone would not do
    assert result.flagged and "every one above" in result.detail
    assert not heat(np.append(v[:-1], 1.5), 5_210, 12).flagged  # one draw at 1.5·T: not every


def test_heat_counts_a_non_finite_temperature_as_hot():
    assert heat(np.array([1.0, np.inf, 1.0]), 5, 8).flagged


def test_too_few_draws_are_refused():
    with pytest.raises(ValueError, match="at least 12 draws"):
        growth(np.arange(11.0), 5, 2)
    with pytest.raises(ValueError, match="at least 2 draws"):
        heat(np.ones(1), 5, 2)

"""The Stein statistics of bdl.diagnostics.stein and the bias verdict of bdl.diagnostics.bias on
draws whose law is known: what they estimate (spread ratios and mean errors, Gaussian and
heavy-tailed), how well their standard errors are calibrated (independent and autocorrelated
draws), what preconditioning buys, and when the verdict fires."""

import dataclasses
import math
import re

import numpy as np
import pytest
from scipy import stats

from bdl.diagnostics.bias import FALSE_ALARM, Bias, assess_bias
from bdl.diagnostics.stein import stein_estimates

CHAINS, DRAWS = 4, 2_000
EVERY = 8  # a gradient at every 8th draw


def subset(num=DRAWS, every=EVERY):
    return np.arange(0, num, every)


def gaussian_grads(x, idx, precision=None, mean=0.0):
    """G = ∇U of N(mean, precision⁻¹) at the draws idx."""
    at = x[:, idx] - mean
    return at if precision is None else at @ precision


def ar1(rng, shape, phi):
    """Stationary AR(1) along axis 1, unit marginal variance."""
    x = np.empty(shape)
    x[:, 0] = rng.normal(size=(shape[0], *shape[2:]))
    noise = rng.normal(size=shape) * math.sqrt(1 - phi**2)
    for t in range(1, shape[1]):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    return x


@pytest.mark.parametrize("scale", [0.8, 1.0, 1.2, 1.5])
def test_a_rescaled_gaussian_reads_as_its_scale(scale):
    """Draws of N(0, s²I) against the target N(0, I): every coordinate's implied ratio is s, within
    4 of its standard errors (≈ 0.006 here), for both test functions and the pooled mean."""
    rng = np.random.default_rng(0)
    x = scale * rng.normal(size=(CHAINS, DRAWS, 3))
    idx = subset()
    e = stein_estimates(x, gaussian_grads(x, idx), idx)
    for family in ("bulk", "wide"):
        z = (e.spread[family] - scale) / e.spread_se[family]
        assert np.all(np.abs(z) < 4), (family, e.spread[family], e.spread_se[family])
        assert e.pooled[family].value == pytest.approx(scale, abs=4 * e.pooled[family].se)
    assert np.all(e.spread_se["bulk"] < 0.02 * scale)


def test_a_shifted_gaussian_reads_as_its_shift_in_sds():
    """Draws of N(0.3·σ, σ²) against N(0, σ²) with σ = 2: the mean error is 0.3 sd (within 4 se)."""
    rng = np.random.default_rng(1)
    sigma = 2.0
    x = sigma * (0.3 + rng.normal(size=(CHAINS, DRAWS, 2)))
    idx = subset()
    e = stein_estimates(x, gaussian_grads(x, idx, np.eye(2) / sigma**2), idx)
    z = (e.location - 0.3) / e.location_se
    assert np.all(np.abs(z) < 4), (e.location, e.location_se)
    assert np.allclose(e.target_sd, sigma, rtol=1e-6)  # a Gaussian's regression is exact


@pytest.mark.parametrize("scale", [1.0, 1.1, 1.3])
def test_a_rescaled_student_t_reads_as_its_scale(scale):
    """Heavy tails (ν = 3, infinite fourth moment): the bounded test functions and the rate k
    from the second Stein identity still read the scale, within 6 % (the rate is exact only at
    s = 1), where a variance ratio would read about √s."""
    rng = np.random.default_rng(2)
    x = scale * stats.t(3).rvs(size=(CHAINS, 4_000, 3), random_state=rng)
    idx = subset(4_000)
    at = x[:, idx]
    e = stein_estimates(x, 4 * at / (3 + at**2), idx)
    assert e.pooled["bulk"].value == pytest.approx(scale, rel=0.06)
    assert np.all(np.abs(e.spread["bulk"] / scale - 1) < 0.06 + 4 * e.spread_se["bulk"])


def test_preconditioning_reads_the_marginals_not_the_stiff_direction():
    """A Gaussian of correlation 0.99 drawn 33 % too wide in variance along its stiff axis only:
    each marginal sd is 0.08 % off. Preconditioned by the regression's covariance the spread
    reads ≈ 1 (within 4 se); coordinate by coordinate (the configurational temperature's
    weighting, full_max=0) it reads the stiff axis' error instead."""
    rng = np.random.default_rng(3)
    cov = np.array([[1.0, 0.99], [0.99, 1.0]])
    w, v = np.linalg.eigh(cov)
    drawn = v @ np.diag(w * np.array([1.33, 1.0])) @ v.T
    x = rng.multivariate_normal([0, 0], drawn, size=(CHAINS, 4_000))
    idx = subset(4_000)
    grads = gaussian_grads(x, idx, np.linalg.inv(cov))
    e = stein_estimates(x, grads, idx)
    assert e.preconditioned
    truth = np.sqrt(np.diag(drawn))
    assert np.all(np.abs(e.spread["bulk"] - truth) < 4 * e.spread_se["bulk"])
    plain = stein_estimates(x, grads, idx, full_max=0)
    assert not plain.preconditioned
    assert np.all(plain.spread["bulk"] > 1.02)


@pytest.mark.parametrize("phi", [0.0, 0.9])
def test_standard_errors_are_calibrated_on_independent_and_autocorrelated_draws(phi):
    """Over 100 exact runs of 4 chains (independent draws, and an AR(1) with φ = 0.9, whose ESS is
    5 % of the draws), the 200 z-scores of the spread and mean statistics have sd within
    [0.75, 1.3] (the sd of 200 z-scores' sd is ≈ 0.05) and mean within ±0.3."""
    rng = np.random.default_rng(4)
    z_spread, z_mean = [], []
    idx = subset(1_000, 4)
    for _ in range(100):
        x = ar1(rng, (CHAINS, 1_000, 2), phi)
        e = stein_estimates(x, gaussian_grads(x, idx), idx)
        z_spread += list((e.spread["bulk"] - 1) / e.spread_se["bulk"])
        z_mean += list(e.location / e.location_se)
    for z in (np.asarray(z_spread), np.asarray(z_mean)):
        assert 0.75 < z.std() < 1.3, z.std()
        assert abs(z.mean()) < 0.3, z.mean()


def test_the_verdict_passes_exact_draws_and_flags_wide_ones():
    """100 exact runs: at most 5 flagged (α = 5 % at the tolerance's edge, far less inside it; 5 of
    100 has P < 0.01 for a rate ≤ 1 %). Draws 12 % too wide: flagged, and the finding names the
    spread and its size."""
    rng = np.random.default_rng(5)
    idx = subset(1_000, 4)
    alarms = 0
    for _ in range(100):
        x = rng.normal(size=(CHAINS, 1_000, 3))
        alarms += not assess_bias(stein_estimates(x, gaussian_grads(x, idx), idx)).ok
    assert alarms <= 5
    assert FALSE_ALARM == 0.05
    x = 1.12 * rng.normal(size=(CHAINS, DRAWS, 3))
    idx = subset()
    verdict = assess_bias(stein_estimates(x, gaussian_grads(x, idx), idx, names=["a", "b", "c"]))
    assert not verdict.ok
    assert verdict.spread == pytest.approx(1.12, abs=0.03)
    assert "12% too wide" in verdict.report() or "11% too wide" in verdict.report()
    assert "smaller step size" in verdict.report()


def test_the_verdict_flags_a_shifted_mean_and_names_the_coordinate():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(CHAINS, DRAWS, 3))
    x[..., 1] += 0.3
    idx = subset()
    verdict = assess_bias(stein_estimates(x, gaussian_grads(x, idx), idx, names=["a", "b", "c"]))
    assert not verdict.ok
    assert verdict.worst_mean_at == "b"
    assert verdict.findings[0].kind == "mean" and verdict.findings[0].at == "b"
    assert re.search(r"the mean of b is off by \+0\.(2[7-9]|3[0-3])", verdict.report())


def test_a_verdict_survives_its_json_round_trip():
    rng = np.random.default_rng(7)
    x = 1.3 * rng.normal(size=(CHAINS, DRAWS, 2))
    idx = subset()
    verdict = assess_bias(stein_estimates(x, gaussian_grads(x, idx), idx))
    again = Bias.from_dict(verdict.as_dict())
    assert dataclasses.asdict(again) == dataclasses.asdict(verdict)


def test_shapes_that_do_not_match_are_refused():
    x = np.zeros((2, 10, 3))
    with pytest.raises(ValueError, match="do not match"):
        stein_estimates(x, np.zeros((2, 4, 2)), np.arange(4))
    with pytest.raises(ValueError, match="2 draws per chain"):
        stein_estimates(x, np.zeros((2, 1, 3)), np.arange(1))

"""Monte Carlo z-tests for sampler output: tolerances from ESS-based standard errors."""

from __future__ import annotations

import numpy as np
import numpyro.diagnostics as diag
from scipy import stats


def z_threshold(num_tests: int, family_alpha: float = 1e-3) -> float:
    """Two-sided Bonferroni threshold: P(any |z| > threshold) ≤ family_alpha under H0."""
    return float(stats.norm.isf(family_alpha / (2 * num_tests)))


def mean_and_mcse(series: np.ndarray) -> tuple[float, float, float]:
    """Mean of a (chains, draws) series, its Monte Carlo standard error sd/√ESS, and the ESS."""
    series = np.asarray(series, np.float64)
    ess = float(diag.effective_sample_size(series))
    return float(series.mean()), float(series.std() / np.sqrt(ess)), ess


def moment_z_scores(
    draws: np.ndarray, mean: np.ndarray, cov: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """z-scores of the first and second moments of ``draws`` (chains, draws, d).

    Means: (x̄_i − μ_i)/MCSE. Covariances: the series (x_i − μ_i)(x_j − μ_j), whose expectation is
    Σ_ij under the target, against Σ_ij (upper triangle). Returns (z_mean, z_cov, min ESS).
    """
    d = draws.shape[-1]
    z_mean, z_cov, ess_all = [], [], []
    centred = draws - mean
    for i in range(d):
        m, se, ess = mean_and_mcse(draws[..., i])
        z_mean.append((m - mean[i]) / se)
        ess_all.append(ess)
        for j in range(i, d):
            m, se, ess = mean_and_mcse(centred[..., i] * centred[..., j])
            z_cov.append((m - cov[i, j]) / se)
            ess_all.append(ess)
    return np.array(z_mean), np.array(z_cov), min(ess_all)


def assert_moments(
    draws: np.ndarray, mean: np.ndarray, cov: np.ndarray, min_ess: float = 200.0
) -> None:
    """Assert the draws match N(mean, cov)'s first two moments within Monte Carlo error."""
    z_mean, z_cov, ess = moment_z_scores(np.asarray(draws), np.asarray(mean), np.asarray(cov))
    assert ess >= min_ess, f"too few effective samples ({ess:.0f} < {min_ess}) for a sound test"
    threshold = z_threshold(len(z_mean) + len(z_cov))
    worst_mean, worst_cov = np.max(np.abs(z_mean)), np.max(np.abs(z_cov))
    assert worst_mean < threshold, f"mean z-scores {np.round(z_mean, 2)} exceed {threshold:.2f}"
    assert worst_cov < threshold, f"covariance z-scores {np.round(z_cov, 2)} exceed {threshold:.2f}"


def arviz_per_entry(fn, x: np.ndarray, method: str) -> np.ndarray:
    """ArviZ's own value (``fn`` = ``arviz.ess`` or ``arviz.rhat`` with ``method``) of every entry
    of draws ``(chains, draws, k)``, one ``(chain, draw)`` array at a time: the reference the
    vectorised diagnostics are held to."""
    with np.errstate(all="ignore"):
        return np.array([fn(x[:, :, j], method=method) for j in range(x.shape[2])])

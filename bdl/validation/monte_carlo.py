"""Monte Carlo error of the comparisons with NUTS: how far an exact sampler's numbers stray from
the reference's by chance, given both runs' effective sample sizes.

Each gate of :mod:`bdl.validation.compare` allows a systematic tolerance (discretisation and
minibatch bias a correct sampler may have) plus the Monte Carlo error computed here, set so that
two samplers of the same distribution fail the gate with probability at most :data:`FALSE_FAIL`.
The derivations are on docs/validation.md, *How the thresholds account for Monte Carlo error*;
``scripts/validation_gates.py`` measures the false-fail rate and the power.

* :func:`mean_and_errors`: per column, the mean, sd, the ESS of the mean (split chains,
  Geyer 1992, ``arviz.ess(method="mean")``), the MCSE of the mean sd/√ESS, and the standard
  error of log sd by the delta method, √(Var[(x − m)²]/ESS_sq)/(2sd²) with ESS_sq the ESS of
  the squared deviations (so heavy tails and the chains' autocorrelation of x² both count).
* :func:`bonferroni_z`: the two-sided normal quantile for the largest of ``count`` errors.
* :func:`effective_subsample`: the effective size of ``used`` draws taken at random from a run
  of ``total`` draws with ESS ``ess``.
* :func:`energy_distance_bound`: the upper quantile of the energy distance between two samples
  of one distribution.
* :func:`harmonic_ess`: one ESS for many columns, the harmonic mean of theirs.
* :func:`ess_fraction`: ESS/draws of the most variable columns, for function-space summaries.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtri

from bdl.diagnostics import effective_sample_size

#: the probability that an exact sampler fails one gate (two samplers of one distribution)
FALSE_FAIL = 0.005
#: draws of the reference used to estimate the energy distance's scale
ENERGY_SCALE_DRAWS = 1_000
#: columns whose ESS stands for all in :func:`ess_fraction`
ESS_COLUMNS = 32


def mean_and_errors(x: np.ndarray) -> dict[str, np.ndarray]:
    """For draws ``(chain, draw, k)``: per column ``mean``, ``sd``, ``ess`` (ESS of the mean),
    ``mcse`` = sd/√ess and ``log_sd_se``, the standard error of log sd."""
    x = np.asarray(x, np.float64)
    flat = x.reshape(-1, x.shape[-1])
    mean, sd = flat.mean(0), flat.std(0)
    ess = _ess(x)
    squares = (x - mean) ** 2
    ess_sq = _ess(squares)
    var_sq = squares.reshape(-1, x.shape[-1]).var(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_sd_se = np.sqrt(var_sq / ess_sq) / (2.0 * sd**2)
    log_sd_se = np.where(sd > 0, log_sd_se, 0.0)
    return {
        "mean": mean,
        "sd": sd,
        "ess": ess,
        "mcse": sd / np.sqrt(ess),
        "log_sd_se": log_sd_se,
    }


def _ess(x: np.ndarray) -> np.ndarray:
    """ESS of the mean per column of ``(chain, draw, k)`` draws, at least 1 (a single chain of
    fewer than 4 draws: the number of draws)."""
    if x.shape[1] < 4:
        return np.full(x.shape[-1], float(x.shape[0] * x.shape[1]))
    ess = effective_sample_size(x, split=True)
    ess = np.where(np.isfinite(ess), ess, float(x.shape[0] * x.shape[1]))
    return np.maximum(ess, 1.0)


def harmonic_ess(ess: np.ndarray) -> float:
    """The harmonic mean of per-column ESSs: 1/ESS averaged, as the Monte Carlo variances of a
    sum over standardised columns average."""
    return float(len(ess) / np.sum(1.0 / np.asarray(ess, np.float64)))


def bonferroni_z(count: int, alpha: float = FALSE_FAIL) -> float:
    """z such that the largest of ``count`` standard normal errors exceeds z in absolute value
    with probability at most ``alpha``: Φ⁻¹(1 − α/(2·count))."""
    return float(ndtri(1.0 - alpha / (2.0 * max(count, 1))))


def normal_quantile(alpha: float = FALSE_FAIL) -> float:
    """Φ⁻¹(1 − α/2): the two-sided quantile of one standard normal error."""
    return float(ndtri(1.0 - alpha / 2.0))


def effective_subsample(ess: float, used: int, total: int) -> float:
    """The effective size of ``used`` of ``total`` draws chosen at random from a run whose ESS is
    ``ess``: the variance of their mean is σ²(1/ess + 1/used − 1/total) (the run's error plus
    the choice's, sampling without replacement)."""
    return 1.0 / (1.0 / max(ess, 1.0) + 1.0 / used - 1.0 / total)


def energy_distance_bound(
    reference: np.ndarray,
    effective: tuple[float, float],
    used: tuple[int, int],
    alpha: float = FALSE_FAIL,
) -> float:
    """The upper ``alpha`` quantile of the unbiased energy distance between ``used = (m, n)``
    draws of one distribution whose effective sizes are ``effective = (m_e, n_e)``:

        (1/m_e + 1/n_e)(D + V(q − 1)) − (1/m + 1/n)·D,

    D = E‖X − X′‖ and V² = E[k̃(X, X′)²] (the distance variance, k̃ the doubly centred distance)
    estimated on up to :data:`ENERGY_SCALE_DRAWS` rows of ``reference`` (already standardised),
    q the 1 − α quantile of χ²₁ (docs/validation.md derives it)."""
    rows = reference[:: max(1, len(reference) // ENERGY_SCALE_DRAWS)][:ENERGY_SCALE_DRAWS]
    norms = (rows**2).sum(1)
    a = np.sqrt(np.maximum(norms[:, None] + norms[None, :] - 2.0 * rows @ rows.T, 0.0))
    np.fill_diagonal(a, 0.0)
    size = len(rows)
    if size < 2:
        return math.inf
    d = a.sum() / (size * (size - 1))
    centred = a - a.mean(0) - a.mean(1)[:, None] + a.mean()
    v = math.sqrt(float(np.mean(centred**2)))
    q = float(ndtri(1.0 - alpha / 2.0)) ** 2  # χ²₁ is the square of a standard normal
    (m_e, n_e), (m, n) = effective, used
    return (1 / m_e + 1 / n_e) * (d + v * (q - 1.0)) - (1 / m + 1 / n) * d


def ess_fraction(x: np.ndarray, columns: int = ESS_COLUMNS) -> float:
    """ESS/draws of ``(chain, draw, k)`` values: the median over the ``columns`` columns of
    largest variance (those carry most of a summary's Monte Carlo error), at most 1."""
    x = np.asarray(x, np.float64).reshape(x.shape[0], x.shape[1], -1)
    variance = x.reshape(-1, x.shape[-1]).var(0)
    chosen = np.argsort(variance)[::-1][:columns]
    chosen = chosen[variance[chosen] > 0]
    if chosen.size == 0:
        return 1.0
    ess = _ess(x[..., chosen])
    return float(min(1.0, np.median(ess) / (x.shape[0] * x.shape[1])))

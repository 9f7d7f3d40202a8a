"""Rank-normalised R̂, bulk ESS and tail ESS of many quantities at once, as ArviZ computes them.

:func:`rank_diagnostics` returns, for draws ``(chains, draws, *event)``, the three numbers of
Vehtari et al. (2021) per event entry:

* rank R̂ = max(bulk R̂, tail R̂): split R̂ (Gelman et al. 2013) of the split chains'
  rank-normalised draws z = Φ⁻¹((r − 3/8)/(S + 1/4)) (r the average rank among all S draws,
  Blom 1958), and of the rank-normalised folded draws |x − median x|;
* bulk ESS: the ESS of the split, rank-normalised draws;
* tail ESS: the smaller ESS of the indicators I(x ≤ q₀.₀₅) and I(x ≤ q₀.₉₅) (split chains).

An ESS is Geyer's (1992) initial-monotone-sequence estimate over chains,
S/τ̂ with τ̂ = −1 + 2Σ ρ̂_t, capped below at 1/log₁₀ S as ArviZ caps it.

The arithmetic is ArviZ's (``arviz.rhat(method="rank")``, ``arviz.ess(method="bulk")`` and
``method="tail"``; :mod:`bdl.diagnostics.chains` calls those), written in NumPy over all entries
at once: ArviZ loops over entries in Python and imports xarray and pandas, which costs about a
millisecond per entry and a second at first use, too much for a check after every
:func:`bdl.sample`. ``tests/test_diagnostics.py`` holds the two to agreement at rounding level.

Differences from ArviZ, both deliberate: ``single_chain=True`` computes R̂ of one chain from
its two halves (the split R̂ of Stan and the posterior package), where ArviZ returns NaN; and an
entry with any non-finite draw gets NaN throughout (ArviZ ranks ±inf).

References: Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021), "Rank-normalization,
folding, and localization: an improved R̂ for assessing convergence of MCMC", Bayesian Analysis
16(2); Geyer (1992), "Practical Markov chain Monte Carlo", Statistical Science 7(4).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.fft import next_fast_len
from scipy.special import ndtri

__all__ = ["MIN_DRAWS", "rank_diagnostics"]

#: fewest draws per chain for any of the three (ArviZ's minimum)
MIN_DRAWS = 4


def rank_diagnostics(
    x: Any, *, single_chain: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rank R̂, bulk ESS, tail ESS) of draws ``(chains, draws, *event)``, each shaped ``event``.

    NaN where a value is undefined: fewer than :data:`MIN_DRAWS` draws per chain, a non-finite
    draw, and R̂ of a single chain unless ``single_chain``. A constant entry has ESS equal to
    the number of draws and R̂ NaN.
    """
    values = np.asarray(x, dtype=np.float64)
    if values.ndim < 2:
        raise ValueError(
            f"expected draws shaped (chains, draws, ...); got an array of shape {values.shape}."
        )
    chains, draws, event = values.shape[0], values.shape[1], values.shape[2:]
    # entries first, (k, chains, draws): every reduction below runs over contiguous memory
    values = np.ascontiguousarray(np.moveaxis(values.reshape(chains, draws, -1), -1, 0))
    k = values.shape[0]
    rhat, bulk, tail = np.full(k, np.nan), np.full(k, np.nan), np.full(k, np.nan)
    finite = np.isfinite(values).all(axis=(1, 2))
    if draws >= MIN_DRAWS and finite.any():
        v = values[finite]
        split = _split(v)
        z = _z_scale(split)
        if chains >= 2 or single_chain:
            median = np.median(split.reshape(len(v), -1), axis=1)[:, None, None]
            rhat[finite] = np.maximum(_rhat(z), _rhat(_z_scale(np.abs(split - median))))
        bulk[finite] = _ess(z)
        low, high = np.quantile(v.reshape(len(v), -1), [0.05, 0.95], axis=1)
        tail[finite] = np.minimum(
            _ess(_split((v <= low[:, None, None]).astype(np.float64))),
            _ess(_split((v <= high[:, None, None]).astype(np.float64))),
        )
    return rhat.reshape(event), bulk.reshape(event), tail.reshape(event)


def _split(x: np.ndarray) -> np.ndarray:
    """Each chain's first and last ⌊N/2⌋ draws as two chains: ``(k, 2C, N//2)``."""
    half = x.shape[2] // 2
    return np.concatenate([x[:, :, :half], x[:, :, x.shape[2] - half :]], axis=1)


def _z_scale(x: np.ndarray) -> np.ndarray:
    """Φ⁻¹ of the Blom-transformed average ranks among all draws of each entry."""
    k, m, n = x.shape
    ranks = _average_ranks(x.reshape(k, m * n))
    return ndtri((ranks - 3 / 8) / (m * n + 1 / 4)).reshape(k, m, n)


def _average_ranks(a: np.ndarray) -> np.ndarray:
    """Ranks 1..S along each row, ties given their average rank (``rankdata('average')``)."""
    size = a.shape[1]
    order = np.argsort(a, axis=1)
    s = np.take_along_axis(a, order, axis=1)
    ranks = np.empty(s.shape)
    np.put_along_axis(ranks, order, np.broadcast_to(np.arange(1.0, size + 1), s.shape), axis=1)
    tied = (s[:, 1:] == s[:, :-1]).any(axis=1)
    if tied.any():  # rare for continuous draws: average the ranks of equal values
        ranks[tied] = _tied_ranks(s[tied], order[tied])
    return ranks


def _tied_ranks(s: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Average ranks of rows given sorted (``s``) and the sorting permutation (``order``)."""
    size = s.shape[1]
    index = np.broadcast_to(np.arange(size), s.shape)
    first = np.ones(s.shape, bool)
    first[:, 1:] = s[:, 1:] != s[:, :-1]
    last = np.ones(s.shape, bool)
    last[:, :-1] = first[:, 1:]
    start = np.maximum.accumulate(np.where(first, index, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, index, size - 1)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty(s.shape)
    np.put_along_axis(ranks, order, (start + end) / 2 + 1, axis=1)
    return ranks


def _rhat(x: np.ndarray) -> np.ndarray:
    """R̂ = √((B/W + n − 1)/n) of chains ``(k, M, n)``: B/n the variance of the chain means, W
    the mean within-chain variance."""
    n = x.shape[2]
    between = n * np.var(x.mean(axis=2), axis=1, ddof=1)
    within = np.mean(np.var(x, axis=2, ddof=1), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def _ess(x: np.ndarray) -> np.ndarray:
    """Geyer's initial-monotone-sequence ESS over chains ``(k, M, n)``, per entry (ArviZ's
    ``_ess``, vectorised over entries)."""
    k, m, n = x.shape
    size = m * n
    out = np.empty(k)
    constant = (x.max(axis=(1, 2)) - x.min(axis=(1, 2))) < np.finfo(np.float64).resolution
    out[constant] = size
    if constant.all():
        return out
    x = x[~constant]
    centred = x - x.mean(axis=2, keepdims=True)
    length = next_fast_len(2 * n)
    spectrum = np.fft.rfft(centred, n=length, axis=2)
    acov = np.fft.irfft(spectrum * np.conjugate(spectrum), n=length, axis=2)[..., :n] / n
    mean_var = acov[:, :, 0].mean(axis=1) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if m > 1:
        var_plus = var_plus + np.var(x.mean(axis=2), axis=1, ddof=1)
    acov = acov.mean(axis=1).T  # (n, k'): lag first, so that a lag is one contiguous row
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.zeros_like(acov)
        rho[0] = 1.0
        even = np.ones(acov.shape[1])
        odd = 1.0 - (mean_var - acov[1]) / var_plus
        rho[1] = odd
        # Geyer's initial positive sequence: pairs of lags while their sum stays positive
        t, stop = 1, np.ones(acov.shape[1], int)
        active = (even + odd > 0) & (t < n - 3)
        while t < n - 3 and active.any():
            e = 1.0 - (mean_var - acov[t + 1]) / var_plus
            o = 1.0 - (mean_var - acov[t + 2]) / var_plus
            even, odd = np.where(active, e, even), np.where(active, o, odd)
            take = active & (e + o >= 0)
            rho[t + 1] = np.where(take, e, rho[t + 1])
            rho[t + 2] = np.where(take, o, rho[t + 2])
            t += 2
            stop = np.where(active, t, stop)
            active &= even + odd > 0
        max_t = stop - 2
        columns = np.arange(acov.shape[1])
        rho[max_t + 1, columns] = np.where(even > 0, even, rho[max_t + 1, columns])
        # Geyer's initial monotone sequence: no pair larger than the one before it
        t = 1
        while t <= max_t.max() - 2:
            before = rho[t - 1] + rho[t]
            lower = (t <= max_t - 2) & (rho[t + 1] + rho[t + 2] > before)
            rho[t + 1] = np.where(lower, before / 2, rho[t + 1])
            rho[t + 2] = np.where(lower, before / 2, rho[t + 2])
            t += 2
        lags = np.arange(n)[:, None]
        tau = (
            -1.0
            + 2.0 * np.where(lags <= max_t, rho, 0.0).sum(axis=0)
            + np.where(lags == max_t + 1, rho, 0.0).sum(axis=0)
        )
        tau = np.maximum(tau, 1 / np.log10(size))
        ess = size / tau
    ess[np.isnan(rho).any(axis=0)] = np.nan
    out[~constant] = ess
    return out

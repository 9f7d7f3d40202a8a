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

:func:`ess` and :func:`rhat` give each of ArviZ's methods on its own (``arviz.ess`` identity,
mean, bulk, tail; ``arviz.rhat`` split, z_scale, folded, rank); :mod:`bdl.diagnostics.chains`
wraps them one function per method. :func:`within_chains` replaces each chain's draws by their
normal scores within that chain, for chains judged each within its own mode (a network's:
:mod:`bdl.sampling.verdict.convergence_check`). The arithmetic is ArviZ's, written in NumPy over all
entries at once: ArviZ loops over entries in Python and imports xarray and pandas, which costs
about a millisecond per entry and a second and a half at first use, too much for a check after
every :func:`bdl.sample`. ``tests/test_diagnostics.py`` and ``tests/test_convergence_check.py``
hold them to ArviZ's own values at rounding level.

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

__all__ = [
    "ESS_METHODS",
    "MIN_DRAWS",
    "RHAT_METHODS",
    "ess",
    "rank_diagnostics",
    "rhat",
    "within_chains",
]

#: fewest draws per chain for any of the three (ArviZ's minimum)
MIN_DRAWS = 4
#: the ESS methods of :func:`ess`, named as ``arviz.ess`` names them
ESS_METHODS = ("identity", "mean", "bulk", "tail")
#: the R̂ methods of :func:`rhat`, named as ``arviz.rhat`` names them
RHAT_METHODS = ("split", "z_scale", "folded", "rank")


def rank_diagnostics(
    x: Any, *, single_chain: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rank R̂, bulk ESS, tail ESS) of draws ``(chains, draws, *event)``, each shaped ``event``.

    NaN where a value is undefined: fewer than :data:`MIN_DRAWS` draws per chain, a non-finite
    draw, and R̂ of a single chain unless ``single_chain``. A constant entry has ESS equal to
    the number of draws and R̂ NaN.
    """
    values, event = _entries(x)

    def all_three(v: np.ndarray) -> np.ndarray:
        split = _split(v)
        z = _z_scale(split)  # shared by the bulk R̂ and the bulk ESS
        return np.stack([_rank_rhat(split, z), _ess(z), _tail_ess(v, (0.05, 0.95))])

    rank, bulk, tail = _per_entry(values, all_three, 1, rows=3)
    if values.shape[1] < 2 and not single_chain:
        rank[:] = np.nan
    return rank.reshape(event), bulk.reshape(event), tail.reshape(event)


def ess(
    x: Any, method: str = "bulk", prob: float | tuple[float, float] | None = None
) -> np.ndarray:
    """The ESS of every entry of draws ``(chains, draws, *event)``, shaped ``event``: ``arviz.ess``
    with ``method`` (:data:`ESS_METHODS`), over all entries at once.

    ``identity``: Geyer's ESS of the chains as given; ``mean``: of the split chains; ``bulk``: of
    the split, rank-normalised chains; ``tail``: the smaller ESS of the indicators I(x ≤ q_p) for
    p in ``prob`` (default (0.05, 0.95); a float p means (p, 1 − p)), split chains. NaN with fewer
    than :data:`MIN_DRAWS` draws per chain or a non-finite draw; a constant entry has ESS equal
    to the number of draws used.
    """
    values, event = _entries(x)
    if method == "tail":
        pair = (0.05, 0.95) if prob is None else prob
        pair = (pair, 1.0 - pair) if isinstance(pair, float | int) else tuple(pair)
        fn = lambda v: _tail_ess(v, pair)  # noqa: E731
    else:
        fn = {
            "identity": _ess,
            "mean": lambda v: _ess(_split(v)),
            "bulk": lambda v: _ess(_z_scale(_split(v))),
        }[_checked(method, ESS_METHODS, "ess")]
    return _per_entry(values, fn, 1).reshape(event)


def rhat(x: Any, method: str = "rank") -> np.ndarray:
    """R̂ of every entry of draws ``(chains, draws, *event)``, shaped ``event``: ``arviz.rhat``
    with ``method`` (:data:`RHAT_METHODS`), over all entries at once.

    All four use split chains: ``split`` the draws themselves, ``z_scale`` their rank-normalised
    values, ``folded`` the rank-normalised |x − median x|, ``rank`` the larger of the last two.
    NaN with fewer than 2 chains or :data:`MIN_DRAWS` draws per chain, a non-finite draw, or a
    constant entry.
    """
    values, event = _entries(x)
    fn = {
        "split": lambda v: _rhat(_split(v)),
        "z_scale": lambda v: _rhat(_z_scale(_split(v))),
        "folded": lambda v: _rhat(_z_scale(_folded(_split(v)))),
        "rank": lambda v: _rank_rhat(_split(v)),
    }[_checked(method, RHAT_METHODS, "rhat")]
    return _per_entry(values, fn, 2).reshape(event)


def within_chains(x: Any) -> np.ndarray:
    """Draws ``(chains, draws, *event)`` replaced by their normal scores within each chain:
    z = Φ⁻¹((r − 3/8)/(n + 1/4)), r the average rank of a draw among its chain's n draws of the
    same entry (Blom 1958).

    Every chain then has the same marginal, so R̂ and the ESS of the scores measure how each
    chain moves through its own distribution and nothing else: the split R̂ sees a chain whose
    halves differ in location or in scale, the ESS one that moves slowly. That is the question
    for chains that sit in different modes of equal worth (a network's), where the chains'
    distributions differ in location and in shape. Centring each chain at its mean instead
    leaves the shapes: for a skewed quantity, as a log predictive density piled up below 0, a
    Monte Carlo difference between two chains' means moves the pile across the pooled
    quantiles, and the tail ESS reads a chain that mixes well as one that barely moves.

    Args:
        x: draws ``(chains, draws, ...)``.

    Returns:
        The scores, float64, shaped like ``x``; an entry of a chain with a non-finite draw keeps
            that chain's values as they are, so that a check still sees them.
    """
    values = np.asarray(x, dtype=np.float64)
    if values.ndim < 2:
        raise ValueError(
            f"expected draws shaped (chains, draws, ...); got an array of shape {values.shape}. "
            "Add a chain axis with x[None] for a single chain."
        )
    chains, draws = values.shape[:2]
    rows = np.moveaxis(values.reshape(chains, draws, -1), 1, -1).reshape(-1, draws)
    finite = np.isfinite(rows).all(axis=1)
    scores = rows.copy()
    if draws and finite.any():
        scores[finite] = _z_scale(rows[finite][:, None, :])[:, 0]  # each row its own "chain"
    scores = np.moveaxis(scores.reshape(chains, -1, draws), -1, 1)
    return scores.reshape(values.shape)


def _checked(method: str, methods: tuple[str, ...], what: str) -> str:
    if method not in methods:
        raise ValueError(f"{what}: method must be one of {list(methods)}; got {method!r}.")
    return method


def _entries(x: Any) -> tuple[np.ndarray, tuple[int, ...]]:
    """Draws as float64 ``(k, chains, draws)`` with the event shape: entries first, so that every
    reduction below runs over contiguous memory."""
    values = np.asarray(x, dtype=np.float64)
    if values.ndim < 2:
        raise ValueError(
            f"expected draws shaped (chains, draws, ...); got an array of shape {values.shape}. "
            "Add a chain axis with x[None] for a single chain."
        )
    chains, draws, event = values.shape[0], values.shape[1], values.shape[2:]
    return np.ascontiguousarray(np.moveaxis(values.reshape(chains, draws, -1), -1, 0)), event


def _per_entry(values: np.ndarray, fn: Any, min_chains: int, rows: int | None = None) -> np.ndarray:
    """``fn`` of the entries whose draws are all finite, NaN elsewhere and wherever there are
    fewer than ``min_chains`` chains or :data:`MIN_DRAWS` draws; ``rows`` values per entry
    (shape ``(rows, k)``) where ``fn`` returns several."""
    out = np.full(values.shape[:1] if rows is None else (rows, values.shape[0]), np.nan)
    finite = np.isfinite(values).all(axis=(1, 2))
    if values.shape[1] >= min_chains and values.shape[2] >= MIN_DRAWS and finite.any():
        with np.errstate(divide="ignore", invalid="ignore"):
            out[..., finite] = fn(values[finite])
    return out


def _rank_rhat(split: np.ndarray, z: np.ndarray | None = None) -> np.ndarray:
    """max(bulk R̂, tail R̂) of split chains ``(k, M, n)``; ``z``: their z-scores if known."""
    z = _z_scale(split) if z is None else z
    return np.maximum(_rhat(z), _rhat(_z_scale(_folded(split))))


def _folded(x: np.ndarray) -> np.ndarray:
    """|x − median x|, the median over all draws of each entry."""
    return np.abs(x - np.median(x.reshape(len(x), -1), axis=1)[:, None, None])


def _tail_ess(v: np.ndarray, prob: tuple[float, float]) -> np.ndarray:
    """The smaller ESS of I(x ≤ q_p) over the two levels of ``prob`` (split chains)."""
    low, high = (_quantile(v.reshape(len(v), -1), p)[:, None, None] for p in prob)
    return np.minimum(
        _ess(_split((v <= low).astype(np.float64))), _ess(_split((v <= high).astype(np.float64)))
    )


def _quantile(rows: np.ndarray, p: float) -> np.ndarray:
    """The type-7 quantile of each row, with the arithmetic of ``scipy.stats.mstats.mquantiles(
    alphap=1, betap=1)`` (ArviZ's), so that I(x ≤ q) ties exactly as there."""
    s = np.sort(rows, axis=1)
    n = s.shape[1]
    aleph = n * p + (1.0 - p)
    k = int(np.floor(np.clip(aleph, 1, n - 1)))
    gamma = float(np.clip(aleph - k, 0.0, 1.0))
    return (1.0 - gamma) * s[:, k - 1] + gamma * s[:, k]


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
        rho, max_t = _geyer(acov, mean_var, var_plus, n)
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


def _geyer(
    acov: np.ndarray, mean_var: np.ndarray, var_plus: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Geyer's truncated autocorrelations ``(n, k)`` of autocovariances ``acov`` ``(n, k)`` and the
    last lag summed in full per entry: ArviZ's initial positive sequence (pairs of lags while
    their sum stays positive) and initial monotone sequence (no pair larger than the one before
    it), both loops of ArviZ's ``_ess`` done at once over lags: the same values bitwise."""
    r = 1.0 - (mean_var - acov) / var_plus  # ρ̂ at every lag, as ArviZ computes it lag by lag
    k = acov.shape[1]
    rho = np.zeros_like(acov)
    rho[0] = 1.0
    rho[1] = r[1]
    starts = np.arange(1, n - 3, 2)  # ArviZ's t: the pair (t + 1, t + 2) read at each step
    pairs = r[starts + 1] + r[starts + 2]  # (steps, k)
    # step j runs while every pair sum before it (the first: 1 + ρ̂₁) is positive
    before = np.concatenate([(1.0 + r[1])[None], pairs])[: starts.size]
    steps = np.cumprod(before > 0, axis=0).sum(axis=0)  # steps run per entry
    take = (np.arange(1, starts.size + 1)[:, None] <= steps) & (pairs >= 0)
    rho[starts + 1] = np.where(take, r[starts + 1], 0.0)
    rho[starts + 2] = np.where(take, r[starts + 2], 0.0)
    max_t = 2 * steps - 1
    columns = np.arange(k)
    even = np.where(steps > 0, r[2 * steps, columns], 1.0)
    rho[max_t + 1, columns] = np.where(even > 0, even, rho[max_t + 1, columns])
    # monotone: each pair at most the smallest before it (pairs 1 … steps − 1)
    half = n // 2
    sums = rho[0 : 2 * half : 2] + rho[1 : 2 * half : 2]
    smallest = np.minimum.accumulate(sums, axis=0)
    index = np.arange(half)[:, None]
    lower = (index >= 1) & (index <= steps - 1) & (sums > smallest)
    rho[0 : 2 * half : 2] = np.where(lower, smallest / 2, rho[0 : 2 * half : 2])
    rho[1 : 2 * half : 2] = np.where(lower, smallest / 2, rho[1 : 2 * half : 2])
    return rho, max_t

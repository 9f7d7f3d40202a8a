"""Effective sample size and R̂ of ``(chains, draws, *event)`` draws, computed by ArviZ.

Each function converts its input to a float64 NumPy array, hands it to :func:`arviz.ess` or
:func:`arviz.rhat` and returns one value per event entry (shape ``event``; a 0-d array for
``(chains, draws)``). They run on the host and are not jittable; ArviZ is imported on first use.

* :func:`effective_sample_size` — Geyer ESS of the chains as given, ``ess(method="identity")``;
  with ``split=True`` of split chains, ``ess(method="mean")``.
* :func:`ess_bulk` — ESS of split, rank-normalised draws, ``ess(method="bulk")``.
* :func:`ess_tail` — the smaller ESS of the 5 % and 95 % quantile indicators,
  ``ess(method="tail")``.
* :func:`split_rhat` — split R̂, ``rhat(method="split")``.
* :func:`bulk_rhat`, :func:`tail_rhat` — split R̂ of rank-normalised draws, and of rank-normalised
  folded draws |x − median x|, ``rhat(method="z_scale")`` and ``rhat(method="folded")``.
* :func:`rank_rhat` — max(bulk R̂, tail R̂), ``rhat(method="rank")``.

References: Geyer (1992), "Practical Markov chain Monte Carlo"; Vehtari, Gelman, Simpson,
Carpenter & Bürkner (2021), "Rank-normalization, folding, and localization: an improved R̂ for
assessing convergence of MCMC", Bayesian Analysis 16(2), who suggest trusting draws only when
the rank R̂ is below 1.01.

ArviZ's conventions apply: fewer than 4 draws per chain, or any NaN draw, gives NaN; R̂ needs at
least 2 chains (NaN otherwise); a constant parameter has ESS equal to the number of draws used
and R̂ NaN.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

__all__ = [
    "bulk_rhat",
    "effective_sample_size",
    "ess_bulk",
    "ess_tail",
    "rank_rhat",
    "split_rhat",
    "tail_rhat",
]


def _per_event(function: str, x: Any, **kwargs: Any) -> np.ndarray:
    """``arviz.<function>`` of draws ``(chains, draws, *event)``, one float64 value per entry."""
    import arviz as az

    values = np.asarray(x, dtype=np.float64)
    if values.ndim < 2:
        raise ValueError(
            f"expected draws shaped (chains, draws, ...); got an array of shape {values.shape}. "
            "Add a chain axis with x[None] for a single chain."
        )
    with warnings.catch_warnings():  # the axes are (chains, draws) by contract, even if C > N
        warnings.filterwarnings("ignore", message="More chains", category=UserWarning)
        dataset = az.convert_to_dataset(values)
    result = getattr(az, function)(dataset, **kwargs)
    return np.asarray(result["x"].values, dtype=np.float64)


def effective_sample_size(x: Any, *, split: bool = False) -> np.ndarray:
    """Multi-chain Geyer ESS (initial monotone sequence) of ``(chains, draws, *event)`` draws.

    Args:
        x: draws shaped ``(chains, draws, *event)``.
        split: compute on split chains (``arviz.ess(method="mean")``, which detects trends)
            instead of the chains as given (``method="identity"``).

    Returns:
        ESS per event entry, shape ``event``.
    """
    return _per_event("ess", x, method="mean" if split else "identity")


def ess_bulk(x: Any) -> np.ndarray:
    """Bulk ESS: the ESS of split, rank-normalised draws (``arviz.ess(method="bulk")``).

    Args:
        x: draws ``(chains, draws)`` or ``(chains, draws, ...)`` (one value per quantity after the
            two leading axes).

    Returns:
        The bulk ESS of each quantity.
    """
    return _per_event("ess", x, method="bulk")


def ess_tail(x: Any, prob: float | tuple[float, float] | None = None) -> np.ndarray:
    """Tail ESS: the smaller of the quantile ESS at ``prob`` (default (0.05, 0.95); a float p
    means (p, 1 − p)), ``arviz.ess(method="tail")``.

    Args:
        x: draws ``(chains, draws)`` or ``(chains, draws, ...)`` (one value per quantity after the
            two leading axes).
        prob: the quantiles' levels, a pair or a float p for (p, 1 − p).

    Returns:
        The tail ESS of each quantity.
    """
    return _per_event("ess", x, method="tail", prob=prob)


def split_rhat(x: Any) -> np.ndarray:
    """Split R̂ (Gelman et al. 2013), ``arviz.rhat(method="split")``.

    Args:
        x: draws ``(chains, draws)`` or ``(chains, draws, ...)`` (one value per quantity after the
            two leading axes).

    Returns:
        R̂ of each quantity.
    """
    return _per_event("rhat", x, method="split")


def bulk_rhat(x: Any) -> np.ndarray:
    """Split R̂ of rank-normalised draws, ``arviz.rhat(method="z_scale")``: location shifts.

    Args:
        x: draws ``(chains, draws)`` or ``(chains, draws, ...)`` (one value per quantity after the
            two leading axes).

    Returns:
        R̂ of each quantity.
    """
    return _per_event("rhat", x, method="z_scale")


def tail_rhat(x: Any) -> np.ndarray:
    """Split R̂ of rank-normalised folded draws |x − median x|, ``arviz.rhat(method="folded")``:
    differences in scale, which the bulk R̂ misses.

    Args:
        x: draws ``(chains, draws)`` or ``(chains, draws, ...)`` (one value per quantity after the
            two leading axes).

    Returns:
        R̂ of each quantity.
    """
    return _per_event("rhat", x, method="folded")


def rank_rhat(x: Any) -> np.ndarray:
    """max(bulk R̂, tail R̂), the R̂ of Vehtari et al. (2021), ``arviz.rhat(method="rank")``.

    Args:
        x: draws ``(chains, draws)`` or ``(chains, draws, ...)`` (one value per quantity after the
            two leading axes).

    Returns:
        R̂ of each quantity.
    """
    return _per_event("rhat", x, method="rank")

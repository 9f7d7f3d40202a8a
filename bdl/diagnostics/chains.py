"""Effective sample size and R̂ of ``(chains, draws, *event)`` draws, as ArviZ computes them.

Each function returns one float64 value per event entry (shape ``event``; a 0-d array for
``(chains, draws)``), with the arithmetic of the ``arviz.ess`` or ``arviz.rhat`` method it names,
computed over all entries at once in NumPy (:mod:`bdl.diagnostics.rank_normalised`; ArviZ loops
over entries in Python, about a millisecond each, and takes a second and a half to import).
``tests/test_diagnostics.py`` holds every function to ArviZ's value at rounding level. They run
on the host and are not jittable.

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
and R̂ NaN. One difference: an entry with an infinite draw gets NaN (ArviZ ranks ±inf).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from bdl.diagnostics.rank_normalised import ess, rhat

__all__ = [
    "RHat",
    "bulk_rhat",
    "effective_sample_size",
    "ess_bulk",
    "ess_tail",
    "rank_rhat",
    "split_rhat",
    "tail_rhat",
]


# Each function below is one method of ess (bdl.diagnostics.rank_normalised), which does the
# arithmetic; the R̂ methods are instances of RHat, whose call is documented once.
def effective_sample_size(x: Any, *, split: bool = False) -> np.ndarray:
    """Multi-chain Geyer ESS (initial monotone sequence) of ``(chains, draws, *event)`` draws.

    Args:
        x: draws shaped ``(chains, draws, *event)``.
        split: compute on split chains (``arviz.ess(method="mean")``, which detects trends)
            instead of the chains as given (``method="identity"``).

    Returns:
        ESS per event entry, shape ``event``.
    """
    return ess(x, "mean" if split else "identity")


def ess_bulk(x: Any) -> np.ndarray:
    """Bulk ESS: the ESS of split, rank-normalised draws (``arviz.ess(method="bulk")``).

    Args:
        x: draws ``(chains, draws)`` or ``(chains, draws, ...)`` (one value per quantity after the
            two leading axes).

    Returns:
        The bulk ESS of each quantity.
    """
    return ess(x, "bulk")


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
    return ess(x, "tail", prob)


@dataclasses.dataclass(frozen=True)
class RHat:
    """R̂ under one ``arviz.rhat`` method: :func:`split_rhat`, :func:`bulk_rhat`,
    :func:`tail_rhat` and :func:`rank_rhat` are instances, so their one call is documented once.

    Attributes:
        method: the ``arviz.rhat`` method (``"split"``, ``"z_scale"``, ``"folded"``, ``"rank"``).
    """

    method: str

    def __call__(self, x: Any) -> np.ndarray:
        """R̂ of each quantity of the draws.

        Args:
            x: draws ``(chains, draws)`` or ``(chains, draws, ...)`` (one value per quantity after
                the two leading axes).

        Returns:
            R̂ of each quantity.
        """
        return rhat(x, self.method)


split_rhat = RHat("split")
"""Split R̂ (Gelman et al. 2013), ``arviz.rhat(method="split")``."""

bulk_rhat = RHat("z_scale")
"""Split R̂ of rank-normalised draws, ``arviz.rhat(method="z_scale")``: location shifts."""

tail_rhat = RHat("folded")
"""Split R̂ of rank-normalised folded draws |x − median x|, ``arviz.rhat(method="folded")``:
differences in scale, which the bulk R̂ misses."""

rank_rhat = RHat("rank")
"""max(bulk R̂, tail R̂), the R̂ of Vehtari et al. (2021), ``arviz.rhat(method="rank")``."""

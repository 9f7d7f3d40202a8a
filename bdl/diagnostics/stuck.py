"""Chains that stopped moving: a coordinate frozen or pinned in one chain, a step size far below
the other chains'.

R̂ compares chains, so it notices a chain that sits apart from the others, but it does not say
which chain, nor why; and one chain among many that barely moves leaves the pooled ESS of the
others almost intact. :func:`unmoved_chains` and :func:`small_steps` name such chains. Three
rules, each with its threshold:

* **Frozen at the float resolution.** Chain c's within-chain sd of a coordinate is at most
  :data:`FLOOR_ULPS` units in the last place of its mean's magnitude (in the draws' dtype; for
  float32 that is 4·2⁻²³ ≈ 4.8e-7 relative), or exactly 0: its updates are rounded away, as
  those of a log-scale at −87.3 (τ = e^−87.3 ≈ 1.2e-38, the float32 floor) whose step noise is
  below half an ulp. No posterior a float32 chain can represent is that narrow, so the rule
  needs no comparison and applies to one chain as to many. A chain frozen because it went far
  out (pSGLD's at |θ| ≈ 10⁷, where its update of about h per coordinate is below half an ulp)
  is diverged first (:mod:`bdl.sampling.run.failures`: its energy is beyond any π_T reaches),
  and the convergence check reads only the chains that never diverged.
* **Pinned, next to chains that move.** With two chains or more, chain c's sd of a coordinate
  is below 1/:data:`SPREAD_RATIO` of the median sd of the other chains. A chain that samples
  the same distribution as its siblings has an sd within sampling error of theirs, a factor of
  order 1 ± 1/√ESS; even a chain with an ESS of 1 — one slow sweep across the posterior — spans
  a range of the order of the posterior sd. A factor of 1,000 is therefore not sampling
  variability: the chain covered a thousandth of the ground the others did (in Neal's funnel,
  x's sd e^{v/2} three sds down the neck, at v = −9, is 1/90 of its sd at v = 0: well inside).
  The caller says which coordinates the rule applies to: for a network only those outside
  its weights, since a weight of a hidden unit that is dead in one chain and used in another
  may legitimately differ in sd by more.
* **A step far below its siblings'.** With two chains or more, the step size warm-up adapted
  for chain c is more than :data:`STEP_RATIO` times below the median of the other chains'.
  Mixing time in steps is proportional to 1/h for first- and second-order Langevin dynamics
  alike (the distance covered in t steps is √(2ht) for the overdamped and about h·t for the
  underdamped dynamics, in units of the posterior's scale), so such a chain needs more than
  ten times its siblings' steps: in a run that gives them the ESS of 100 per chain that bdl
  asks for (:mod:`bdl.diagnostics.convergence`) it reaches about 10.

Each flagged chain is reported once, by its worst coordinate (the one furthest below its
threshold) and the number of others.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from bdl.utils.trees import coordinate_name

__all__ = [
    "FLOOR_ULPS",
    "SPREAD_RATIO",
    "STEP_RATIO",
    "StuckChain",
    "small_steps",
    "unmoved_chains",
]

#: a within-chain sd of at most this many ulps of the mean's magnitude is frozen
FLOOR_ULPS = 4.0
#: a within-chain sd this many times below the other chains' median sd is pinned
SPREAD_RATIO = 1_000.0
#: an adapted step size this many times below the other chains' median is too small
STEP_RATIO = 10.0


@dataclasses.dataclass(frozen=True)
class StuckChain:
    """A chain that stopped moving: its index in the run and what was seen."""

    chain: int
    detail: str

    def __str__(self) -> str:
        return f"chain {self.chain}: {self.detail}"


def unmoved_chains(
    leaves: Sequence[Any],
    paths: Sequence[str],
    chains: Sequence[int],
    compare: Sequence[bool] | None = None,
) -> list[StuckChain]:
    """The chains with a coordinate frozen at the float resolution, or pinned while the other
    chains move (module docstring).

    Args:
        leaves: draws ``(chains, draws, ...)``, one array per leaf of the position.
        paths: each leaf's path, to name its coordinates (:func:`bdl.utils.trees.coordinate_name`).
        chains: the run's index of each chain in ``leaves`` (reported in :class:`StuckChain`).
        compare: per leaf, whether the pinned rule applies (default: to every leaf).

    Cost: a min and a max over every draw; sds are computed only for the coordinates that
    these bound below a threshold (an sd s over N draws of range w has w/√(2N) ≤ s ≤ w/2).
    """
    compare = [True] * len(leaves) if compare is None else list(compare)
    worst: dict[int, tuple[float, str]] = {}
    counts: dict[int, int] = {}
    for leaf, path, pinned_rule in zip(leaves, paths, compare, strict=True):
        draws = np.asarray(leaf)
        if not np.issubdtype(draws.dtype, np.floating) or draws.shape[1] < 2:
            continue
        shape, (c, n) = draws.shape[2:], draws.shape[:2]
        draws = draws.reshape(c, n, -1)
        low, high = draws.min(axis=1), draws.max(axis=1)
        width = (high - low).astype(np.float64)
        floor = FLOOR_ULPS * np.spacing(np.maximum(np.abs(low), np.abs(high))).astype(np.float64)
        bound = np.sqrt(2.0 * n)
        candidate = width <= floor * bound
        pinned_rule = pinned_rule and c >= 2
        if pinned_rule:
            candidate |= width <= bound * _others_median(width) / (2 * SPREAD_RATIO)
        columns = np.flatnonzero(candidate.any(axis=0))
        if columns.size == 0:
            continue
        sub = draws[:, :, columns].astype(np.float64)
        sd, mean = sub.std(axis=1), sub.mean(axis=1)
        resolution = FLOOR_ULPS * np.spacing(np.abs(mean).astype(draws.dtype)).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            frozen = sd <= resolution
            others = _others_median(sd) if pinned_rule else np.zeros_like(sd)
            pinned = sd < others / SPREAD_RATIO
            # how far below its threshold (0: not at all moved), to report the worst
            score = np.where(frozen, sd / np.maximum(resolution, 1e-300), np.inf)
            score = np.minimum(score, np.where(pinned, sd * SPREAD_RATIO / others, np.inf))
        for i, j in zip(*np.nonzero(np.isfinite(score)), strict=True):
            chain = int(chains[i])
            counts[chain] = counts.get(chain, 0) + 1
            if chain in worst and worst[chain][0] <= score[i, j]:
                continue
            name = coordinate_name(path, shape, int(columns[j]))
            where = f"sd {sd[i, j]:.1g} at {mean[i, j]:.4g}"
            if frozen[i, j]:
                detail = f"{name} has not moved ({where}, at the {draws.dtype} resolution)"
            else:
                detail = f"{name} has not moved ({where}; the other chains' sd {others[i, j]:.2g})"
            worst[chain] = (float(score[i, j]), detail)
    out = []
    for chain in sorted(worst):
        more = counts[chain] - 1
        tail = f" and {more} more coordinate{'s' if more > 1 else ''}" if more else ""
        out.append(StuckChain(chain, worst[chain][1] + tail))
    return out


def small_steps(step_sizes: Any, chains: Sequence[int]) -> list[StuckChain]:
    """The chains whose adapted step size is more than :data:`STEP_RATIO` times below the median
    of the other chains' (``step_sizes``: one per chain, in the order of ``chains``)."""
    h = np.asarray(step_sizes, dtype=np.float64).reshape(len(chains), -1)
    if h.shape[0] < 2 or h.shape[1] != 1:
        return []
    h = h[:, 0]
    others = _others_median(h[:, None])[:, 0]
    out = []
    for i in np.flatnonzero(h * STEP_RATIO < others):
        detail = (
            f"adapted step size {h[i]:.2g}, {others[i] / h[i]:.0f}× below the other chains' "
            f"median {others[i]:.2g}"
        )
        out.append(StuckChain(int(chains[i]), detail))
    return out


def _others_median(x: np.ndarray) -> np.ndarray:
    """Per chain (axis 0), the median over the other chains."""
    return np.stack([np.median(np.delete(x, i, axis=0), axis=0) for i in range(x.shape[0])])

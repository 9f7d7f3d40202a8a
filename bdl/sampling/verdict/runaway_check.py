"""Run-away and hot chains, found after every run: :func:`runaway_chains` tests each chain's
kept draws (:mod:`bdl.diagnostics.runaway`: growth of the energy while above T, and the
configurational temperature against T), and :func:`flag_runaway` stores the verdict in
``samples.runaway``, ``samples.runaway_step`` and ``samples.runaway_reason`` and warns
(:class:`~bdl.sampling.samples.RunawayWarning`) naming the chains.

**What is tested.** Chains that did not diverge (a diverged chain has its own flag). Per chain,
the tested draws are evenly spaced over its kept draws at a temperature above zero (at least
four): the heat test reads the later half of them (a chain that was hot and is cooling is judged
where it ended), the growth test all of them when there are at least
:data:`~bdl.diagnostics.runaway.MIN_DRAWS`. Nothing is tested for a run that kept no draws.

**Cost.** Both tests need the full-data energy U and gradient ∇U at the tested draws: per chain
at most :func:`heat_draws` draws, so that they cost at most :data:`COST_SHARE` of the run's own
gradient work (each full-data gradient counts n/B minibatch gradients), and never fewer than
:data:`MIN_HEAT_DRAWS` or more than :data:`MAX_HEAT_DRAWS`. They are computed by the program the
bias check shares (:mod:`bdl.sampling.verdict.full_data`), several draws per call.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import jax
import numpy as np

from bdl.compile.target import Target
from bdl.diagnostics.runaway import MIN_DRAWS, growth, heat
from bdl.sampling.samples import RunawayWarning, Samples
from bdl.sampling.verdict.full_data import afforded_draws, at_draws, check_arguments, temperatures

__all__ = [
    "COST_SHARE",
    "MAX_HEAT_DRAWS",
    "MIN_HEAT_DRAWS",
    "flag_runaway",
    "heat_draws",
    "runaway_chains",
]

#: the share of the run's gradient work the heat test may spend, at most (above MIN_HEAT_DRAWS)
COST_SHARE = 0.05
#: fewest draws per chain the heat test reads (when the chain has that many)
MIN_HEAT_DRAWS = 16
#: most draws per chain the heat test reads
MAX_HEAT_DRAWS = 64
#: the tests per chain the false-alarm rate is split over: growth, the heat's mean and minimum
TESTS_PER_CHAIN = 3


def heat_draws(target: Target, steps: int, draws: int) -> int:
    """How many draws per chain the heat test reads: full-data gradients worth at most
    :data:`COST_SHARE` of ``steps`` minibatch gradients, within
    [:data:`MIN_HEAT_DRAWS`, :data:`MAX_HEAT_DRAWS`], and at most ``draws``."""
    return afforded_draws(target, steps, draws, COST_SHARE, MIN_HEAT_DRAWS, MAX_HEAT_DRAWS)


def runaway_chains(
    samples: Samples, target: Target
) -> tuple[np.ndarray, np.ndarray, list[str]] | None:
    """Per chain: whether it ran away or ran hot, the step from which, and why
    (:mod:`bdl.diagnostics.runaway`).

    Args:
        samples: the draws of a run (:class:`bdl.Samples`).
        target: the compiled model or potential they came from.

    Returns:
        ``(flags, steps, reasons)``: a bool per chain, the step from which it ran away (−1:
            never) and a reason (``""``: none); ``None`` when nothing could be tested (no draws
            kept).

    Raises:
        TypeError: ``samples`` is not a :class:`bdl.Samples` or ``target`` not a compiled target.
    """
    check_arguments(samples, target, "runaway_chains")
    chains, draws = samples.num_chains, samples.num_draws
    if not samples.kept_draws or draws == 0 or chains == 0:
        return None
    flags = np.zeros(chains, bool)
    where = np.full(chains, -1, np.int64)
    reasons = [""] * chains
    steps = np.asarray(samples.steps)
    tests = TESTS_PER_CHAIN * chains
    tested = [c for c in range(chains) if not samples.diverged[c]]
    size = sum(int(np.prod(np.shape(a)[2:])) for a in jax.tree.leaves(samples.positions))
    found: dict[int, list[tuple[int, str]]] = {c: [] for c in tested}
    temperature = temperatures(samples, target)
    count = heat_draws(target, samples.steps_done, draws)
    picks = {c: _spread(np.flatnonzero(temperature[c] > 0), count) for c in tested}
    picks = {c: p for c, p in picks.items() if p.size >= 4}
    for c, (virial, energy) in _at_draws(target, samples.positions, picks).items():
        at, later = picks[c], picks[c].size // 2
        hot = heat(virial[later:] / temperature[c, at[later:]], size, tests)
        if hot.flagged:
            found[c].append((int(steps[at[later + hot.index]]), hot.detail))
        u = energy / temperature[c, at]
        if at.size < MIN_DRAWS or not np.all(np.isfinite(u)) or not hot.statistic > 1.0:
            continue  # too few draws, a divergence, or a chain still warming up (below T)
        grew = growth(u, size, tests)
        if grew.flagged:
            third = at.size // 3
            found[c].append((
                int(steps[at[grew.index]]),
                f"{grew.detail}, while its configurational temperature is "
                f"{hot.statistic:.3g}·T, above T (a chain that grows towards π_T is below T); "
                f"‖θ‖ went from {_norms(samples.positions, c, at[:third]).mean():.3g} to "
                f"{_norms(samples.positions, c, at[-third:]).mean():.3g}",
            ))  # fmt: skip
    for c, seen in found.items():
        if seen:
            flags[c] = True
            where[c] = min(step for step, _ in seen)
            reasons[c] = "; ".join(detail for _, detail in seen)
    return flags, where, reasons


def flag_runaway(samples: Samples, target: Target) -> Samples:
    """``samples`` with ``runaway``, ``runaway_step`` and ``runaway_reason`` set
    (:func:`runaway_chains`), and a :class:`RunawayWarning` naming the flagged chains. A check
    that raises is reported (``RuntimeWarning``) rather than losing the run's draws."""
    try:
        verdict = runaway_chains(samples, target)
    except Exception as err:  # the draws matter more than their check
        warnings.warn(
            f"the run-away check of the draws failed ({type(err).__name__}: {err}); "
            "samples.runaway is unset. Check them with bdl.sampling.runaway_chains.",
            RuntimeWarning,
            stacklevel=4,  # past bdl.sample and the wrapper that releases its checkpoint
        )
        return samples
    if verdict is None:
        return samples
    flags, where, reasons = verdict
    result = dataclasses.replace(samples, runaway=flags, runaway_step=where, runaway_reason=reasons)
    if flags.any():
        warnings.warn(
            result.runaway_report() + " docs/troubleshooting.md says what to change.",
            RunawayWarning,
            stacklevel=4,
        )
    return result


def _norms(positions: Any, chain: int, draws: np.ndarray) -> np.ndarray:
    """‖θ‖ of chain ``chain``'s draws ``draws``, in float64 (only where a report needs them:
    every draw of a large network would be a copy of all its draws in float64)."""
    total = 0.0
    for leaf in jax.tree.leaves(positions):
        a = np.asarray(np.asarray(leaf)[chain, draws], np.float64)
        total = total + np.sum(np.square(a.reshape(a.shape[0], -1)), axis=-1)
    return np.sqrt(total)


def _spread(indices: np.ndarray, count: int) -> np.ndarray:
    """At most ``count`` of ``indices``, evenly spaced, in order."""
    if indices.size <= count:
        return indices
    return indices[np.unique(np.linspace(0, indices.size - 1, count).round().astype(int))]


def _at_draws(
    target: Target, positions: Any, picks: dict[int, np.ndarray]
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per chain, at its picked draws: (θ_t − θ̄)·∇U(θ_t)/d (θ̄: the mean of the later half of
    them) and U(θ_t), in float64, with the full-data energy and gradient (the program the bias
    check shares, :func:`bdl.sampling.verdict.full_data.at_draws`)."""
    if not picks:
        return {}
    rows = [(c, int(i)) for c, idx in picks.items() for i in idx]
    leaves = jax.tree.leaves(positions)
    size = sum(int(np.prod(np.shape(a)[2:])) for a in leaves)
    centre = {  # the mean of the later half, which the heat test reads
        c: [np.asarray(a)[c, idx[idx.size // 2 :]].mean(axis=0) for a in leaves]
        for c, idx in picks.items()
    }
    values = at_draws(target, positions, rows, [centre[c] for c, _ in rows])
    dot = values.dot / size
    result, at = {}, 0
    for c, idx in picks.items():
        result[c] = (dot[at : at + idx.size], values.energy[at : at + idx.size])
        at += idx.size
    return result

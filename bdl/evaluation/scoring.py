"""The BMA-versus-draws curve of draws held in memory, part by part: what
:func:`bdl.evaluation.bma_curve` computes once it has opened the draws, and what the run report
(:mod:`bdl.report`) scores a run's test split with.

It reads its draws by their fields (``positions``, ``steps``, ``num_draws``, ``num_chains``,
``diverged``, ``divergence_step``), so it imports none of :mod:`bdl.sampling`: the modules that
hold draws can call it without coming back to themselves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bdl.evaluation.curve import BMAEvaluation, curve_rows, evaluation_result
from bdl.evaluation.running import RunningBMA, final_metrics, update_chunk

#: draws per chain scored per call of the compiled update when reading kept draws
READ_CHUNK = 64


def score_parts(target: Any, run: Any, parts: Iterable[Any], spec: RunningBMA) -> BMAEvaluation:
    """The BMA curve and final metrics of the draws in ``parts``.

    Args:
        target: the compiled model the draws are of.
        run: the run as a whole (a :class:`bdl.Samples`, possibly without draws): its number of
            chains and which chains diverged, at which step.
        parts: the run's draws in order, each a :class:`bdl.Samples` holding some of them.
        spec: what to score (:class:`RunningBMA`).

    Returns:
        the :class:`BMAEvaluation` of the draws.
    """
    accumulator = spec.bind(target, run.num_chains)
    state = accumulator.init()
    points = []
    diverged = jnp.asarray(run.diverged, bool)
    stop = jnp.asarray(run.divergence_step, jnp.int32)
    for part in _pieces(parts):
        n = part.num_draws
        pad = READ_CHUNK - n  # one buffer size: one compilation
        positions = jax.tree.map(partial(_padded, pad=pad), part.positions)
        steps = np.concatenate([np.asarray(part.steps, np.int32), np.zeros(pad, np.int32)])
        recorded = np.arange(READ_CHUNK) < n
        state, rows = update_chunk(
            accumulator, state, positions, jnp.asarray(recorded), jnp.asarray(steps), diverged,
            stop, jnp.asarray(n, jnp.int32),
        )  # fmt: skip
        points.append(curve_rows(np.asarray(rows), steps, recorded))
    final = final_metrics(accumulator, state, jnp.asarray(~np.asarray(run.diverged)))
    return evaluation_result(accumulator.names, points, np.asarray(final), accumulator.n)


def _padded(a: np.ndarray, pad: int) -> np.ndarray:
    """``a`` (chains, draws, ...) padded along the draw axis with copies of its first draw."""
    return np.concatenate([a, np.repeat(a[:, :1], pad, axis=1)], axis=1)


def _pieces(parts: Iterable[Any]) -> Iterable[Any]:
    """The draws of ``parts`` (Samples) in pieces of at most :data:`READ_CHUNK` draws."""
    for part in parts:
        for start in range(0, part.num_draws, READ_CHUNK):
            stop = min(start + READ_CHUNK, part.num_draws)
            yield dataclasses.replace(
                part,
                positions=jax.tree.map(lambda a, s=slice(start, stop): a[:, s], part.positions),
                extra={},
                info={},
                steps=np.asarray(part.steps)[start:stop],
            )

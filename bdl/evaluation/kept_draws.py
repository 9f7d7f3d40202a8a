"""The BMA-versus-draws curve of draws already kept: :func:`bma_curve` reads a
:class:`bdl.Samples`, a saved file or a streamed directory chunk by chunk and gives the same
:class:`~bdl.evaluation.curve.BMAEvaluation` as ``bdl.sample(..., evaluate=...)`` gives for the
run while sampling.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bdl.evaluation.curve import BMAEvaluation, curve_rows, evaluation_result
from bdl.evaluation.running import RunningBMA, final_metrics, update_chunk
from bdl.sampling.loading import load_samples
from bdl.sampling.samples import Samples
from bdl.sampling.stream import iter_parts, load_run

#: draws per chain scored per call of the compiled update when reading kept draws
READ_CHUNK = 64


def bma_curve(
    target: Any,
    draws: Any,
    evaluate: RunningBMA | bool = True,
) -> BMAEvaluation:
    """The BMA-versus-draws curve and the final BMA metrics of kept draws, in one call.

    Args:
        target: the compiled model the draws are of.
        draws: a :class:`bdl.Samples`, a path of a saved one (``.npz``/``.nc``) or of a streamed
            directory (``bdl.sample(..., stream_to=DIR)``); a directory is read part by part, so
            memory holds one part of the draws at a time.
        evaluate: ``True`` (the model's test split) or a :class:`RunningBMA`.

    Returns:
        The same :class:`BMAEvaluation` as ``bdl.sample(..., evaluate=...)`` gives for the run.
    """
    if isinstance(draws, str | os.PathLike):
        path = draws
        if os.path.isdir(path):
            run, parts = load_run(path), iter_parts(path)
        else:
            run = load_samples(path)
            parts = iter([run])
    elif isinstance(draws, Samples):
        run, parts = draws, iter([draws])
    else:
        raise TypeError(
            "bma_curve(draws=...) takes a Samples or the path of saved or streamed draws; got "
            f"{type(draws).__name__}."
        )
    if not run.kept_draws and isinstance(draws, Samples):
        raise ValueError(
            "bma_curve: these Samples hold no draws (the run had keep_draws=False); its "
            "evaluation while sampling is samples.evaluation, and draws it streamed are read "
            "with bma_curve(target, DIR)."
        )
    spec = RunningBMA() if evaluate is True else evaluate
    if not isinstance(spec, RunningBMA):
        raise TypeError(f"bma_curve(evaluate=...) takes True or a RunningBMA; got {evaluate!r}.")
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

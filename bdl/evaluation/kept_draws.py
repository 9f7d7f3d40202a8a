"""The BMA-versus-draws curve of draws already kept: :func:`bma_curve` reads a
:class:`bdl.Samples`, a saved file or a streamed directory chunk by chunk and gives the same
:class:`~bdl.evaluation.curve.BMAEvaluation` as ``bdl.sample(..., evaluate=...)`` gives for the
run while sampling.
"""

from __future__ import annotations

import os
from typing import Any

from bdl.evaluation.curve import BMAEvaluation
from bdl.evaluation.running import RunningBMA
from bdl.evaluation.scoring import READ_CHUNK, score_parts
from bdl.sampling.kept.loading import load_samples
from bdl.sampling.kept.stream import iter_parts, load_run
from bdl.sampling.samples import Samples

__all__ = ["READ_CHUNK", "bma_curve"]


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
    return score_parts(target, run, parts, spec)

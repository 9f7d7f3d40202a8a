"""Held-out predictive summaries of posterior draws: the BMA's accuracy, NLL, ECE, Brier score
and RMSE, from kept draws (:func:`test_metrics`, :func:`bma_curve`) or while sampling
(``bdl.sample(..., evaluate=RunningBMA(...))``, :mod:`bdl.evaluation.running`).

:func:`bma_curve` (:mod:`bdl.evaluation.kept_draws`) is imported on first use (PEP 562): it
reads kept draws with :mod:`bdl.sampling`, whose modules import this package's
:mod:`~bdl.evaluation.curve` and :mod:`~bdl.evaluation.running` (the loop scores its draws with
them, the reader rebuilds ``samples.evaluation``). Imported with the package, it would make an
``import bdl.sampling`` come back to the sampling modules before they are defined.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import jax.numpy as jnp

from bdl.evaluation.curve import BMAEvaluation
from bdl.evaluation.running import RunningBMA

if TYPE_CHECKING:
    from bdl.compile.compiled_model import CompiledModel
    from bdl.evaluation.kept_draws import bma_curve

__all__ = ["BMAEvaluation", "RunningBMA", "bma_curve", "test_metrics"]


def __getattr__(name: str) -> Any:
    if name != "bma_curve":
        raise AttributeError(f"module 'bdl.evaluation' has no attribute {name!r}")
    value = importlib.import_module("bdl.evaluation.kept_draws").bma_curve
    globals()[name] = value
    return value


def test_metrics(compiled: CompiledModel, positions: Any) -> dict[str, float]:
    """BMA metrics on the compiled model's test split; ``positions`` has one leading sample axis.

    Classification: accuracy of the averaged class probabilities and the mean negative log of the
    BMA predictive. Regression: RMSE of the predictive mean and the BMA NLL.

    Args:
        compiled: the compiled model, with a test split.
        positions: draws with one leading sample axis (e.g. ``samples.flat()``).

    Returns:
        ``{"accuracy", "nll"}`` for a classifier, ``{"rmse", "nll"}`` for a regression.

    Raises:
        ValueError: the model has no test split.
    """
    if compiled.x_test is None:
        raise ValueError(f"{compiled.name} has no test split to evaluate on.")
    x, y = compiled.x_test, compiled.y_test
    fields = compiled.fields_test if compiled.likelihood.fields else None
    mean = compiled.predict(positions, x, fields)
    nll = float(-jnp.mean(compiled.log_predictive(positions, x, y, fields)))
    if compiled.likelihood.task == "classification":
        return {"accuracy": float(jnp.mean(jnp.argmax(mean, -1) == y)), "nll": nll}
    mean = mean.reshape(y.shape)
    return {"rmse": float(jnp.sqrt(jnp.mean((mean - y) ** 2))), "nll": nll}

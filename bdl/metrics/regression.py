"""Regression metric: root-mean-square error of a point prediction (the predictive mean).

The Gaussian-mixture predictive NLL of a regression BMA is computed from the per-sample
likelihoods elsewhere (:meth:`bdl.compile.compiled_model.CompiledModel.log_predictive`); this
module only provides the RMSE. Pure ``jax.numpy``, jittable.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bdl.metrics._utils import as_float

__all__ = ["rmse"]


@jax.jit
def rmse(predictions: jax.typing.ArrayLike, targets: jax.typing.ArrayLike) -> jax.Array:
    """Root-mean-square error √((1/N) Σ_j (ŷ_j − y_j)²) over every entry.

    Args:
        predictions: point predictions ŷ (e.g. the BMA predictive mean (1/S) Σ_s f_θs(x)).
        targets: targets y. When the shapes differ but the sizes agree (``(n, 1)`` against
            ``(n,)``), ``predictions`` is reshaped to ``targets.shape``.

    Returns:
        Scalar RMSE, in the units of y.
    """
    predictions, targets = as_float(predictions), as_float(targets)
    if predictions.shape != targets.shape:
        if predictions.size != targets.size:
            raise ValueError(
                f"predictions {predictions.shape} and targets {targets.shape} differ in size."
            )
        predictions = predictions.reshape(targets.shape)
    return jnp.sqrt(jnp.mean((predictions - targets) ** 2))

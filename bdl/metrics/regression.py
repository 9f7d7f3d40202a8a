"""Regression metric: root-mean-square error of a point prediction (the predictive mean).

The Gaussian-mixture predictive NLL of a regression BMA is computed from the per-sample
likelihoods elsewhere (:meth:`bdl.compile.compiled_model.CompiledModel.log_predictive`); this
module only provides the RMSE. Pure ``jax.numpy``, jittable.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from bdl.metrics._utils import as_float, checked_targets

__all__ = ["rmse"]


def rmse(predictions: jax.typing.ArrayLike, targets: jax.typing.ArrayLike) -> jax.Array:
    """Root-mean-square error √((1/N) Σ_j (ŷ_j − y_j)²) over every entry.

    The targets are checked first, on the host (not when traced under ``jax.jit``): a NaN or
    infinite target is a ``ValueError`` naming ``targets``, not an RMSE of NaN.

    Args:
        predictions: point predictions ŷ (e.g. the BMA predictive mean (1/S) Σ_s f_θs(x)).
        targets: targets y. When the shapes differ but the sizes agree (``(n, 1)`` against
            ``(n,)``), ``predictions`` is reshaped to ``targets.shape``.

    Returns:
        Scalar RMSE, in the units of y.
    """
    got, want = tuple(np.shape(predictions)), tuple(np.shape(targets))
    if got != want and math.prod(got) != math.prod(want):
        raise ValueError(
            f"predictions {got} and targets {want} differ in size; give one prediction per target."
        )
    return _rmse(predictions, checked_targets(targets))


@jax.jit
def _rmse(predictions: jax.typing.ArrayLike, targets: jax.typing.ArrayLike) -> jax.Array:
    predictions, targets = as_float(predictions), as_float(targets)
    if predictions.shape != targets.shape:
        predictions = predictions.reshape(targets.shape)
    return jnp.sqrt(jnp.mean((predictions - targets) ** 2))

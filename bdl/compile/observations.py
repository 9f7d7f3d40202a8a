"""The data of a model without a network (observations y, no inputs) and its starting values.

A model without a network reads no inputs: its data may be the observations alone, an array
``y`` or a dict ``{"y": y, field: values, …}``; the inputs are then empty, x of shape (n, 0), so
that minibatches, tempering and every tool that takes a data set work as for any model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from bdl.dsl.likelihoods import Likelihood


def observations_only(data: Any) -> Any:
    """``data`` with empty inputs x of shape (n, 0) added where it has none: an array of
    observations, or a dict without ``"x"`` (and without ``"x_test"`` beside a ``"y_test"``)."""
    if isinstance(data, np.ndarray | jax.Array):
        data = {"y": data}
    if not isinstance(data, Mapping) or "y" not in data:
        return data
    data = dict(data)
    if "x" not in data:
        data["x"] = np.zeros((np.shape(data["y"])[0], 0), np.float32)
    if data.get("y_test") is not None and data.get("x_test") is None:
        data["x_test"] = np.zeros((np.shape(data["y_test"])[0], 0), np.float32)
    return data


def check_starting_values(likelihood: Likelihood, values: dict[str, Any]) -> None:
    """Each starting value has its parameter's shape and lies in its prior's support."""
    for name, prior in likelihood.param_priors.items():
        value = np.asarray(values[name], np.float32)
        shape = tuple(prior.batch_shape + prior.event_shape)
        if value.shape != shape:
            raise ValueError(
                f"Model(params={{{name!r}: ...}}) has shape {value.shape}; the learned parameter "
                f"{name!r} (prior {type(prior).__name__}) has shape {shape}."
            )
        if not bool(np.all(np.asarray(prior.support(value)))):
            raise ValueError(
                f"Model(params={{{name!r}: ...}}) = {value.tolist()} lies outside the support "
                f"of its prior {type(prior).__name__}, {prior.support}; give a value inside it."
            )

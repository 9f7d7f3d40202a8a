"""Input checks run by :func:`bdl.compile` before anything is traced or compiled."""

from __future__ import annotations

from typing import Any

import numpy as np

from bdl.data.dataset import Dataset


def as_dataset(data: Any) -> Dataset:
    """Accept a :class:`bdl.data.Dataset` or a tuple ``(x, y)`` / ``(x, y, x_test, y_test)``."""
    if isinstance(data, Dataset):
        return data
    if isinstance(data, tuple | list) and len(data) in (2, 4):
        arrays = [np.asarray(a) for a in data]
        test = arrays[2:] if len(arrays) == 4 else [None, None]
        return Dataset("data", arrays[0], arrays[1], test[0], test[1])
    raise TypeError(
        "compile(model, data=...) needs a bdl.data.Dataset or a tuple (x, y) or "
        f"(x_train, y_train, x_test, y_test) of arrays; got {type(data).__name__}."
    )


def check_finite(name: str, array: np.ndarray | None) -> None:
    if array is None:
        return
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise TypeError(f"data {name} must be numeric; got dtype {array.dtype}.")
    if np.issubdtype(array.dtype, np.floating) and not np.all(np.isfinite(array)):
        bad = int(np.size(array) - np.count_nonzero(np.isfinite(array)))
        raise ValueError(
            f"data {name} contains {bad} NaN or infinite value(s); clean or impute them before "
            "compiling (e.g. drop the rows with np.isfinite(x).all(axis=1))."
        )


def check_data(data: Dataset) -> None:
    """Shapes agree and nothing is NaN or infinite."""
    for field in ("x_train", "y_train", "x_test", "y_test"):
        check_finite(field, getattr(data, field))
    if data.x_train.shape[0] != data.y_train.shape[0]:
        raise ValueError(
            f"data x_train has {data.x_train.shape[0]} examples but y_train has "
            f"{data.y_train.shape[0]}; they must match."
        )
    if data.x_train.shape[0] == 0:
        raise ValueError("data x_train is empty.")
    if data.has_test and data.x_test.shape[0] != data.y_test.shape[0]:
        raise ValueError(
            f"data x_test has {data.x_test.shape[0]} examples but y_test has "
            f"{data.y_test.shape[0]}; they must match."
        )


def check_batch_size(batch_size: Any, n: int) -> int:
    if batch_size is None:
        return n
    if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer):
        raise TypeError(f"batch_size must be an integer; got {type(batch_size).__name__}.")
    if not 1 <= batch_size <= n:
        raise ValueError(
            f"batch_size must satisfy 1 <= batch_size <= n = {n} (the training-set size); got "
            f"{batch_size}."
        )
    return int(batch_size)

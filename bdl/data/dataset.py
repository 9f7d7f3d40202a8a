"""The in-memory dataset container that every loader and generator returns."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True, eq=False)
class Dataset:
    """A supervised dataset held in host memory as NumPy arrays.

    ``x_train``/``x_test`` have the example axis first; ``y_train``/``y_test`` are integer class
    labels (classification) or floating targets (regression). ``num_classes`` is ``None`` for
    regression. The test split may be absent (``None``). ``feature_names`` names the columns of
    ``x`` where the source has names (scikit-learn's tabular sets); a model file can pass them on
    as parameter labels (``ModelSpec.parameter_labels``), so that summaries say
    ``net/w[mean radius]`` instead of ``net/w[0]``. ``fields`` and ``fields_test`` hold further
    per-example arrays by name (example axis first), e.g. a known measurement error
    ``{"sigma": σ}`` that a likelihood reads (``bdl.Gaussian(scale="sigma")``).

    Attributes:
        name: the dataset's name.
        x_train: the training inputs, example axis first.
        y_train: the training targets.
        x_test: the test inputs (``None`` without a test split).
        y_test: the test targets (``None`` without a test split).
        num_classes: K for classification, ``None`` for regression.
        feature_names: the names of the columns of ``x`` (``None`` where the source has none).
        fields: further per-example arrays of the training split, by name.
        fields_test: the same arrays of the test split.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    num_classes: int | None = None
    feature_names: tuple[str, ...] | None = None
    fields: dict[str, np.ndarray] | None = None
    fields_test: dict[str, np.ndarray] | None = None

    @property
    def n(self) -> int:
        """Number of training examples."""
        return int(self.x_train.shape[0])

    @property
    def has_test(self) -> bool:
        return self.x_test is not None and self.y_test is not None

    def __repr__(self) -> str:
        test = f", x_test={self.x_test.shape}" if self.x_test is not None else ""
        classes = f", num_classes={self.num_classes}" if self.num_classes is not None else ""
        fields = f", fields={sorted(self.fields)}" if self.fields else ""
        return f"Dataset({self.name!r}, x_train={self.x_train.shape}{test}{classes}{fields})"


def split_draws(name: str, x: np.ndarray | None, y: np.ndarray, n_train: int) -> Dataset:
    """A regression dataset of synthetic draws: the first ``n_train`` rows train, the rest test.

    A model file that draws its own data draws the training and test rows together and splits
    them here, e.g. ``split_draws("poisson_glm", x, y, n)`` for ``2n`` drawn rows.

    Args:
        name: the dataset's name.
        x: the inputs, example axis first; ``None`` for a model without inputs (the inputs are
            then ``(rows, 0)`` zeros).
        y: the targets, one row per example.
        n_train: how many of the first rows make the training split.

    Returns:
        The dataset, inputs and targets as float32, ``num_classes=None``.
    """
    y = np.asarray(y, np.float32)
    x = np.zeros((len(y), 0), np.float32) if x is None else np.asarray(x, np.float32)
    return Dataset(name, x[:n_train], y[:n_train], x[n_train:], y[n_train:], num_classes=None)

"""Small tabular and image datasets shipped inside scikit-learn (no download, always offline).

Source: the copies bundled with scikit-learn (``sklearn.datasets.load_*``; Pedregosa et al. 2011,
JMLR 12:2825), originally from the UCI Machine Learning Repository:

* breast cancer: Wisconsin Diagnostic Breast Cancer (Street, Wolberg & Mangasarian 1993);
* digits: UCI Optical Recognition of Handwritten Digits (Alpaydin & Kaynak 1998), test part;
* diabetes: Efron, Hastie, Johnstone & Tibshirani (2004), "Least Angle Regression";
* iris: Fisher (1936).

Splits are those of ``sklearn.model_selection.train_test_split`` with ``random_state=seed``
(drawn by :mod:`bdl.data.splits`, without importing scikit-learn); the classification splits are
stratified by label. The digits are read from scikit-learn's bundled file directly, so that
loading them does not import scikit-learn either. Where features are standardised,
x' = (x − m) / s with the per-feature mean m and (population) standard deviation s of the
*training* split, so no test information leaks into the preprocessing.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

from bdl.data.dataset import Dataset
from bdl.data.splits import split_indices
from bdl.utils import arguments
from bdl.utils.arguments import number

__all__ = ["breast_cancer", "diabetes", "digits", "iris"]


def _split(
    x: np.ndarray, y: np.ndarray, test_fraction: float, seed: int, stratify: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    number(test_fraction, "test_fraction", above=0.0, below=1.0)
    seed = arguments.seed(seed)
    train, test = split_indices(y, test_fraction, seed, stratify)
    return x[train], x[test], y[train], y[test]


def bundled_path(name: str) -> Path:
    """A data file shipped with scikit-learn, located without importing scikit-learn."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the bundled datasets need scikit-learn: pip install scikit-learn")
    return Path(spec.submodule_search_locations[0]) / "datasets" / "data" / name


def _standardize(x_train: np.ndarray, x_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = x_train.mean(axis=0)
    std = x_train.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    return (x_train - mean) / std, (x_test - mean) / std


def _feature_names(bunch: Any) -> tuple[str, ...] | None:
    names = getattr(bunch, "feature_names", None)
    return None if names is None else tuple(str(n) for n in names)


def _classification(
    name: str,
    bunch: Any,
    test_fraction: float,
    seed: int,
    num_classes: int,
    standardize: bool = True,
) -> Dataset:
    x = np.asarray(bunch.data, dtype=np.float64)
    y = np.asarray(bunch.target, dtype=np.int32)
    x_train, x_test, y_train, y_test = _split(x, y, test_fraction, seed, stratify=True)
    if standardize:
        x_train, x_test = _standardize(x_train, x_test)
    return Dataset(
        name=name,
        x_train=x_train.astype(np.float32),
        y_train=y_train,
        x_test=x_test.astype(np.float32),
        y_test=y_test,
        num_classes=num_classes,
        feature_names=_feature_names(bunch),
    )


def breast_cancer(test_fraction: float = 0.2, seed: int = 0, standardize: bool = True) -> Dataset:
    """Wisconsin Diagnostic Breast Cancer: 569 × 30 features, binary (0 = malignant, 1 = benign).

    Stratified split; features standardised with training-split statistics, or left in their own
    units (``standardize=False``: from ≈ 10⁻³ to ≈ 4·10³, the unattended-sampling test case).

    Args:
        test_fraction: the fraction of the examples held out as the test split.
        seed: the seed of the split.
        standardize: standardise the features (``False``: their own units).

    Returns:
        A :class:`Dataset` with ``num_classes=2`` and the features' names.
    """
    from sklearn.datasets import load_breast_cancer

    return _classification(
        "breast_cancer", load_breast_cancer(), test_fraction, seed, 2, standardize
    )


def iris(test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """Fisher's iris: 150 × 4 features, 3 classes (50 each).

    Stratified split; features standardised with training-split statistics.

    Args:
        test_fraction: the fraction of the examples held out as the test split.
        seed: the seed of the split.

    Returns:
        A :class:`Dataset` with ``num_classes=3`` and the features' names.
    """
    from sklearn.datasets import load_iris

    return _classification("iris", load_iris(), test_fraction, seed, 3)


def digits(test_fraction: float = 0.2, seed: int = 0, flatten: bool = True) -> Dataset:
    """Handwritten digits: 1,797 8×8 images with pixel counts 0…16, 10 classes.

    Pixels are scaled to [0, 1] by x = p / 16 (not standardised). ``flatten=True`` gives
    ``(n, 64)``; ``flatten=False`` gives ``(n, 8, 8, 1)`` (NHWC, for CNNs). Stratified split.

    Args:
        test_fraction: the fraction of the examples held out as the test split.
        seed: the seed of the split.
        flatten: images as ``(n, 64)`` rather than ``(n, 8, 8, 1)``.

    Returns:
        A :class:`Dataset` with ``num_classes=10``.
    """
    table = np.loadtxt(bundled_path("digits.csv.gz"), delimiter=",")  # as load_digits reads it
    x = np.asarray(table[:, :-1], dtype=np.float32) / 16.0
    y = np.asarray(table[:, -1], dtype=np.int32)
    x_train, x_test, y_train, y_test = _split(x, y, test_fraction, seed, stratify=True)
    if not flatten:
        x_train, x_test = x_train.reshape(-1, 8, 8, 1), x_test.reshape(-1, 8, 8, 1)
    return Dataset("digits", x_train, y_train, x_test, y_test, num_classes=10)


def diabetes(test_fraction: float = 0.2, seed: int = 0, standardize_y: bool = False) -> Dataset:
    """Diabetes progression regression (Efron et al. 2004): 442 × 10 features, real target.

    Uses the raw (unscaled) features, standardised with training-split statistics. The target
    (disease progression after one year, range ≈ 25…346) is kept as is unless ``standardize_y``,
    in which case y' = (y − m_y) / s_y with training-split m_y, s_y. The split is random (not
    stratified: the target is continuous). Targets have shape ``(n,)``, ``num_classes=None``.

    Args:
        test_fraction: the fraction of the examples held out as the test split.
        seed: the seed of the split.
        standardize_y: standardise the target with training-split statistics.

    Returns:
        A regression :class:`Dataset` with the features' names.
    """
    from sklearn.datasets import load_diabetes

    bunch = load_diabetes(scaled=False)
    x = np.asarray(bunch.data, dtype=np.float64)
    y = np.asarray(bunch.target, dtype=np.float64)
    x_train, x_test, y_train, y_test = _split(x, y, test_fraction, seed, stratify=False)
    x_train, x_test = _standardize(x_train, x_test)
    if standardize_y:
        y_mean, y_std = y_train.mean(), y_train.std()
        y_train, y_test = (y_train - y_mean) / y_std, (y_test - y_mean) / y_std
    return Dataset(
        "diabetes",
        x_train.astype(np.float32),
        y_train.astype(np.float32),
        x_test.astype(np.float32),
        y_test.astype(np.float32),
        num_classes=None,
        feature_names=_feature_names(bunch),
    )

"""Datasets for bdl: offline loaders, synthetic generators and synthetic log-densities.

Every loader and generator returns a :class:`Dataset` of NumPy arrays. :func:`load` looks a
dataset up by name (see :func:`names`)::

    from bdl import data
    ds = data.load("breast_cancer", seed=1)
    ds = data.load("mnist", data_dir="/data/tensorflow_datasets")

Nothing is ever downloaded: TFDS datasets must be prepared beforehand (see
:class:`DatasetNotPreparedError`); the scikit-learn datasets ship with scikit-learn; MNIST-1D is
generated. Heavy dependencies (TFDS, scikit-learn, mnist1d) are imported only when their loaders
are called.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bdl.data.dataset import Dataset, split_draws
from bdl.data.mnist1d_data import mnist1d
from bdl.data.sklearn_datasets import breast_cancer, diabetes, digits, iris
from bdl.data.synthetic import (
    MLPNetwork,
    linear_regression,
    linear_regression_posterior,
    linear_regression_weights,
    mlp_prior_data,
    mlp_prior_network,
    regression_1d_gap,
)
from bdl.data.synthetic_energies import (
    correlated_gaussian,
    diagonal_gaussian,
    gaussian_log_density,
    gaussian_log_density_fn,
    two_mode_log_density,
)
from bdl.data.tfds_loaders import (
    DatasetFormatError,
    DatasetNotPreparedError,
    TfdsLoader,
    channel_statistics,
    cifar10,
    cifar100,
    fashion_mnist,
    load_tfds,
    mnist,
)
from bdl.utils.arguments import suggestion

__all__ = [
    "Dataset",
    "DatasetFormatError",
    "DatasetNotPreparedError",
    "MLPNetwork",
    "TfdsLoader",
    "breast_cancer",
    "channel_statistics",
    "cifar10",
    "cifar100",
    "correlated_gaussian",
    "diabetes",
    "diagonal_gaussian",
    "digits",
    "fashion_mnist",
    "gaussian_log_density",
    "gaussian_log_density_fn",
    "iris",
    "linear_regression",
    "linear_regression_posterior",
    "linear_regression_weights",
    "load",
    "load_tfds",
    "mlp_prior_data",
    "mlp_prior_network",
    "mnist",
    "mnist1d",
    "names",
    "regression_1d_gap",
    "split_draws",
    "two_mode_log_density",
]

_REGISTRY: dict[str, Callable[..., Dataset]] = {
    "mnist": mnist,
    "mnist1d": mnist1d,
    "fashion_mnist": fashion_mnist,
    "cifar10": cifar10,
    "cifar100": cifar100,
    "breast_cancer": breast_cancer,
    "digits": digits,
    "diabetes": diabetes,
    "iris": iris,
    "regression_1d_gap": regression_1d_gap,
    "mlp_prior_data": mlp_prior_data,
    "linear_regression": linear_regression,
}


def names() -> tuple[str, ...]:
    """The dataset names accepted by :func:`load`, sorted.

    Returns:
        The names, sorted.
    """
    return tuple(sorted(_REGISTRY))


def load(name: str, **kwargs: Any) -> Dataset:
    """Loads or generates the dataset called ``name``; ``kwargs`` go to its loader/generator.

    Args:
        name: one of :func:`names`.
        **kwargs: the loader's or generator's arguments.

    Returns:
        The :class:`Dataset`.

    Raises:
        ValueError: ``name`` is not one of :func:`names`.
    """
    try:
        loader = _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown dataset {name!r};{suggestion(name, names())} valid names: "
            f"{', '.join(names())}"
        ) from None
    return loader(**kwargs)

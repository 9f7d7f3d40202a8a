"""Image-classification datasets from TensorFlow Datasets (TFDS), read fully offline.

Source: TensorFlow Datasets, https://www.tensorflow.org/datasets (catalog entries ``mnist``
[LeCun et al. 1998], ``fashion_mnist`` [Xiao et al. 2017, arXiv:1708.07747], ``cifar10`` and
``cifar100`` [Krizhevsky 2009, "Learning Multiple Layers of Features from Tiny Images"]).

Reading never downloads anything. A dataset prepared in the ``array_record`` file format is read
through TFDS's random-access data source (``builder.as_data_source``, what ``tfds.data_source``
uses; needs neither TensorFlow nor a network; images are PNG-decoded by Pillow). A dataset
prepared in TFDS's default ``tfrecord`` format is read with ``tfds.load(..., batch_size=-1)`` and
``tfds.as_numpy``, which needs TensorFlow installed. A dataset that is not prepared raises
:class:`DatasetNotPreparedError`, whose message says how to prepare it.

Preprocessing (per image, per channel c, pixel p ∈ {0, …, 255}):

    u = p / 255,        x_c = (u_c − m_c) / s_c,

where m_c and s_c are the mean and standard deviation of u_c over every pixel of every *training*
image (computed exactly at load time from a 256-bin histogram; the test split uses the training
statistics). For reference, MNIST gives m ≈ 0.1307, s ≈ 0.3081 and CIFAR-10 gives
m ≈ (0.4914, 0.4822, 0.4465), s ≈ (0.2470, 0.2435, 0.2616). Labels are ``int32`` and
``num_classes`` comes from the builder's ``label`` feature (CIFAR-100 uses its 100 fine labels).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any, TypedDict, Unpack

import numpy as np
import numpy.typing as npt

from bdl.data.dataset import Dataset

__all__ = [
    "TFDS_NAMES",
    "DatasetFormatError",
    "DatasetNotPreparedError",
    "TfdsLoader",
    "TfdsOptions",
    "channel_statistics",
    "cifar10",
    "cifar100",
    "fashion_mnist",
    "load_tfds",
    "mnist",
]

TFDS_NAMES: tuple[str, ...] = ("mnist", "fashion_mnist", "cifar10", "cifar100")
"""The TFDS datasets with a named :class:`TfdsLoader` in this module (``load_tfds`` accepts any
image dataset with ``image``/``label`` features and ``train``/``test`` splits)."""

_READ_CHUNK = 4096  # examples per batched random-access read


class DatasetNotPreparedError(FileNotFoundError):
    """The TFDS dataset is not present (prepared) in the data directory; nothing is downloaded."""


class DatasetFormatError(RuntimeError):
    """The dataset is prepared, but in a file format that cannot be read in this environment."""


class TfdsOptions(TypedDict, total=False):
    """Keyword arguments accepted by a :class:`TfdsLoader` and forwarded to :func:`load_tfds`."""

    data_dir: str | os.PathLike[str] | None
    flatten: bool
    dtype: npt.DTypeLike
    normalize: bool


def _resolved_data_dir(data_dir: str | os.PathLike[str] | None) -> str:
    """The root directory TFDS searches: ``data_dir``, else ``$TFDS_DATA_DIR``, else the default."""
    if data_dir is not None:
        return os.fspath(data_dir)
    from tensorflow_datasets.core import constants

    return os.environ.get("TFDS_DATA_DIR") or constants.DATA_DIR


def _not_prepared(
    name: str, data_dir: str | os.PathLike[str] | None, expected: str, problem: str | None = None
) -> DatasetNotPreparedError:
    """The error for an absent (or incomplete) dataset, with instructions to prepare it."""
    root = _resolved_data_dir(data_dir)
    problem = (
        problem or f"is not prepared in data_dir {root!r} (expected its files in {expected!r})"
    )
    return DatasetNotPreparedError(
        f"TFDS dataset {name!r} {problem}. bdl never downloads data at run time. To prepare it:\n"
        "  1. On a machine with internet access, with `pip install tensorflow "
        "tensorflow-datasets`, run\n"
        f"       python -c \"import tensorflow_datasets as tfds; tfds.builder('{name}', "
        "data_dir='DIR', file_format='array_record').download_and_prepare()\"\n"
        "     (`file_format='array_record'` lets bdl read it without TensorFlow; the default "
        "'tfrecord' format also works but then reading needs TensorFlow).\n"
        f"  2. Copy the directory DIR/{name} to this machine, into {root!r}, or pass "
        "data_dir=... to the loader, or set the TFDS_DATA_DIR environment variable to the "
        "directory that contains it."
    )


def channel_statistics(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and standard deviation of ``uint8`` images rescaled to [0, 1].

    ``images`` has shape ``(n, height, width, channels)``. The moments are computed exactly from a
    256-bin histogram per channel (no float copy of the data): m_c = Σ_v h_c(v) v/255 / N and
    s_c² = Σ_v h_c(v) (v/255 − m_c)² / N with N the pixel count per channel.

    Args:
        images: ``uint8`` images ``(n, height, width, channels)``.

    Returns:
        ``(mean, std)``, each of shape ``(channels,)``.
    """
    if images.dtype != np.uint8 or images.ndim != 4:
        raise ValueError(f"expected uint8 images (n, h, w, c), got {images.dtype} {images.shape}")
    values = np.arange(256, dtype=np.float64) / 255.0
    means, stds = [], []
    for c in range(images.shape[-1]):
        counts = np.bincount(images[..., c].ravel(), minlength=256).astype(np.float64)
        total = counts.sum()
        mean = float(counts @ values / total)
        var = float(counts @ (values - mean) ** 2 / total)
        means.append(mean)
        stds.append(np.sqrt(var))
    return np.asarray(means), np.asarray(stds)


def _fetch(source: Any, keys: list[int]) -> Sequence[dict[str, Any]]:
    """Batched random-access read, falling back to one read per key for sources without one."""
    try:
        return source.__getitems__(keys)
    except (AttributeError, TypeError):
        # e.g. tfds 4.9.10's `tfds.testing.mock_data`, whose mocked __getitems__ is unbound.
        return [source[k] for k in keys]


def _read_data_source(source: Any, image_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """All examples of a TFDS random-access data source as (uint8 images, int32 labels)."""
    n = len(source)
    images = np.empty((n, *image_shape), dtype=np.uint8)
    labels = np.empty((n,), dtype=np.int32)
    for start in range(0, n, _READ_CHUNK):
        keys = list(range(start, min(start + _READ_CHUNK, n)))
        for i, example in zip(keys, _fetch(source, keys), strict=True):
            images[i] = np.asarray(example["image"]).reshape(image_shape)
            labels[i] = example["label"]
    return images, labels


def _read_with_tensorflow(
    name: str, data_dir: str | None, splits: list[str]
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Reads ``tfrecord``-format splits whole with ``tfds.load(batch_size=-1)`` (needs TF)."""
    import tensorflow_datasets as tfds

    loaded = tfds.load(name, split=splits, data_dir=data_dir, download=False, batch_size=-1)
    out = {}
    for split, ds in zip(splits, loaded, strict=True):
        arrays = tfds.as_numpy(ds)
        out[split] = (np.asarray(arrays["image"], np.uint8), np.asarray(arrays["label"], np.int32))
    return out


def _missing_files(info: Any, splits: list[str]) -> list[str]:
    """The data files of ``splits`` listed in the dataset's metadata but absent from disk."""
    missing = []
    for split in splits:
        try:
            paths = info.splits[split].filepaths
        except (KeyError, ValueError):  # no file template recorded: nothing to check
            continue
        missing += [os.fspath(p) for p in paths if not p.exists()]
    return missing


def _read_splits(
    name: str,
    builder: Any,
    data_dir: str | None,
    splits: list[str],
    image_shape: tuple[int, ...],
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Reads whole splits: random access if the file format allows it, else through TensorFlow."""
    from tensorflow_datasets.core import file_adapters

    file_format = builder.info.file_format or file_adapters.FileFormat.TFRECORD
    if file_format in file_adapters.FileFormat.with_random_access():
        return {
            split: _read_data_source(builder.as_data_source(split=split), image_shape)
            for split in splits
        }
    if _tensorflow_available():
        return _read_with_tensorflow(name, data_dir, splits)
    raise DatasetFormatError(
        f"TFDS dataset {builder.name!r} in {os.fspath(builder.data_dir)!r} is stored in the "
        f"{file_format.value!r} format, which needs TensorFlow to read. Either "
        "`pip install tensorflow-cpu`, or prepare it again with "
        f"tfds.builder('{builder.name}', data_dir=..., file_format='array_record')"
        ".download_and_prepare()."
    )


def _tensorflow_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorflow") is not None


def load_tfds(
    name: str,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    flatten: bool = False,
    dtype: npt.DTypeLike = np.float32,
    normalize: bool = True,
) -> Dataset:
    """Loads the ``train`` and ``test`` splits of a prepared TFDS image dataset into memory.

    Under ``tfds.testing.mock_data`` the dataset's metadata (``dataset_info.json`` and
    ``features.json``) must exist in the mock's ``data_dir`` (TFDS's ``MockPolicy.USE_FILES``),
    since an unprepared dataset is refused before any reading; the examples themselves are faked.

    Args:
        name: TFDS name, e.g. ``"mnist"`` (optionally ``"name:version"``).
        data_dir: TFDS data directory; defaults to ``$TFDS_DATA_DIR`` or ``~/tensorflow_datasets``.
        flatten: Return images as ``(n, h·w·c)`` instead of ``(n, h, w, c)``.
        dtype: Floating dtype of the images.
        normalize: Per-channel standardisation with training-split statistics (module docstring);
            if ``False`` the images are only scaled to [0, 1].

    Returns:
        A :class:`Dataset` with images of ``dtype``, ``int32`` labels in ``[0, num_classes)``.

    Raises:
        DatasetNotPreparedError: the dataset is absent from the data directory, or its data files
            are incomplete (no download is attempted); the message explains how to prepare it.
        DatasetFormatError: it is prepared as ``tfrecord`` and TensorFlow is not installed.
    """
    import tensorflow_datasets as tfds

    explicit_dir = None if data_dir is None else os.fspath(data_dir)
    builder = tfds.builder(name, data_dir=explicit_dir)  # None: TFDS's own search path
    if not builder.is_prepared():
        raise _not_prepared(name, data_dir, os.fspath(builder.data_dir))
    info = builder.info
    splits = ["train"] + (["test"] if "test" in info.splits else [])
    image_shape = tuple(info.features["image"].shape)
    num_classes = int(info.features["label"].num_classes)
    try:
        arrays = _read_splits(name, builder, explicit_dir, splits, image_shape)
    except DatasetFormatError:
        raise
    except Exception:
        missing = _missing_files(info, splits)
        if not missing:
            raise
        problem = f"is incomplete: {len(missing)} data file(s) are missing, e.g. {missing[0]!r}"
        raise _not_prepared(name, data_dir, os.fspath(builder.data_dir), problem) from None

    x_train_u8, y_train = arrays["train"]
    if normalize:
        mean, std = channel_statistics(x_train_u8)
        std = np.where(std > 0, std, 1.0)  # a constant channel is only centred
    else:
        mean, std = np.zeros(image_shape[-1]), np.ones(image_shape[-1])
    scale = np.asarray(1.0 / (255.0 * std), dtype=dtype)
    shift = np.asarray(mean / std, dtype=dtype)

    def preprocess(x: np.ndarray) -> np.ndarray:
        out = x.astype(dtype) * scale - shift
        return out.reshape(out.shape[0], -1) if flatten else out

    x_test = y_test = None
    if "test" in arrays:
        x_test, y_test = preprocess(arrays["test"][0]), arrays["test"][1]
    return Dataset(
        name=name,
        x_train=preprocess(x_train_u8),
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        num_classes=num_classes,
    )


@dataclasses.dataclass(frozen=True)
class TfdsLoader:
    """One TFDS image dataset by name: calling it is :func:`load_tfds` with that name.

    ``bdl.data.mnist``, ``fashion_mnist``, ``cifar10`` and ``cifar100`` are instances: a table of
    names, not four functions, so their one call is documented once, here.

    Attributes:
        name: the TFDS catalog name passed to :func:`load_tfds`.
    """

    name: str

    def __call__(self, **kwargs: Unpack[TfdsOptions]) -> Dataset:
        """The dataset's ``train`` and ``test`` splits in memory.

        Args:
            **kwargs: ``data_dir``, ``flatten``, ``dtype``, ``normalize``, as :func:`load_tfds`.

        Returns:
            The :class:`Dataset`, as :func:`load_tfds` returns it.

        Raises:
            DatasetNotPreparedError: the dataset is not prepared in the TFDS data directory.
        """
        return load_tfds(self.name, **kwargs)


mnist = TfdsLoader("mnist")
"""MNIST handwritten digits (LeCun et al. 1998): 60,000 training and 10,000 test images of
28×28×1 pixels, ``num_classes=10``. Call it as :func:`load_tfds`, without the name."""

fashion_mnist = TfdsLoader("fashion_mnist")
"""Fashion-MNIST clothing (Xiao et al. 2017): 60,000 training and 10,000 test images of 28×28×1
pixels, ``num_classes=10``. Call it as :func:`load_tfds`, without the name."""

cifar10 = TfdsLoader("cifar10")
"""CIFAR-10 natural images (Krizhevsky 2009): 50,000 training and 10,000 test images of 32×32×3
pixels, ``num_classes=10``. Call it as :func:`load_tfds`, without the name."""

cifar100 = TfdsLoader("cifar100")
"""CIFAR-100 natural images (Krizhevsky 2009): 50,000 training and 10,000 test images of
32×32×3 pixels, ``num_classes=100`` (the fine labels). Call it as :func:`load_tfds`, without the
name."""

"""Tests of the TFDS loaders, fully offline and without TensorFlow.

Three kinds of fixtures stand in for the real datasets (which are never downloaded):

* ``tfds.testing.mock_data`` with metadata files (``MockPolicy.USE_FILES``): TFDS fakes the
  examples; the metadata (splits, file format, features) is written by :func:`_write_metadata`.
* small fake datasets really prepared on disk in the ``array_record`` format by subclasses of the
  registered TFDS builders (:func:`_prepare_fake`); images are PNG-encoded with Pillow so no
  TensorFlow is needed. These exercise the real read and PNG-decode path.
* empty / incomplete data directories, for the "not prepared" errors.
"""

from __future__ import annotations

import importlib.util
import io
import os
from pathlib import Path

import numpy as np
import pytest

tfds = pytest.importorskip("tensorflow_datasets")
PIL_Image = pytest.importorskip("PIL.Image")

from bdl import data  # noqa: E402
from bdl.data import (  # noqa: E402
    DatasetFormatError,
    DatasetNotPreparedError,
    channel_statistics,
    load_tfds,
)

TF_AVAILABLE = importlib.util.find_spec("tensorflow") is not None

# name -> (image shape, num_classes)
SPECS = {
    "mnist": ((28, 28, 1), 10),
    "fashion_mnist": ((28, 28, 1), 10),
    "cifar10": ((32, 32, 3), 10),
    "cifar100": ((32, 32, 3), 100),
}


def _write_metadata(
    data_dir: Path, name: str, sizes: dict[str, int], file_format: str = "array_record"
) -> None:
    """Writes ``dataset_info.json`` and ``features.json`` (no data files) for ``name``."""
    from tensorflow_datasets.core import naming

    builder = tfds.builder(name, data_dir=os.fspath(data_dir), file_format=file_format)
    template = naming.ShardedFileTemplate(
        data_dir=builder.data_path,
        dataset_name=builder.name,
        filetype_suffix=builder.info.file_format.file_suffix,
    )
    builder.info.set_splits(
        tfds.core.SplitDict(
            [
                tfds.core.SplitInfo(
                    name=split,
                    shard_lengths=[n],
                    num_bytes=0,
                    filename_template=template.replace(split=split),
                )
                for split, n in sizes.items()
            ]
        )
    )
    builder.data_path.mkdir(parents=True, exist_ok=True)
    builder.info.write_to_directory(builder.data_path)


def _png(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    PIL_Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image).save(buffer, "PNG")
    return buffer.getvalue()


def _prepare_fake(
    data_dir: Path, name: str, images: dict[str, np.ndarray], labels: dict[str, np.ndarray]
) -> None:
    """Prepares a fake ``name`` in ``array_record`` format with the given images and labels."""
    base = type(tfds.builder(name))

    def examples(split: str):
        features = base(data_dir=os.fspath(data_dir)).info.features
        for i, (image, label) in enumerate(zip(images[split], labels[split], strict=True)):
            example = {"image": _png(image), "label": int(label)}
            for key, feature in features.items():  # e.g. CIFAR's "id", CIFAR-100's coarse label
                if isinstance(feature, tfds.features.Text):
                    example[key] = f"{split}_{i}"
                elif key not in example and isinstance(feature, tfds.features.ClassLabel):
                    example[key] = 0
            yield i, example

    class Fake(base, skip_registration=True):
        def _split_generators(self, dl_manager):
            return {split: examples(split) for split in images}

    Fake.name = name
    Fake(data_dir=os.fspath(data_dir), file_format="array_record").download_and_prepare()


def _random_split(
    rng: np.random.Generator, n: int, shape: tuple[int, ...], num_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    # Channel-dependent ranges so that the per-channel statistics differ.
    channels = shape[-1]
    low = np.array([0, 60, 120])[:channels]
    high = np.array([256, 200, 256])[:channels]
    images = rng.integers(low, high, size=(n, *shape)).astype(np.uint8)
    return images, rng.integers(0, num_classes, size=n).astype(np.int32)


@pytest.fixture(scope="module")
def fake_cifar10(tmp_path_factory: pytest.TempPathFactory):
    """A fake CIFAR-10 prepared on disk: (data_dir, {split: images}, {split: labels})."""
    data_dir = tmp_path_factory.mktemp("tfds_cifar10")
    rng = np.random.default_rng(0)
    images, labels = {}, {}
    for split, n in [("train", 48), ("test", 16)]:
        images[split], labels[split] = _random_split(rng, n, (32, 32, 3), 10)
    _prepare_fake(data_dir, "cifar10", images, labels)
    return data_dir, images, labels


@pytest.fixture(scope="module")
def metadata_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Metadata (no data files) of all four datasets, as used by ``mock_data(data_dir=...)``."""
    data_dir = tmp_path_factory.mktemp("tfds_metadata")
    for name in SPECS:
        _write_metadata(data_dir, name, {"train": 60_000, "test": 10_000})
    return data_dir


def _pairs(images: np.ndarray, labels: np.ndarray) -> list[tuple[bytes, int]]:
    return sorted((im.tobytes(), int(y)) for im, y in zip(images, labels, strict=True))


# ---------------------------------------------------------------------------------------------
# tfds.testing.mock_data
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SPECS))
def test_mock_data_all_named_loaders(name: str, metadata_dir: Path) -> None:
    shape, num_classes = SPECS[name]
    num_examples = 12
    with tfds.testing.mock_data(num_examples=num_examples, data_dir=os.fspath(metadata_dir)):
        ds = data.load(name, data_dir="/ignored/by/mock_data")
    assert ds.name == name
    assert ds.num_classes == num_classes
    assert ds.x_train.shape == (num_examples, *shape)
    assert ds.x_test is not None and ds.y_test is not None
    assert ds.x_test.shape == (num_examples, *shape)
    assert ds.x_train.dtype == np.float32
    assert ds.y_train.dtype == np.int32 and ds.y_test.dtype == np.int32
    for y in (ds.y_train, ds.y_test):
        assert y.min() >= 0 and y.max() < num_classes
    # Per-channel standardisation with training statistics.
    np.testing.assert_allclose(ds.x_train.mean(axis=(0, 1, 2), dtype=np.float64), 0.0, atol=1e-6)
    np.testing.assert_allclose(ds.x_train.std(axis=(0, 1, 2), dtype=np.float64), 1.0, atol=1e-6)


def test_mock_data_flatten_dtype_and_wrapper(metadata_dir: Path) -> None:
    with tfds.testing.mock_data(num_examples=5, data_dir=os.fspath(metadata_dir)):
        ds = data.mnist(flatten=True, dtype=np.float64, normalize=False)
    assert ds.x_train.shape == (5, 28 * 28)
    assert ds.x_train.dtype == np.float64
    assert ds.x_train.min() >= 0.0 and ds.x_train.max() <= 1.0


# ---------------------------------------------------------------------------------------------
# Real array_record files (fake content)
# ---------------------------------------------------------------------------------------------


def test_array_record_roundtrip_recovers_images_and_labels(fake_cifar10) -> None:
    data_dir, images, labels = fake_cifar10
    ds = data.cifar10(data_dir=data_dir, normalize=False, dtype=np.float64)
    assert ds.num_classes == 10
    for split, x, y in [("train", ds.x_train, ds.y_train), ("test", ds.x_test, ds.y_test)]:
        assert x.shape == images[split].shape and y.dtype == np.int32
        assert x.min() >= 0.0 and x.max() <= 1.0
        raw = np.rint(x * 255.0).astype(np.uint8)
        np.testing.assert_allclose(raw / 255.0, x, atol=1e-12)  # exactly p / 255
        # TFDS shuffles on write, so compare (image, label) pairs as multisets.
        assert _pairs(raw, y) == _pairs(images[split], labels[split])


def test_normalisation_uses_training_split_statistics(fake_cifar10) -> None:
    data_dir, images, _ = fake_cifar10
    ds = load_tfds("cifar10", data_dir=os.fspath(data_dir))
    raw = load_tfds("cifar10", data_dir=os.fspath(data_dir), normalize=False, dtype=np.float64)
    np.testing.assert_array_equal(ds.y_test, raw.y_test)  # reads are deterministic
    train = images["train"].astype(np.float64) / 255.0
    mean, std = train.mean(axis=(0, 1, 2)), train.std(axis=(0, 1, 2))
    assert np.ptp(mean) > 0.05  # the fake channels really differ
    np.testing.assert_allclose(ds.x_train.mean(axis=(0, 1, 2), dtype=np.float64), 0.0, atol=1e-6)
    np.testing.assert_allclose(ds.x_train.std(axis=(0, 1, 2), dtype=np.float64), 1.0, atol=1e-6)
    # The test split is standardised with the *training* statistics, not its own.
    np.testing.assert_allclose(ds.x_test, (raw.x_test - mean) / std, atol=1e-5)
    assert np.abs(ds.x_test.mean(axis=(0, 1, 2))).max() > 1e-3


def test_channel_statistics_matches_numpy() -> None:
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, size=(7, 5, 4, 3)).astype(np.uint8)
    mean, std = channel_statistics(images)
    scaled = images.astype(np.float64) / 255.0
    np.testing.assert_allclose(mean, scaled.mean(axis=(0, 1, 2)), rtol=1e-12)
    np.testing.assert_allclose(std, scaled.std(axis=(0, 1, 2)), rtol=1e-12)
    with pytest.raises(ValueError, match="uint8"):
        channel_statistics(scaled)


# ---------------------------------------------------------------------------------------------
# Absent, incomplete and unreadable data
# ---------------------------------------------------------------------------------------------


def test_absent_data_raises_clear_error_without_downloading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_download(*args, **kwargs):
        raise AssertionError("the loader must never try to download")

    monkeypatch.setattr(tfds.core.DatasetBuilder, "download_and_prepare", no_download)
    with pytest.raises(DatasetNotPreparedError) as info:
        data.load("mnist", data_dir=tmp_path)
    err = info.value
    assert isinstance(err, FileNotFoundError)
    message = str(err)
    for needle in [
        "'mnist' is not prepared",
        str(tmp_path),
        "download_and_prepare()",
        "file_format='array_record'",
        "TFDS_DATA_DIR",
    ]:
        assert needle in message
    assert err.__cause__ is None and err.__context__ is None  # no chained deep traceback
    assert list(tmp_path.iterdir()) == []  # nothing was written or fetched


def test_incomplete_data_raises_not_prepared(tmp_path: Path) -> None:
    _write_metadata(tmp_path, "fashion_mnist", {"train": 10, "test": 5})  # metadata, no data
    with pytest.raises(DatasetNotPreparedError, match="incomplete"):
        data.fashion_mnist(data_dir=tmp_path)


def test_tfrecord_format_without_tensorflow(tmp_path: Path) -> None:
    _write_metadata(tmp_path, "mnist", {"train": 10, "test": 5}, file_format="tfrecord")
    expected = DatasetNotPreparedError if TF_AVAILABLE else DatasetFormatError
    with pytest.raises(expected, match=r"TensorFlow|incomplete"):
        data.mnist(data_dir=tmp_path)

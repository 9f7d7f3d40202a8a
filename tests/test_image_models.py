"""The image models of ``bdl/models/``: the MNIST-1D CNN (with and without augmentation) and the
ResNet-20 with FRN on CIFAR, the latter on ``tfds.testing.mock_data`` (nothing is downloaded)."""

from __future__ import annotations

import os
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bdl
from bdl.model_files import load_spec

tfds = pytest.importorskip("tensorflow_datasets")

from test_data_tfds import _write_metadata  # noqa: E402  (the TFDS metadata writer)


def _count(tree) -> int:
    return sum(int(np.size(x)) for x in jax.tree.leaves(tree))


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BDL_CACHE_DIR", str(tmp_path))  # the MNIST-1D arrays are cached here


def test_cnn_mnist1d_with_and_without_augmentation() -> None:
    plain = load_spec("cnn_mnist1d").compile()
    assert plain.n == 4000 and plain.x_test.shape == (1000, 40) and plain.augment is None
    # 3 convolutions of 25 channels (kernels 5, 3, 3) and a dense read-out of 25 × 5 features
    assert plain.dim == (5 * 25 + 25) + 2 * (3 * 25 * 25 + 25) + (125 * 10 + 10)
    spec = load_spec("cnn_mnist1d", augment=True, batch_size=50)
    compiled = spec.compile()
    assert compiled.augment == bdl.augment.random_shift(4) and compiled.dim == plain.dim
    kernel = bdl.kernels.get("sghmc", **spec.kernel_hyper("sghmc"))
    samples = bdl.sample(compiled, kernel, num_steps=40, thin=20, num_chains=2, seed=0)
    assert not np.any(samples.diverged)
    probs = compiled.predict(samples.flat(), compiled.x_test)
    assert probs.shape == (1000, 10) and np.all(np.isfinite(probs))


def test_cnn_mnist1d_options() -> None:
    spec = load_spec("cnn_mnist1d", augment=True, max_shift=2, frn=True, width=8)
    assert spec.model.augment == bdl.augment.random_shift(2)
    assert "random shifts ±2" in spec.description and "FRN" in spec.description


@pytest.fixture(scope="module")
def cifar_metadata(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("tfds_cifar_metadata")
    for name in ("cifar10", "cifar100"):
        _write_metadata(data_dir, name, {"train": 50_000, "test": 10_000})
    return data_dir


def _resnet(metadata: Path, **options) -> tuple[bdl.ModelSpec, bdl.CompiledModel]:
    with tfds.testing.mock_data(num_examples=24, data_dir=os.fspath(metadata)):
        spec = load_spec("resnet20_cifar", data_dir="/ignored/by/mock_data", **options)
    return spec, spec.compile()


def test_resnet_on_mock_cifar_takes_an_augmented_gradient_step(cifar_metadata: Path) -> None:
    spec, compiled = _resnet(cifar_metadata, subset=16, depth=8, dataset="cifar100", batch_size=8)
    assert compiled.n == 16 and compiled.batch_size == 8 and compiled.num_classes == 100
    assert repr(compiled.augment) == "chain(random_crop(4), horizontal_flip(0.5))"
    assert spec.model.name == "resnet8_cifar100"
    # the paper's run lengths, in epochs of n // B = 2 steps
    assert (spec.num_steps, spec.burn_in, spec.thin) == (1500 * 2, 150 * 2, 50 * 2)

    @eqx.filter_jit
    def sgd_step(target, position, key):
        batch, _ = target.next_batch(target.init_batches(key), jnp.int32(0))
        energy, grad = target.stochastic_energy_and_grad(position, batch)
        return energy, jax.tree.map(lambda p, g: p - 1e-4 * g, position, grad)

    energy, moved = sgd_step(compiled, compiled.initial_position, jax.random.key(0))
    assert np.isfinite(energy)
    assert all(np.all(np.isfinite(x)) for x in jax.tree.leaves(moved))
    assert not np.array_equal(
        moved["net"]["Dense_0"]["kernel"], compiled.initial_position["net"]["Dense_0"]["kernel"]
    )


def test_resnet20_has_the_resnet20_shapes(cifar_metadata: Path) -> None:
    with tfds.testing.mock_data(num_examples=4, data_dir=os.fspath(cifar_metadata)):
        spec = load_spec("resnet20_cifar", subset=4)
    network = spec.model.network
    params = jax.eval_shape(network.init, jax.random.key(0), spec.data.x_train[:1])["params"]

    def conv(k, c_in, c_out):
        return k * k * c_in * c_out + c_out

    def block(c_in, c_out):  # two 3×3 convolutions, FRN + TLU (3c) and FRN (2c), projection
        projection = conv(1, c_in, c_out) if c_in != c_out else 0
        return conv(3, c_in, c_out) + 3 * c_out + conv(3, c_out, c_out) + 2 * c_out + projection

    expected = conv(3, 3, 16) + 3 * 16 + 64 * 10 + 10
    expected += sum(block(16, 16) for _ in range(3))
    expected += block(16, 32) + 2 * block(32, 32) + block(32, 64) + 2 * block(64, 64)
    assert _count(params) == expected == 273_418


@pytest.mark.slow
def test_resnet20_on_mock_cifar10_samples_two_steps(cifar_metadata: Path) -> None:
    _, compiled = _resnet(cifar_metadata, subset=16, batch_size=8)
    kernel = bdl.kernels.get("sghmc", learning_rate=0.01, momentum=0.9)
    samples = bdl.sample(compiled, kernel, num_steps=2, num_chains=1, seed=0)
    assert compiled.dim == 273_418 and not np.any(samples.diverged)
    assert all(np.all(np.isfinite(x)) for x in jax.tree.leaves(samples.positions))


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"dataset": "svhn"}, "dataset must be 'cifar10' or 'cifar100'"),
        ({"depth": 18}, "depth must be 6k"),
        ({"subset": 0}, "subset must be a positive"),
    ],
)
def test_resnet_bad_options(cifar_metadata: Path, options, match) -> None:
    with (
        tfds.testing.mock_data(num_examples=4, data_dir=os.fspath(cifar_metadata)),
        pytest.raises(ValueError, match=match),
    ):
        load_spec("resnet20_cifar", **options)

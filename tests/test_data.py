"""Tests of bdl.data: registry, scikit-learn datasets, synthetic generators and log-densities.

The TFDS loaders are tested in ``tests/test_data_tfds.py``. Monte Carlo checks use tolerances of
about 5 standard errors, so with fixed seeds they are deterministic and far from flaky.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bdl import data
from bdl.data import Dataset
from bdl.data.synthetic import GAP_CLUSTERS, GAP_TEST_RANGE, MLP_PRIOR_BIAS_SD
from bdl.data.synthetic_energies import TWO_MODE_MEANS, TWO_MODE_VARIANCES

ALL_NAMES = {
    "mnist",
    "mnist1d",
    "fashion_mnist",
    "cifar10",
    "cifar100",
    "breast_cancer",
    "digits",
    "diabetes",
    "iris",
    "regression_1d_gap",
    "mlp_prior_data",
    "linear_regression",
}
# mnist1d is generated offline but tested on its own below (it writes a cache file)
OFFLINE_NAMES = sorted(ALL_NAMES - {"mnist", "mnist1d", "fashion_mnist", "cifar10", "cifar100"})

# Compiled once: op-by-op (eager) JAX compiles every primitive, which is slow on 2 cores.
two_mode = jax.jit(data.two_mode_log_density)
two_mode_grad = jax.jit(jax.vmap(jax.grad(data.two_mode_log_density)))
two_mode_hessian = jax.jit(jax.vmap(jax.hessian(data.two_mode_log_density)))
gaussian = jax.jit(data.gaussian_log_density)


def _assert_same(a: Dataset, b: Dataset) -> None:
    for field in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert a.num_classes == b.num_classes and a.name == b.name


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------


def test_names_cover_every_dataset() -> None:
    assert set(data.names()) == ALL_NAMES
    assert list(data.names()) == sorted(ALL_NAMES)


def test_unknown_name_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="unknown dataset 'nope'") as info:
        data.load("nope")
    for name in ALL_NAMES:
        assert name in str(info.value)


@pytest.mark.parametrize("name", OFFLINE_NAMES)
def test_load_offline_datasets_by_name(name: str) -> None:
    ds = data.load(name, seed=3)
    assert isinstance(ds, Dataset) and ds.name == name and ds.has_test
    assert ds.x_train.dtype == np.float32 and ds.x_test.dtype == np.float32
    assert len(ds.x_train) == len(ds.y_train) and len(ds.x_test) == len(ds.y_test)
    if ds.num_classes is None:
        assert ds.y_train.dtype == np.float32 and ds.y_train.ndim == 1
    else:
        assert ds.y_train.dtype == np.int32
        for y in (ds.y_train, ds.y_test):
            assert y.min() >= 0 and y.max() < ds.num_classes
    _assert_same(ds, data.load(name, seed=3))  # reproducible
    other = data.load(name, seed=4)
    assert not np.array_equal(ds.x_train, other.x_train)


# ---------------------------------------------------------------------------------------------
# scikit-learn datasets
# ---------------------------------------------------------------------------------------------


def _assert_standardised(x_train: np.ndarray) -> None:
    np.testing.assert_allclose(x_train.mean(axis=0, dtype=np.float64), 0.0, atol=1e-5)
    np.testing.assert_allclose(x_train.std(axis=0, dtype=np.float64), 1.0, atol=1e-5)


def _assert_stratified(ds: Dataset) -> None:
    assert ds.num_classes is not None
    n_train, n_test = len(ds.y_train), len(ds.y_test)
    counts = np.bincount(np.concatenate([ds.y_train, ds.y_test]), minlength=ds.num_classes)
    expected_test = counts * n_test / (n_train + n_test)
    np.testing.assert_allclose(
        np.bincount(ds.y_test, minlength=ds.num_classes), expected_test, atol=1
    )


def test_breast_cancer() -> None:
    ds = data.breast_cancer()
    assert ds.x_train.shape == (455, 30) and ds.x_test.shape == (114, 30)
    assert ds.num_classes == 2 and set(np.unique(ds.y_train)) == {0, 1}
    _assert_standardised(ds.x_train)
    _assert_stratified(ds)
    # Test features use the training statistics, so they are not exactly standardised.
    assert np.abs(ds.x_test.mean(axis=0)).max() > 1e-3
    assert data.breast_cancer(test_fraction=0.5).x_test.shape == (285, 30)
    with pytest.raises(ValueError, match="test_fraction"):
        data.breast_cancer(test_fraction=1.0)


def test_iris() -> None:
    ds = data.iris()
    assert ds.x_train.shape == (120, 4) and ds.x_test.shape == (30, 4) and ds.num_classes == 3
    np.testing.assert_array_equal(np.bincount(ds.y_test), [10, 10, 10])
    _assert_standardised(ds.x_train)


def test_digits_flat_and_image_layouts() -> None:
    flat = data.digits()
    assert flat.x_train.shape == (1437, 64) and flat.x_test.shape == (360, 64)
    assert flat.num_classes == 10 and set(np.unique(flat.y_test)) == set(range(10))
    assert flat.x_train.min() == 0.0 and flat.x_train.max() == 1.0  # pixel counts 0…16, / 16
    np.testing.assert_array_equal(np.unique(flat.x_train * 16), np.arange(17))
    _assert_stratified(flat)
    images = data.digits(flatten=False)
    assert images.x_train.shape == (1437, 8, 8, 1)
    np.testing.assert_array_equal(images.x_train.reshape(-1, 64), flat.x_train)
    np.testing.assert_array_equal(images.y_train, flat.y_train)


def test_diabetes_regression() -> None:
    ds = data.diabetes()
    assert ds.x_train.shape == (353, 10) and ds.y_train.shape == (353,)
    assert ds.num_classes is None
    _assert_standardised(ds.x_train)
    assert ds.y_train.min() >= 25.0 and ds.y_train.max() <= 346.0  # raw disease progression
    scaled = data.diabetes(standardize_y=True)
    np.testing.assert_allclose(scaled.y_train.mean(), 0.0, atol=1e-5)
    np.testing.assert_allclose(scaled.y_train.std(), 1.0, atol=1e-5)
    slope, _ = np.polyfit(ds.y_test, scaled.y_test, 1)  # the same affine map on the test split
    np.testing.assert_allclose(slope, 1.0 / ds.y_train.std(), rtol=1e-4)


# ---------------------------------------------------------------------------------------------
# 1-D regression with a gap
# ---------------------------------------------------------------------------------------------


def test_regression_1d_gap_has_an_empty_gap() -> None:
    ds = data.regression_1d_gap(n=101, seed=1)
    x = ds.x_train[:, 0]
    assert ds.x_train.shape == (101, 1) and ds.y_train.shape == (101,)
    (a0, b0), (a1, b1) = GAP_CLUSTERS
    left, right = (x >= a0) & (x <= b0), (x >= a1) & (x <= b1)
    assert np.all(left | right)  # every input in a cluster: the gap (b0, a1) is empty
    assert np.sum(left) == 51 and np.sum(right) == 50
    assert not np.any((x > b0) & (x < a1))
    grid = ds.x_test[:, 0]
    assert np.all(np.diff(grid) > 0)
    np.testing.assert_allclose([grid[0], grid[-1]], GAP_TEST_RANGE)
    assert np.sum((grid > b0) & (grid < a1)) > 10  # the test grid covers the gap
    assert grid.min() < a0 and grid.max() > b1  # … and both clusters entirely


def test_regression_1d_gap_noise_level() -> None:
    noise_sd = 0.1
    ds = data.regression_1d_gap(n=4000, noise_sd=noise_sd, n_test=4000, seed=0)
    for x, y in [(ds.x_train, ds.y_train), (ds.x_test, ds.y_test)]:
        residual = y.astype(np.float64) - np.sin(x[:, 0].astype(np.float64))
        assert abs(residual.mean()) < 5 * noise_sd / math.sqrt(len(y))
        # sd of the sample sd ≈ σ / sqrt(2n) ≈ 1.1 %: allow 6 %.
        np.testing.assert_allclose(residual.std(), noise_sd, rtol=0.06)


# ---------------------------------------------------------------------------------------------
# Data from an MLP prior (Wenzel et al. 2020)
# ---------------------------------------------------------------------------------------------


def test_mlp_prior_data_shapes() -> None:
    ds = data.mlp_prior_data()
    assert ds.x_train.shape == (100, 5) and ds.x_test.shape == (10_000, 5)
    assert ds.num_classes == 3 and ds.y_test.dtype == np.int32
    assert set(np.unique(ds.y_test)) == {0, 1, 2}
    net = data.mlp_prior_network()
    assert [w.shape for w in net.weights] == [(5, 10), (10, 10), (10, 3)]
    assert [b.shape for b in net.biases] == [(10,), (10,), (3,)]
    deeper = data.mlp_prior_network(depth=4, width=7, num_classes=5, input_dim=2)
    assert [w.shape for w in deeper.weights] == [(2, 7), (7, 7), (7, 7), (7, 7), (7, 5)]
    # x ~ N(0, I): moments of the 50,000 test inputs.
    np.testing.assert_allclose(ds.x_test.mean(axis=0), 0.0, atol=5 / math.sqrt(10_000))
    np.testing.assert_allclose(ds.x_test.std(axis=0), 1.0, atol=5 / math.sqrt(2 * 10_000))


@pytest.mark.parametrize("seed", [0, 1])
def test_mlp_prior_labels_come_from_the_network(seed: int) -> None:
    ds = data.mlp_prior_data(seed=seed)
    probs = data.mlp_prior_network(seed=seed).probs(ds.x_test)
    n = len(ds.y_test)
    # Bayes-optimal accuracy: argmax of the true network, versus its expectation E[max_k p_k].
    correct = probs.argmax(axis=1) == ds.y_test
    expected = probs.max(axis=1).mean()
    assert abs(correct.mean() - expected) < 5 * math.sqrt(expected * (1 - expected) / n)
    assert 1 / 3 + 0.1 < correct.mean() < 0.95  # informative, but labels are noisy
    # Class frequencies match the mean predicted probabilities.
    freq = np.bincount(ds.y_test, minlength=3) / n
    np.testing.assert_allclose(freq, probs.mean(axis=0), atol=5 * 0.5 / math.sqrt(n))
    # Mean log-likelihood of the labels ≈ −E[H(p(·|x))] under the true network...
    log_lik = np.log(probs[np.arange(n), ds.y_test])
    neg_entropy = np.sum(probs * np.log(probs), axis=1)
    assert abs(log_lik.mean() - neg_entropy.mean()) < 5 * log_lik.std() / math.sqrt(n)
    # ... and a different network from the same prior explains the labels clearly worse.
    other = data.mlp_prior_network(seed=seed + 100).probs(ds.x_test)
    assert np.log(other[np.arange(n), ds.y_test]).mean() < log_lik.mean() - 0.1


def test_mlp_prior_network_hyperparameters() -> None:
    """He-normal weights N(0, 2/fan_in) and biases N(0, 0.05²), pooled over 200 networks."""
    z_weights, z_biases = [], []
    for seed in range(200):
        net = data.mlp_prior_network(seed=seed)
        for w, b in zip(net.weights, net.biases, strict=True):
            z_weights.append(w.ravel() / math.sqrt(2.0 / w.shape[0]))
            z_biases.append(b / MLP_PRIOR_BIAS_SD)
    for z in (np.concatenate(z_weights), np.concatenate(z_biases)):
        n = len(z)  # 36,000 weights, 4,600 biases: each z ~ N(0, 1)
        assert abs(z.mean()) < 5 / math.sqrt(n)
        assert abs(z.var() - 1.0) < 5 * math.sqrt(2 / n)
    # Per layer, the empirical sd of a single wide network is close to sqrt(2/fan_in).
    wide = data.mlp_prior_network(depth=2, width=300, input_dim=50, seed=0)
    for w in wide.weights[:2]:
        fan_in = w.shape[0]
        np.testing.assert_allclose(w.std(), math.sqrt(2 / fan_in), rtol=5 / math.sqrt(2 * w.size))


def test_mlp_prior_reproducible_and_network_independent_of_sizes() -> None:
    _assert_same(data.mlp_prior_data(seed=7), data.mlp_prior_data(seed=7))
    a = data.mlp_prior_network(seed=7)
    b = data.mlp_prior_network(seed=7)
    for wa, wb in zip(a.weights, b.weights, strict=True):
        np.testing.assert_array_equal(wa, wb)
    small = data.mlp_prior_data(n_train=5, n_test=5, seed=7)
    assert small.x_train.shape == (5, 5)
    assert not np.array_equal(a.weights[0], data.mlp_prior_network(seed=8).weights[0])


# ---------------------------------------------------------------------------------------------
# Bayesian linear regression
# ---------------------------------------------------------------------------------------------


def test_linear_regression_generating_process() -> None:
    noise_sd = 0.5
    ds = data.linear_regression(n=5000, dim=4, noise_sd=noise_sd, seed=2)
    w = data.linear_regression_weights(dim=4, seed=2)
    assert ds.x_train.shape == (5000, 4) and ds.y_train.shape == (5000,)
    residual = ds.y_train - ds.x_train.astype(np.float64) @ w
    np.testing.assert_allclose(residual.std(), noise_sd, rtol=5 / math.sqrt(2 * 5000))
    mu, sigma = data.linear_regression_posterior(ds.x_train, ds.y_train, noise_sd)
    z = np.linalg.solve(np.linalg.cholesky(sigma), mu - w)
    assert np.all(np.abs(z) < 5)


def test_linear_regression_posterior_formula() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((6, 3)), rng.standard_normal(6)
    noise_sd, prior_sd = 0.7, 1.3
    mu, sigma = data.linear_regression_posterior(x, y, noise_sd, prior_sd)
    # Woodbury / function-space form: Σ = s²I − s² Xᵀ (σ²I + s² XXᵀ)⁻¹ X s².
    k = noise_sd**2 * np.eye(6) + prior_sd**2 * x @ x.T
    sigma_ref = prior_sd**2 * np.eye(3) - prior_sd**4 * x.T @ np.linalg.solve(k, x)
    mu_ref = prior_sd**2 * x.T @ np.linalg.solve(k, y)
    np.testing.assert_allclose(sigma, sigma_ref, atol=1e-12)
    np.testing.assert_allclose(mu, mu_ref, atol=1e-12)


def test_linear_regression_posterior_is_calibrated() -> None:
    """With w drawn from the prior, (w − μ)ᵀ Σ⁻¹ (w − μ) ~ χ²_dim exactly."""
    dim, noise_sd, stats = 3, 0.5, []
    for seed in range(300):
        ds = data.linear_regression(n=10, dim=dim, noise_sd=noise_sd, seed=seed, n_test=1)
        w = data.linear_regression_weights(dim=dim, seed=seed)
        mu, sigma = data.linear_regression_posterior(ds.x_train, ds.y_train, noise_sd)
        stats.append((w - mu) @ np.linalg.solve(sigma, w - mu))
    stats = np.asarray(stats)
    # χ²_3: mean 3, variance 6.
    assert abs(stats.mean() - dim) < 5 * math.sqrt(2 * dim / len(stats))


# ---------------------------------------------------------------------------------------------
# Synthetic log-densities
# ---------------------------------------------------------------------------------------------


def test_two_mode_density_normalises() -> None:
    """Riemann sum on [−9, 9] × [−8, 8] with step 0.02; error well below the 1e-4 tolerance."""
    h = 0.02
    g1, g2 = np.arange(-9.0, 9.0, h), np.arange(-8.0, 8.0, h)
    grid = np.stack(np.meshgrid(g1, g2, indexing="ij"), axis=-1)
    log_p = np.asarray(two_mode(grid), dtype=np.float64)
    assert log_p.shape == grid.shape[:2]
    total = np.exp(log_p).sum() * h * h
    assert abs(total - 1.0) < 1e-4
    # Each component carries half the mass: the sharp one lies almost entirely in θ₁ < 0.
    left_mass = np.exp(log_p[g1 < 0]).sum() * h * h
    expected = 0.5 * _normal_cdf(2 / math.sqrt(0.5)) + 0.5 * _normal_cdf(-2.0)
    assert abs(left_mass - expected) < 1e-3


def _normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def test_two_mode_density_modes() -> None:
    h = 0.01
    g = np.arange(-5.0, 5.0, h)
    grid = np.stack(np.meshgrid(g, g, indexing="ij"), axis=-1)
    log_p = np.asarray(two_mode(grid))
    for sign, mean in [(-1, TWO_MODE_MEANS[0]), (1, TWO_MODE_MEANS[1])]:
        masked = np.where(sign * grid[..., 0] > 0, log_p, -np.inf)
        i, j = np.unravel_index(np.argmax(masked), masked.shape)
        np.testing.assert_allclose(grid[i, j], mean, atol=h)
    means = np.asarray(TWO_MODE_MEANS, dtype=np.float32)
    np.testing.assert_allclose(two_mode_grad(means), 0.0, atol=1e-3)
    # Curvature −I/σ²: −2·I at the sharp mode, −I at the flat one.
    expected_hessian = [-np.eye(2) / var for var in TWO_MODE_VARIANCES]
    np.testing.assert_allclose(two_mode_hessian(means), expected_hessian, atol=1e-3)
    peak_sharp, peak_flat = np.exp(two_mode(means))
    np.testing.assert_allclose(
        [peak_sharp, peak_flat], [1 / (2 * math.pi), 1 / (4 * math.pi)], rtol=1e-4
    )


def test_two_mode_density_matches_mixture_and_is_stable() -> None:
    theta = 3 * np.random.default_rng(0).standard_normal((50, 2)).astype(np.float32)
    direct = np.logaddexp(
        math.log(0.5) + np.asarray(gaussian(theta, np.array([-2.0, -1.0]), 0.5 * np.eye(2))),
        math.log(0.5) + np.asarray(gaussian(theta, np.array([2.0, 1.0]), np.eye(2))),
    )
    np.testing.assert_allclose(two_mode(theta), direct, rtol=1e-5, atol=1e-5)
    far = np.array([[300.0, 200.0], [-500.0, 40.0]], dtype=np.float32)
    value = two_mode(far)
    assert np.all(np.isfinite(value)) and np.all(value < -1e4)
    assert np.all(np.isfinite(two_mode_grad(far)))
    assert two_mode(np.zeros((3, 4, 2), np.float32)).shape == (3, 4)


def test_gaussian_log_density_against_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    mean, cov = data.correlated_gaussian(dim=20, seed=0)
    theta = np.asarray(mean) + np.random.default_rng(0).standard_normal((7, 20))
    expected = stats.multivariate_normal(np.asarray(mean, np.float64), np.asarray(cov, np.float64))
    np.testing.assert_allclose(gaussian(theta, mean, cov), expected.logpdf(theta), rtol=1e-4)
    log_density = jax.jit(data.gaussian_log_density_fn(mean, cov))
    np.testing.assert_allclose(log_density(theta), expected.logpdf(theta), rtol=1e-4)
    assert log_density(theta[0]).shape == ()


def test_random_gaussians() -> None:
    mean, cov = data.correlated_gaussian(dim=20, seed=0)
    assert mean.shape == (20,) and cov.shape == (20, 20)
    np.testing.assert_allclose(cov, cov.T, atol=1e-7)
    eig = np.linalg.eigvalsh(np.asarray(cov, np.float64))
    assert eig.min() >= 0.1 - 1e-5 and eig.max() <= 1.0 + 1e-5
    sd = np.sqrt(np.diag(cov))
    corr = np.asarray(cov) / np.outer(sd, sd) - np.eye(20)
    assert np.abs(corr).max() > 0.2  # genuinely correlated
    np.testing.assert_array_equal(cov, data.correlated_gaussian(dim=20, seed=0)[1])
    assert not np.array_equal(cov, data.correlated_gaussian(dim=20, seed=1)[1])

    mean, cov = data.diagonal_gaussian(dim=10, seed=0)
    assert mean.shape == (10,) and cov.shape == (10, 10)
    np.testing.assert_array_equal(cov, jnp.diag(jnp.diag(cov)))
    assert np.all((np.diag(cov) >= 0.1 - 1e-6) & (np.diag(cov) <= 1.0 + 1e-6))


# ---------------------------------------------------------------------------------------------
# MNIST-1D
# ---------------------------------------------------------------------------------------------


def test_mnist1d_default_split_shapes_and_balance(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("BDL_CACHE_DIR", str(tmp_path))
    ds = data.load("mnist1d")
    assert ds.name == "mnist1d" and ds.num_classes == 10
    assert ds.x_train.shape == (4000, 40) and ds.x_test.shape == (1000, 40)
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int32
    # 500 examples of each class in all, shuffled before the split
    counts = np.bincount(np.concatenate([ds.y_train, ds.y_test]), minlength=10)
    np.testing.assert_array_equal(counts, np.full(10, 500))
    # the generator standardises the whole set: global mean 0, standard deviation 1
    both = np.concatenate([ds.x_train, ds.x_test]).astype(np.float64)
    assert abs(both.mean()) < 1e-5 and abs(both.std() - 1) < 1e-5
    cached = list((tmp_path / "data").glob("mnist1d-*.npz"))
    assert len(cached) == 1
    _assert_same(ds, data.mnist1d())  # read back from the cache: identical arrays


def test_mnist1d_deterministic_by_seed_and_cache_equals_generation(tmp_path) -> None:
    fresh = data.mnist1d(seed=7, num_samples=200, cache=False)
    _assert_same(fresh, data.mnist1d(seed=7, num_samples=200, cache=False))
    _assert_same(fresh, data.mnist1d(seed=7, num_samples=200, cache=tmp_path))  # generated
    _assert_same(fresh, data.mnist1d(seed=7, num_samples=200, cache=tmp_path))  # read back
    other = data.mnist1d(seed=8, num_samples=200, cache=False)
    assert not np.array_equal(fresh.x_train, other.x_train)
    assert fresh.x_train.shape == (160, 40) and fresh.x_test.shape == (40, 40)


def test_mnist1d_leaves_global_random_state_alone() -> None:
    import random

    np.random.seed(123)
    random.seed(123)
    expected_np, expected_py = np.random.rand(), random.random()
    np.random.seed(123)
    random.seed(123)
    data.mnist1d(seed=1, num_samples=100, cache=False)
    assert np.random.rand() == expected_np and random.random() == expected_py


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_samples": 105}, ValueError, "num_samples must be a multiple of 10"),
        ({"train_split": 1.0}, ValueError, "train_split"),
        ({"seed": -1}, ValueError, "seed"),
        ({"cache": 3}, TypeError, "cache must be True, False or a directory"),
    ],
)
def test_mnist1d_bad_arguments(kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        data.mnist1d(**kwargs)

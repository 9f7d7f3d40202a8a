"""The statistical battery every exact kernel runs: correlated Gaussian, tempered Gaussian,
conjugate linear regression, and (for the Gibbs wrapper) a hierarchical posterior with a conjugate
precision — moments checked with ESS-based z-scores at fixed seeds."""

import jax.numpy as jnp
import normal_gamma
import numpy as np
import pytest
from battery_settings import SETTINGS
from stat_utils import assert_moments

import bdl
from bdl.model_files import load_spec

MEAN = np.array([1.0, -1.0, 0.5])
COV = np.array([[1.0, 0.4, 0.2], [0.4, 0.8, -0.3], [0.2, -0.3, 1.2]])


def gaussian_potential(temperature: float) -> bdl.Potential:
    precision = jnp.asarray(np.linalg.inv(COV))

    def log_density(theta):
        x = jnp.concatenate([theta["a"], theta["b"]]) - jnp.asarray(MEAN)
        return -0.5 * x @ precision @ x

    init = {"a": jnp.zeros(2), "b": jnp.zeros(1)}
    return bdl.Potential(log_density, init=init, temperature=temperature, name="gaussian3")


def flatten(positions) -> np.ndarray:
    return np.concatenate([np.asarray(positions["a"]), np.asarray(positions["b"])], axis=-1)


EXACT = [name for name, s in SETTINGS.items() if s is not None]


def having(entry: str) -> list[str]:
    """The exact kernels with battery settings for ``entry``."""
    return [name for name in EXACT if entry in SETTINGS[name]]


def test_every_registered_kernel_has_battery_settings():
    missing = sorted(set(bdl.kernels.names()) - set(SETTINGS))
    assert not missing, f"add battery settings for {missing} in tests/battery_settings.py"


def check_correlated_gaussian(kernel, cfg: dict, temperature: float) -> None:
    """Mean μ and covariance T·Σ of a correlated Gaussian sampled by ``kernel``."""
    target = bdl.compile(gaussian_potential(temperature))
    samples = bdl.sample(
        target,
        kernel,
        num_steps=cfg["steps"],
        burn_in=cfg["steps"] // 10,
        thin=cfg["thin"],
        num_chains=8,
        seed=11,
    )
    assert_moments(flatten(samples.positions), MEAN, temperature * COV, min_ess=400)


def check_conjugate_regression(kernel, cfg: dict, batch_size: int | None = None) -> None:
    """The closed-form posterior of Bayesian linear regression under minibatch gradients (of
    the model file's batch size, or ``batch_size``)."""
    spec = load_spec("linear_regression")
    target = (
        spec.compile()
        if batch_size is None
        else bdl.compile(spec.model, spec.data, batch_size=batch_size)
    )
    samples = bdl.sample(
        target,
        kernel,
        num_steps=cfg["steps"],
        burn_in=2_000,
        thin=cfg["thin"],
        num_chains=4,
        seed=5,
    )
    draws = np.asarray(samples.positions["net"]["w"], np.float64)
    assert_moments(draws, spec.reference["mean"], spec.reference["cov"], min_ess=400)


@pytest.mark.parametrize("name", having("gaussian"))
@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_correlated_gaussian(name, temperature):
    """Mean μ and covariance T·Σ of a correlated Gaussian at T = 1 and T = 0.5."""
    cfg = SETTINGS[name]["gaussian"]
    check_correlated_gaussian(bdl.kernels.get(name, **cfg["hyper"]), cfg, temperature)


@pytest.mark.parametrize("name", having("conjugate"))
def test_conjugate_regression(name):
    """The closed-form posterior of Bayesian linear regression under minibatch gradients."""
    cfg = SETTINGS[name]["conjugate"]
    check_conjugate_regression(bdl.kernels.get(name, **cfg["hyper"]), cfg)


@pytest.mark.parametrize("name", having("hierarchical"))
def test_hierarchical_conjugate_precision(name):
    """Moments of (w, log λ) in y_j ~ N(w_j, 1), w_j ~ N(0, 1/λ), λ ~ Gamma(2, 2) against the
    exact posterior (one-dimensional quadrature over λ, tests/normal_gamma.py)."""
    cfg = SETTINGS[name]["hierarchical"]
    target = bdl.compile(normal_gamma.model(), normal_gamma.data())
    samples = bdl.sample(
        target,
        bdl.kernels.get(name, **cfg["hyper"]),
        num_steps=cfg["steps"],
        burn_in=cfg["steps"] // 10,
        thin=cfg["thin"],
        num_chains=4,
        seed=1,
    )
    draws = np.concatenate(
        [
            np.asarray(samples.positions["net"]["w"], np.float64),
            np.asarray(samples.positions["hyper"]["lam"]["precision"], np.float64)[..., None],
        ],
        axis=-1,
    )
    mean, cov = normal_gamma.exact_moments()
    assert_moments(draws, mean, cov, min_ess=400)

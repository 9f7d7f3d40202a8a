"""SGLD and SGHMC recover the closed-form posterior of conjugate Bayesian linear regression."""

import numpy as np
import pytest
from stat_utils import assert_moments

import bdl
from bdl.model_files import load_spec


@pytest.fixture(scope="module")
def spec():
    return load_spec("linear_regression")


@pytest.mark.parametrize(
    ("name", "hyper"),
    [("sgld", {"step_size": 1e-4}), ("sghmc", {"step_size": 5e-3, "friction": 20.0})],
)
def test_conjugate_posterior_moments(spec, name, hyper):
    """Mean and full covariance agree with N(μ, Σ) within ESS-based Monte Carlo error.

    Step sizes are small enough that the O(h) discretisation and minibatch-noise bias of the
    variance (≈ h(λ_max + σ²_grad)/2, below 1%) stays under the test's resolution at this ESS.
    """
    target = spec.compile()
    samples = bdl.sample(
        target,
        bdl.kernels.get(name, **hyper),
        num_steps=40_000,
        burn_in=2_000,
        thin=10,
        num_chains=4,
        seed=2,
    )
    draws = np.asarray(samples.positions["net"]["w"], np.float64)
    assert_moments(draws, spec.reference["mean"], spec.reference["cov"], min_ess=1_000)

"""A correlated Gaussian with injected unit gradient noise (Gong et al. 2019, Sec. 5.1)."""

import jax.numpy as jnp
import numpy as np

import bdl
from bdl.data.synthetic_energies import correlated_gaussian, gaussian_log_density_fn


def build(dim: int = 20, grad_noise: float = 1.0, seed: int = 0) -> bdl.ModelSpec:
    mean, cov = correlated_gaussian(dim, seed=seed)
    potential = bdl.Potential(
        log_density=gaussian_log_density_fn(mean, cov),
        init=jnp.zeros(dim),
        grad_noise=grad_noise,
        name=f"gaussian_noise_{dim}d",
    )
    # in full, as every model file declares it: the files share no code (bdl/models/__init__.py)
    return bdl.ModelSpec(
        potential,
        kernels={"sghmc": {"step_size": 0.05, "friction": 5.0}, "sgld": {"step_size": 5e-3}},
        # the slowest direction (variance 0.96) decorrelates in ≈ 200 steps at these settings:
        # 12,000 steps gave a bulk ESS of 225 (SGHMC) and R̂ 1.03, below the convergence gate
        num_steps=150_000,
        burn_in=5_000,
        thin=50,
        description=f"{dim}-D correlated Gaussian, N(0, {grad_noise}²) gradient noise",
        reference={"mean": np.asarray(mean), "cov": np.asarray(cov), "path": ""},
    )

"""Bayesian linear regression with a conjugate Gaussian prior: the exact posterior is known.

y = Xw + ε, ε ~ N(0, σ²), w ~ N(0, s²I) gives w | D ~ N(μ, Σ) with
Σ = (I/s² + XᵀX/σ²)⁻¹ and μ = ΣXᵀy/σ² (Bishop 2006, §3.3).
"""

import jax.numpy as jnp

import bdl
from bdl.data.synthetic import linear_regression, linear_regression_posterior


def linear(params, x):
    return x @ params["w"]


def build(
    n: int = 100,
    dim: int = 5,
    noise_sd: float = 0.5,
    temperature: float = 1.0,
    batch_size: int = 20,
) -> bdl.ModelSpec:
    data = linear_regression(n=n, dim=dim, noise_sd=noise_sd, seed=0)
    mean, cov = linear_regression_posterior(data.x_train, data.y_train, noise_sd, prior_sd=1.0)
    model = bdl.Model(
        network=linear,
        params={"w": jnp.zeros(dim)},
        likelihood=bdl.Gaussian(scale=noise_sd),
        prior=bdl.Normal(1.0),
        temperature=temperature,
        name="linear_regression",
    )
    # in full, as every model file declares it: the files share no code (bdl/models/__init__.py)
    return bdl.ModelSpec(
        model,
        data,
        batch_size=batch_size,
        kernels={
            "sgld": {"step_size": 2e-4},
            "sghmc": {"step_size": 5e-3, "friction": 20.0},
            "kinetic-l2e": {"step_size": 5e-3, "friction": 20.0},
            "l2e": {"step_size": 5e-3, "friction": 20.0},
            # the shipped NNSGHMC's f_Q ≈ 4–5 multiplies step and friction (docs/kernels/nnsghmc.md)
            "nnsghmc": {"step_size": 2.5e-3, "alpha": 10.0},
        },
        num_steps=20_000,
        burn_in=2_000,
        thin=5,
        description="conjugate linear regression (closed-form posterior)",
        reference={"mean": mean, "cov": temperature * cov, "path": "net/w"},
    )

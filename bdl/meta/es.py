"""Antithetic evolution strategies (Salimans et al. 2017) for meta-parameters given as pytrees.

ES estimates the gradient of the Gaussian-smoothed objective (Kim et al. 2024, Eq. 8)

    L_σ(φ) = E_{η ~ N(0, σ²I)} [L(φ + η)]

from loss values only, so the inner SG-MCMC chain of thousands of steps is never
differentiated and memory does not grow with its length. With N perturbation pairs ±η_i the
antithetic estimator is (Kim et al. 2024, Eq. 10)

    ĝ = (1/N) Σ_i [L(φ + η_i) − L(φ − η_i)] / (2σ²) · η_i,

unbiased for ∇L_σ(φ). On a quadratic L(φ) = ½φᵀAφ + bᵀφ it is unbiased for ∇L(φ) itself, and with
g = ∇L(φ) its covariance is (‖g‖²I + ggᵀ)/N: the even part of L cancels exactly in each pair,
which is the variance the antithetic pairing removes.

The population is laid out as ``[φ + η_1, …, φ + η_N, φ − η_1, …, φ − η_N]`` along a leading
axis, so one ``vmap`` evaluates it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

PyTree = Any


def perturbations(key: jax.Array, params: PyTree, num_pairs: int, sigma: float) -> PyTree:
    """η_1, …, η_N ~ N(0, σ²I) shaped like ``params`` with a leading axis of size N.

    Only the array leaves of ``params`` are perturbed; every leaf gets its own key.
    """
    if num_pairs < 1:
        raise ValueError(f"num_pairs must be >= 1; got {num_pairs}.")
    leaves, treedef = jax.tree.flatten(params)
    keys = jax.random.split(key, len(leaves))
    eps = [
        sigma * jax.random.normal(k, (num_pairs, *jnp.shape(x)), jnp.result_type(x))
        for k, x in zip(keys, leaves, strict=True)
    ]
    return jax.tree.unflatten(treedef, eps)


def antithetic_population(params: PyTree, eps: PyTree) -> PyTree:
    """``[φ + η_1, …, φ + η_N, φ − η_1, …, φ − η_N]`` stacked on a leading axis of size 2N."""
    return jax.tree.map(lambda p, e: jnp.concatenate([p + e, p - e], axis=0), params, eps)


def antithetic_gradient(
    losses_plus: jax.Array, losses_minus: jax.Array, eps: PyTree, sigma: float
) -> PyTree:
    """Kim et al. (2024), Eq. 10: (1/N) Σ_i (L(φ + η_i) − L(φ − η_i)) / (2σ²) · η_i."""
    weights = (losses_plus - losses_minus) / (2.0 * sigma**2 * losses_plus.shape[0])
    return jax.tree.map(lambda e: jnp.tensordot(weights.astype(e.dtype), e, axes=1), eps)


def es_gradient(
    loss_fn: Callable[[PyTree], jax.Array],
    params: PyTree,
    key: jax.Array,
    *,
    num_pairs: int,
    sigma: float,
) -> tuple[jax.Array, PyTree]:
    """Antithetic ES estimate of ∇L_σ(φ) for a scalar ``loss_fn(params)`` (Eq. 10).

    The 2N perturbed parameters are evaluated with one ``vmap``. Returns
    ``(mean population loss, gradient estimate)``.
    """
    eps = perturbations(key, params, num_pairs, sigma)
    losses = jax.vmap(loss_fn)(antithetic_population(params, eps))
    grad = antithetic_gradient(losses[:num_pairs], losses[num_pairs:], eps, sigma)
    return jnp.mean(losses), grad

"""Warm-up's mass: from the Hessian at the start, then from each slow window's θ.

At the start M comes from the curvature of the minibatch energy (:func:`hessian_mass`, dense,
or :func:`hessian_diagonal_mass`; a dense model where Newton's method converges from its start
starts from the Laplace approximation at the mode instead, :mod:`.laplace`); at the end of every
slow window, M⁻¹ is the window's covariance of θ (:func:`window_mass`), accumulated step by
step with Welford's update (:func:`accumulate`), and a dense one is then set from the Laplace
approximation at the window's mean where the energy is convex there (:func:`laplace_mass`). The
mass is dense (a :class:`DenseMass`, a square root of M⁻¹) for at most :data:`DENSE_MAX_DIM`
parameters, else diagonal (per coordinate). Kernels whose preconditioner adapts per step
(pSGLD's RMSprop) keep their own mass (:func:`history_mass`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from bdl.kernels.base import Kernel
from bdl.kernels.blocks import Block, DenseMass, Elementwise, dense_mass
from bdl.kernels.history import NoHistory
from bdl.kernels.preconditioners import Identity, RMSprop
from bdl.kernels.recipe_kernel import RecipeKernel, RecipeState
from bdl.utils.trees import tree_rademacher_like

PyTree = Any

#: Rademacher probes of the starting diagonal mass
HUTCHINSON_PROBES = 20
#: largest number of parameters for which the adapted mass is dense
DENSE_MAX_DIM = 100


class Welford(NamedTuple):
    """Running mean and sum of squared deviations of θ over a window: per coordinate (θ-shaped
    pytrees), or for a dense mass of the flattened θ (a (d,) mean and a (d, d) sum of outer
    products)."""

    count: jax.Array
    mean: PyTree
    m2: PyTree


def takes_mass(kernel: RecipeKernel) -> bool:
    """Whether the recipe accepts a mass (``Recipe.with_mass``)."""
    try:
        kernel.recipe.with_mass(Elementwise(()))
    except TypeError:
        return False
    return True


def adapts_mass(kernel: Kernel) -> bool:
    """Whether warm-up adapts the kernel's mass: its recipe takes one and no preconditioner
    sets it."""
    inner = kernel.recipe_kernel()
    return (
        inner is not None and isinstance(inner.history, Identity | NoHistory) and takes_mass(inner)
    )


def dense(kernel: Kernel, position: PyTree) -> bool:
    """Whether the adapted mass is dense: kernels that adapt a mass, on at most
    :data:`DENSE_MAX_DIM` parameters (a d×d product per step costs little there, and a diagonal
    mass cannot undo correlations such as an intercept's with the slope of an uncentred
    predictor)."""
    size = sum(int(np.size(x)) for x in jax.tree.leaves(position))
    return adapts_mass(kernel) and size <= DENSE_MAX_DIM


def history_mass(kernel: Kernel, state: RecipeState, grad: PyTree) -> Block | None:
    """The mass M = λ + √V that a per-step adaptive preconditioner (pSGLD's RMSprop) conditions
    the next step with, V initialised from ``grad`` before the first step; ``None`` for other
    kernels. The step size is then adapted to the curvature and gradient noise in the
    coordinates the kernel moves in (G = M⁻¹ ≈ n/|∇Ũ|), not to those of ∇Ũ. ``state`` is the
    recipe kernel's state (:meth:`Kernel.recipe_state`)."""
    inner, history = kernel.recipe_kernel(), getattr(state, "history", None)
    if inner is None or not isinstance(inner.history, RMSprop) or history is None:
        return None
    return Elementwise(inner.history.prepare(history, grad).mass)


def hessian_mass(grad_fn: Callable[[PyTree], PyTree], theta: PyTree) -> DenseMass:
    """A dense starting mass from the Hessian H of the minibatch energy at θ. Where H is
    positive definite (the energy is locally convex, as in generalised linear models), M = H: it
    carries the posterior's correlations (e.g. of collinear predictors) into the first window,
    which a chain under an identity mass could take long to reveal. Where it is not (a
    network's start is typically a saddle), the eigenvectors of H describe the start and nothing
    beyond it, and preconditioning along them sent chains far along directions that are stiff
    elsewhere; M is then diagonal, M = |diag H| (floored at 10⁻⁶ of the largest entry), as for
    the diagonal mass of :func:`hessian_diagonal_mass`. H is scaled to a unit diagonal before
    its eigendecomposition (H = D·C·D, D² = |diag H|), so that float32 resolves the spectrum of
    a model whose coordinates' scales span orders of magnitude; the eigenvalue floor (10⁻⁶ of
    the largest) applies to C's."""
    hess = dense_hessian(grad_fn, theta)
    diag = jnp.abs(jnp.diagonal(hess))
    diag = jnp.maximum(diag, 1e-6 * jnp.max(diag) + 1e-30)
    scale = jnp.sqrt(diag)
    eigval, eigvec = jnp.linalg.eigh(hess / scale[:, None] / scale[None, :])
    convex = eigval[0] > 1e-6 * eigval[-1]
    eigval = jnp.maximum(eigval, 1e-6 * jnp.max(jnp.abs(eigval)) + 1e-30)
    root = (eigvec / jnp.sqrt(eigval)) / scale[:, None]  # S = D⁻¹·V·Λ^{-1/2}: S·Sᵀ = H⁻¹
    return DenseMass(jnp.where(convex, root, jnp.diag(1.0 / scale)))


def dense_hessian(grad_fn: Callable[[PyTree], PyTree], theta: PyTree) -> jax.Array:
    """The (d, d) Hessian of the energy whose gradient is ``grad_fn``, at θ (flattened),
    symmetrised."""
    flat, unravel = ravel_pytree(theta)
    hess = jax.jacfwd(lambda x: ravel_pytree(grad_fn(unravel(x)))[0])(flat)
    return 0.5 * (hess + hess.T)


def laplace_mass(mass: DenseMass, hessian: jax.Array, temperature: Any) -> DenseMass:
    """A slow window's dense mass from the Laplace approximation at the window's mean θ̄, where
    the energy is convex there: M⁻¹ = T·H(θ̄)⁻¹, the posterior's covariance for a Gaussian
    posterior, with no sampling error. Where it is not convex (a funnel, a saddle) the window's
    covariance Σ_w stands, widened along each positive-curvature direction whose Laplace
    variance exceeds the window's. Both in the window's whitened coordinates: with S·Sᵀ = Σ_w
    and Sᵀ·H·S = V·Λ·Vᵀ, M⁻¹ = S·V·F·Vᵀ·Sᵀ, F = T·Λ⁻¹ when every λᵢ > 10⁻⁶·λ_max, else
    Fᵢ = max(1, T/λᵢ) where λᵢ > 0 and 1 elsewhere.

    A window too short for the chains to cross a long, narrow posterior (collinear predictors,
    condition numbers of 10⁴ and more) under-states its long directions, and a mass from it
    keeps the chains from ever crossing it: on 24 predictors with pairwise correlations ≈ 0.998,
    SGHMC's R̂ was 1.8 and its ESS 6 after 40,000 steps with the window's covariance alone, and
    1.001 and 22,000 with this mass."""
    root = mass.root
    whitened = root.T @ hessian @ root
    eigval, eigvec = jnp.linalg.eigh(0.5 * (whitened + whitened.T))
    laplace = jnp.where(eigval > 0, temperature / jnp.maximum(eigval, 1e-30), 0.0)
    convex = eigval[0] > 1e-6 * eigval[-1]
    factor = jnp.where(convex, laplace, jnp.maximum(1.0, laplace))
    return DenseMass(root @ (eigvec * jnp.sqrt(factor)))


def hessian_diagonal_mass(
    grad_fn: Callable[[PyTree], PyTree], theta: PyTree, key: jax.Array
) -> Elementwise:
    """A diagonal starting mass M = |diag H| of the minibatch energy at θ, by Hutchinson's
    estimator E[z ⊙ Hz] over :data:`HUTCHINSON_PROBES` Rademacher vectors z (floored at 10⁻⁶ of
    the largest entry): the posterior's scales, which can span orders of magnitude, reach the
    first window without a chain having to reveal them under an identity mass."""

    def probe(k: jax.Array) -> PyTree:
        z = tree_rademacher_like(k, theta)  # one draw for all leaves: one program to compile
        hz = jax.jvp(grad_fn, (theta,), (z,))[1]
        return jax.tree.map(jnp.multiply, z, hz)

    diag = jax.tree.map(
        lambda x: jnp.abs(jnp.mean(x, axis=0)),
        jax.vmap(probe)(jax.random.split(key, HUTCHINSON_PROBES)),
    )
    largest = jnp.max(jnp.stack([jnp.max(x) for x in jax.tree.leaves(diag)]))
    return Elementwise(jax.tree.map(lambda x: jnp.maximum(x, 1e-6 * largest + 1e-30), diag))


def empty_stats(position: PyTree, dense_mass: bool) -> Welford:
    if dense_mass:
        flat = ravel_pytree(position)[0]
        zeros = jnp.zeros_like(flat)
        return Welford(jnp.zeros((), jnp.int32), zeros, jnp.zeros((flat.size, flat.size)))
    zeros = jax.tree.map(jnp.zeros_like, position)
    return Welford(jnp.zeros((), jnp.int32), zeros, zeros)


def _is_dense(stats: Welford) -> bool:
    """Whether ``stats`` are of the flattened θ (a (d,) mean and a (d, d) sum of products)."""
    mean, m2 = stats.mean, stats.m2
    return (
        isinstance(m2, jax.Array | np.ndarray)
        and isinstance(mean, jax.Array | np.ndarray)
        and mean.ndim == 1
        and m2.shape == (mean.size, mean.size)
    )


def accumulate(stats: Welford, x: PyTree) -> Welford:
    """Welford's update with one more θ."""
    count = stats.count + 1
    if _is_dense(stats):
        flat = ravel_pytree(x)[0]
        delta = flat - stats.mean
        mean = stats.mean + delta / count
        return Welford(count, mean, stats.m2 + jnp.outer(delta, flat - mean))
    delta = jax.tree.map(jnp.subtract, x, stats.mean)
    mean = jax.tree.map(lambda m, d: m + d / count, stats.mean, delta)
    m2 = jax.tree.map(lambda s, d, a, m: s + d * (a - m), stats.m2, delta, x, mean)
    return Welford(count, mean, m2)


def window_mass(stats: Welford) -> Block:
    """M⁻¹ = the window's (co)variance Σ over w steps. A dense Σ is shrunk towards its own
    diagonal, (w/(w + 5))·Σ + (5/(w + 5))·diag Σ, which keeps it positive definite and, unlike
    Stan's shrinkage towards 10⁻³·I, is equivariant under rescaling a coordinate: posterior sds
    of 10⁻⁴ (a coefficient of a predictor in the thousands) are not swamped. Variances are
    floored at 10⁻¹² of the largest (a coordinate that did not move in the window)."""
    w = stats.count.astype(jnp.float32)
    shrink = w / (w + 5.0)
    if _is_dense(stats):
        cov = stats.m2 / jnp.maximum(w - 1.0, 1.0)
        var = jnp.diagonal(cov)
        var = jnp.maximum(var, 1e-12 * jnp.max(var) + 1e-30)
        cov = shrink * cov + (1.0 - shrink) * jnp.diag(jnp.diagonal(cov))
        return dense_mass(cov + jnp.diag(var - jnp.diagonal(cov)))
    var = jax.tree.map(lambda m2: m2 / jnp.maximum(w - 1.0, 1.0), stats.m2)
    largest = jnp.max(jnp.stack([jnp.max(v) for v in jax.tree.leaves(var)]))
    return Elementwise(jax.tree.map(lambda v: 1.0 / jnp.maximum(v, 1e-12 * largest + 1e-30), var))

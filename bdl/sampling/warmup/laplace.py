"""Warm-up's Laplace start: for a small model, the chain moves to the posterior's mode by
Newton's method and starts from a draw of the Laplace approximation there, N(θ̂, T·H(θ̂)⁻¹),
with its mass from H(θ̂).

Stochastic-gradient dynamics descend slowly from a start far from the posterior when the
posterior is ill-conditioned: a logistic regression on features measured in thousands and in
thousandths (condition numbers of 10¹⁰ and more) starts where the logits saturate, the curvature
vanishes along most directions, and a step set from it is unstable along the rest. Newton's
method is invariant to that conditioning and converges in a few steps near the mode. It runs on
the full-data energy from the chain's start, whether or not the energy is convex there (a
regression with a learned noise scale is not, at a prior draw of the scale far from the data's),
damped as Levenberg–Marquardt's (H + μ·diag|H|, μ cut by 3 after a step that lowers the energy,
raised fourfold after one that does not, which is then not taken), for :data:`NEWTON_STEPS`
steps: every step taken lowers the energy. Its result is used only when it converged: H
positive definite at the end (every eigenvalue of the unit-diagonal scaling above 10⁻⁶ of the
largest, so not a saddle) and the Newton decrement gᵀH⁻¹g/2 below :data:`DECREMENT`·d·T — a
hierarchical model's energy that keeps falling towards a degenerate mode (a scale going to 0)
never meets that, and the chain then keeps its own start. The draw keeps the chains as far
apart as the posterior, which R̂ needs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from bdl.kernels.blocks import DenseMass

PyTree = Any

#: damped Newton steps towards the mode
NEWTON_STEPS = 50
#: the Newton decrement gᵀH⁻¹g/2 at which the mode is reached, per coordinate and unit T
DECREMENT = 1e-3
#: eigenvalues of the unit-diagonal Hessian below this fraction of the largest: not convex
CONVEX = 1e-6


class Mode(NamedTuple):
    """Newton's result: the mode θ̂ (flattened), a square root S of H(θ̂)⁻¹ (S·Sᵀ = H⁻¹),
    whether it converged (else θ̂ and S are not to be used) and H(θ̂) itself."""

    position: jax.Array
    root: jax.Array
    converged: jax.Array
    hessian: jax.Array


def _inverse_root(hessian: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(S with S·Sᵀ = H⁻¹, whether H is positive definite), from the eigendecomposition of H
    scaled to a unit diagonal."""
    diag = jnp.abs(jnp.diagonal(hessian))
    scale = jnp.sqrt(jnp.maximum(diag, 1e-30 + 1e-12 * jnp.max(diag)))
    eigval, eigvec = jnp.linalg.eigh(hessian / scale[:, None] / scale[None, :])
    convex = eigval[0] > CONVEX * eigval[-1]
    eigval = jnp.maximum(eigval, CONVEX * jnp.max(jnp.abs(eigval)) + 1e-30)
    return (eigvec / jnp.sqrt(eigval)) / scale[:, None], convex


def newton_mode(
    energy: Callable[[PyTree], jax.Array], theta: PyTree, temperature: jax.Array
) -> Mode:
    """The mode of ``energy`` from θ by damped Newton steps (module docstring)."""
    flat, unravel = ravel_pytree(theta)

    def f(x: jax.Array) -> jax.Array:
        return energy(unravel(x))

    grad = jax.grad(f)

    def hessian(x: jax.Array) -> jax.Array:
        h = jax.jacfwd(grad)(x)
        return 0.5 * (h + h.T)

    def step(_: Any, carry: tuple) -> tuple:
        x, damping, fx = carry
        g, h = grad(x), hessian(x)
        diag = jnp.abs(jnp.diagonal(h)) + 1e-12 * jnp.max(jnp.abs(jnp.diagonal(h))) + 1e-30
        new = x - jnp.linalg.solve(h + damping * jnp.diag(diag), g)
        f_new = f(new)
        better = jnp.isfinite(f_new) & (f_new < fx) & jnp.all(jnp.isfinite(new))
        return (
            jnp.where(better, new, x),
            jnp.where(better, damping / 3.0, damping * 4.0),
            jnp.where(better, f_new, fx),
        )

    start = (flat, jnp.ones((), flat.dtype), f(flat))
    x, _, _ = jax.lax.fori_loop(0, NEWTON_STEPS, step, start)
    g, h = grad(x), hessian(x)
    root, convex = _inverse_root(h)
    decrement = 0.5 * jnp.sum(jnp.square(root.T @ g))  # gᵀH⁻¹g/2 with H⁻¹ = S·Sᵀ
    tolerance = DECREMENT * flat.size * jnp.maximum(temperature, 1e-6)
    converged = convex & jnp.isfinite(decrement) & (decrement < tolerance)
    return Mode(x, root, converged, h)


def laplace_draw(mode: Mode, like: PyTree, temperature: jax.Array, key: jax.Array) -> PyTree:
    """A draw of N(θ̂, T·H⁻¹), shaped like ``like``."""
    unravel = ravel_pytree(like)[1]
    noise = jax.random.normal(key, mode.position.shape, mode.position.dtype)
    return unravel(mode.position + jnp.sqrt(temperature) * (mode.root @ noise))


def mode_mass(mode: Mode) -> DenseMass:
    """The dense mass M = H(θ̂) (M⁻¹ = S·Sᵀ)."""
    return DenseMass(mode.root)

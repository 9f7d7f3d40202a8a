"""Warm-up's step size and friction: from the curvature, the stability limit and the gradient
noise.

* **step size**: from λ_max, the largest eigenvalue of the preconditioned Hessian
  M^{−1/2}HM^{−1/2} of the minibatch energy at the chain's state (power iteration on
  Hessian-vector products, :func:`largest_curvature`), against the integrator's stability
  limit: h = 0.04/λ_max for first-order kernels (Euler–Maruyama is stable for hλ < 2; the
  relative variance bias along the stiffest direction is hλ/2 = 2 %, an sd 1 % wide, the
  systematic tolerance of ``bdl validate``'s sd gate: with a mass from the Laplace
  approximation every direction is that stiff), h = 0.25/√λ_max for
  momentum kernels (symplectic Euler is stable for hω < 2, ω = √λ; the position-variance bias
  is (hω)²/4 ≈ 1.6 %);
* **friction** (momentum kernels): γ = 0.1/h, a momentum decay of 0.9 per step as in
  deep-learning SGD, which leaves the slow directions (ω ≪ ω_max) overdamped but the stiff ones
  well mixed;
* **gradient noise** (in the final window, near stationarity): V, the minibatch gradient's
  variance across :data:`NOISE_BATCHES` independent minibatches at the chain's state, in the
  preconditioned coordinates and averaged over them, heats the chain by a relative ≈ hV/(2γT)
  (momentum kernels) or hV/(2T) (first order); the rules keep it below ε = 5 %: γ ≥ hV/(2Tε)
  and h ≤ √(2Tε/V) (so that hγ ≤ 1), or h ≤ 2Tε/V for first-order kernels. The estimate treats
  minibatches as independent, which over-states the heating of epoch-wise sampling without
  replacement: it errs towards damping.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from bdl.kernels.base import Kernel
from bdl.kernels.blocks import Block
from bdl.utils.trees import tree_dot, tree_normal_like

PyTree = Any

#: h·λ_max for first-order kernels, h·√λ_max for momentum kernels, h·γ for the friction
FIRST_ORDER_STEP = 0.04
SECOND_ORDER_STEP = 0.25
MOMENTUM_DECAY = 0.1
#: the same products at the stiffest state the final window saw: half the stability limit (2)
STABLE_STEP = 1.0
#: ε: the relative heating by gradient noise the friction (and step) rules allow
NOISE_HEATING = 0.05
#: independent minibatch gradients per gradient-noise estimate
NOISE_BATCHES = 4
#: power-iteration steps per curvature estimate
POWER_ITERATIONS = 20


class AdaptParams(NamedTuple):
    """Per-chain adapted values: step size h, friction γ (momentum kernels), mass M (an
    :class:`Elementwise` block, a :class:`DenseMass`, or ``None`` when the mass is not adapted),
    and the back-off factor ≤ 1 by which h was cut after failed steps (halved per failure,
    doubled back at every adaptation point)."""

    step_size: jax.Array
    friction: jax.Array
    mass: PyTree
    backoff: jax.Array


def largest_curvature(
    grad_fn: Callable[[PyTree], PyTree],
    theta: PyTree,
    mass: Block | None,
    key: jax.Array,
    correction: Callable[[PyTree], PyTree] | None = None,
) -> jax.Array:
    """λ_max of Sᵀ H S, S a square root of M⁻¹ (the preconditioned Hessian), by power iteration
    on Hessian-vector products of ``grad_fn`` at θ (|λ| of the dominant eigenvalue: at a saddle
    the energy is not convex), each plus ``correction(u)`` if given (a control variate,
    :func:`.anchor.hessian_correction`)."""
    root = None if mass is None else mass.power(-0.5)

    def hvp(v: PyTree) -> PyTree:
        u = v if root is None else root.times(v)
        hu = jax.jvp(grad_fn, (theta,), (u,))[1]
        if correction is not None:
            hu = jax.tree.map(jnp.add, hu, correction(u))
        return hu if root is None else root.transpose().times(hu)

    def normalised(v: PyTree) -> PyTree:
        norm = jnp.sqrt(sum(jnp.sum(x * x) for x in jax.tree.leaves(v)))
        return jax.tree.map(lambda x: x / jnp.maximum(norm, 1e-30), v)

    v0 = normalised(tree_normal_like(key, theta))

    def iteration(_: Any, carry: tuple[PyTree, jax.Array]) -> tuple[PyTree, jax.Array]:
        v, _ = carry
        hv = hvp(v)
        return normalised(hv), tree_dot(v, hv)

    # the Rayleigh quotient of the last iterate comes from the loop's own extra iteration, so
    # the Hessian-vector product is traced (and compiled) once, not twice
    rayleigh = jnp.zeros((), jax.tree.leaves(theta)[0].dtype)
    _, rayleigh = jax.lax.fori_loop(0, POWER_ITERATIONS + 1, iteration, (v0, rayleigh))
    return jnp.abs(rayleigh)


def step_from_curvature(curvature: jax.Array, second_order: bool) -> jax.Array:
    """The step size at the stability margins of the module docstring."""
    lam = jnp.maximum(curvature, 1e-30)
    return SECOND_ORDER_STEP / jnp.sqrt(lam) if second_order else FIRST_ORDER_STEP / lam


def params_at(
    curvature: jax.Array,
    mass: PyTree | None,
    second_order: bool,
    backoff: jax.Array,
    friction_floor: Any = 0.0,
    noise: Any = 0.0,
    temperature: Any = 1.0,
    stiffest: Any = None,
) -> AdaptParams:
    """(h, γ) from the curvature and the gradient noise (module docstring), h cut by the
    back-off factor, γ at least ``friction_floor``. With ``stiffest`` (the largest λ_max seen
    at other states), h is also held to half the integrator's stability limit there:
    h·λ ≤ :data:`STABLE_STEP` (first order), h·√λ ≤ :data:`STABLE_STEP` (momentum)."""
    h = step_from_curvature(curvature, second_order)
    if stiffest is not None:
        lam = jnp.maximum(stiffest, 1e-30)
        h = jnp.minimum(h, STABLE_STEP / (jnp.sqrt(lam) if second_order else lam))
    heat = jnp.where(temperature > 0, noise / (2.0 * NOISE_HEATING * temperature), 0.0)
    if second_order:  # γ ≥ h·V/(2Tε) with h·γ ≤ 1; a thermostat's h·A ≤ ½ (ξ fluctuates)
        h = jnp.minimum(h, jax.lax.rsqrt(jnp.maximum(heat, 1e-30)))
        h = jnp.minimum(h, 0.5 / jnp.maximum(friction_floor, 1e-30))
        h = h * backoff
        friction = jnp.maximum(jnp.maximum(MOMENTUM_DECAY / h, h * heat), friction_floor)
        return AdaptParams(h, friction, mass, backoff)
    h = jnp.minimum(h, 1.0 / jnp.maximum(heat, 1e-30)) * backoff  # h·V/(2T) ≤ ε
    return AdaptParams(h, MOMENTUM_DECAY / h, mass, backoff)


def gradient_noise(grads: PyTree, mass: Block | None) -> jax.Array:
    """V: the variance of the minibatch gradient across independent minibatches (``grads``, a
    leading axis of K), in the preconditioned coordinates (Sᵀ∇Ũ, S·Sᵀ = M⁻¹), averaged over
    coordinates."""
    if mass is not None:
        root = mass.power(-0.5).transpose()
        grads = jax.vmap(root.times)(grads)
    leaves = jax.tree.leaves(grads)
    total = sum(jnp.sum(jnp.var(x, axis=0, ddof=1)) for x in leaves)
    return total / sum(x[0].size for x in leaves)


def friction_floor(kernel: Kernel, position: PyTree, temperature: Any) -> Any:
    """3·√(T/d) for thermostat kernels: the thermostat ξ fluctuates around its mean A with sd
    √(T/d), and a negative ξ heats the momentum; with A ≥ 3 sd it rarely does (small d only).
    The step is then held to h·A ≤ ½, so that the fluctuating friction step (1 − hξ) stays
    contracting."""
    groups = kernel.recipe_kernel().recipe.groups
    if "scalar" not in groups.values():
        return 0.0
    d = sum(int(x.size) for x in jax.tree.leaves(position))
    return 3.0 * jnp.sqrt(jnp.asarray(temperature) / d)


def back_off(params: AdaptParams, ok: jax.Array) -> AdaptParams:
    """Halve h (and keep h·γ) after a failed step."""
    shrink = jnp.where(ok, 1.0, 0.5)
    return AdaptParams(
        params.step_size * shrink,
        jnp.maximum(params.friction, MOMENTUM_DECAY / (params.step_size * shrink)),
        params.mass,
        params.backoff * shrink,
    )

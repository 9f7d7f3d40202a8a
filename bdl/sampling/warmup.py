"""Warm-up adaptation: step size, diagonal mass and friction learned during burn-in, then frozen.

A kernel built without a step size (``bdl.kernels.get("sghmc")``) is adapted by ``bdl.sample``
during its burn-in, per chain, in windows like Stan's warm-up (Carpenter et al. 2017): a fast
window (15 % of burn-in) adapts the step size only; slow windows of doubling length each end
with a new diagonal mass from the variance of θ over the window; a final fast window (10 %)
re-adapts the step size to the last mass. At the end of every window:

* **mass** (slow windows; kernels whose recipe takes a mass and whose preconditioner is the
  identity): M⁻¹ = the window's covariance of θ, its correlations shrunk by w/(w + 5) for w
  steps (:func:`window_mass`) — dense (a :class:`DenseMass`, held as the Cholesky
  factor of M⁻¹) for at most :data:`DENSE_MAX_DIM` parameters, else diagonal (per coordinate);
* **step size** (also every :data:`STEP_EVERY` steps within a window): from λ_max, the largest
  eigenvalue of the preconditioned Hessian M^{−1/2}HM^{−1/2} of the minibatch energy at the
  chain's state (M the adapted mass, or pSGLD's current RMSprop mass, :func:`history_mass`;
  power iteration on Hessian-vector products, :func:`largest_curvature`), against
  the integrator's stability limit: h = 0.1/λ_max for first-order kernels (Euler–Maruyama is
  stable for hλ < 2; the relative variance bias along the stiffest direction is hλ/2 = 5 %),
  h = 0.25/√λ_max for momentum kernels (symplectic Euler is stable for hω < 2, ω = √λ; the
  position-variance bias is (hω)²/4 ≈ 1.6 %);
* **friction** (momentum kernels): γ = 0.1/h, a momentum decay of 0.9 per step as in deep-learning
  SGD, which leaves the slow directions (ω ≪ ω_max) overdamped but the stiff ones well mixed;
* **gradient noise** (in the final window, near stationarity: far from the posterior the noise
  is large and says nothing about the target): V, the minibatch gradient's variance across
  :data:`NOISE_BATCHES` independent minibatches at the chain's state, in the preconditioned
  coordinates and averaged over them, heats the chain by a relative ≈ hV/(2γT) (momentum
  kernels) or hV/(2T) (first order); the rules keep it below ε = 5 %: γ ≥ hV/(2Tε) and
  h ≤ √(2Tε/V) (so that hγ ≤ 1), or h ≤ 2Tε/V for first-order kernels. The estimate treats
  minibatches as independent, which over-states the heating of epoch-wise sampling without
  replacement: it errs towards damping.

A step that gives a non-finite energy, gradient or state during warm-up is rejected and that
chain's step size halved (a start far from the posterior can be much stiffer than its
curvature at the start suggested), and after every step the recipe may pull an auxiliary
variable back into the integrator's stable region (:meth:`Recipe.warmup_guarded`: SGNHT's
thermostat is held to hξ ≤ 1). After burn-in the values are frozen: the sampling phase runs
the kernel with constant (h, M, γ) per chain, a constant recipe, so the checker's verdict on
that frozen kernel (:func:`adapted_kernel`) is the kernel's own.
"""

from __future__ import annotations

import dataclasses
import math
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
from bdl.kernels.recipe_kernel import RecipeKernel
from bdl.kernels.wrapper import Wrapper
from bdl.utils.trees import tree_dot, tree_normal_like, tree_rademacher_like

PyTree = Any

#: h·λ_max for first-order kernels, h·√λ_max for momentum kernels, h·γ for the friction
FIRST_ORDER_STEP = 0.1
SECOND_ORDER_STEP = 0.25
MOMENTUM_DECAY = 0.1
#: ε: the relative heating by gradient noise the friction (and step) rules allow
NOISE_HEATING = 0.05
#: independent minibatch gradients per gradient-noise estimate
NOISE_BATCHES = 4
#: power-iteration steps per curvature estimate
POWER_ITERATIONS = 20
#: fewest burn-in steps that can adapt (Stan's smallest complete schedule is 150)
MIN_BURN_IN = 150
#: steps between step-size updates within a window (a start far from the posterior can be much
#: stiffer or flatter than the posterior; 20 Hessian-vector products per 250 steps)
STEP_EVERY = 250
#: Rademacher probes of the starting diagonal mass
HUTCHINSON_PROBES = 20
#: largest number of parameters for which the adapted mass is dense
DENSE_MAX_DIM = 100
#: a warm-up step after which the minibatch energy Ũ rose by more than
#: T·(JUMP_NATS + JUMP_PER_SQRT_DIM·√d) + JUMP_NOISE·s_Ũ is undone (:class:`Guard`)
JUMP_NATS = 1000.0
JUMP_PER_SQRT_DIM = 10.0
JUMP_NOISE = 20.0
#: minibatch energies at the start whose spread s_Ũ sets the guard's noise margin
ENERGY_NOISE_BATCHES = 8


class AdaptParams(NamedTuple):
    """Per-chain adapted values: step size h, friction γ (momentum kernels), mass M (an
    :class:`Elementwise` block, a :class:`DenseMass`, or ``None`` when the mass is not adapted),
    and the back-off factor ≤ 1 by which h was cut after non-finite steps (halved per failure,
    doubled back at every window end)."""

    step_size: jax.Array
    friction: jax.Array
    mass: PyTree
    backoff: jax.Array


class Welford(NamedTuple):
    """Running mean and sum of squared deviations of θ over a window: per coordinate (θ-shaped
    pytrees), or for a dense mass of the flattened θ (a (d,) mean and a (d, d) sum of outer
    products)."""

    count: jax.Array
    mean: PyTree
    m2: PyTree


class Window(NamedTuple):
    """A warm-up window: its length in steps and whether it ends with a new mass."""

    length: int
    slow: bool


class Guard(NamedTuple):
    """What warm-up needs to undo a step that went unstable: the kernel state before the
    current one and its minibatch energy Ũ (NaN at the start), and s_Ũ, the spread of the
    minibatch energy across minibatches at the start (0 with full batches).

    Along stable dynamics at temperature T, Ũ falls while a chain descends towards the
    posterior and then fluctuates by about √d·T a step, plus the minibatch noise s_Ũ; beyond
    the integrator's stability limit it grows by orders of magnitude within a few steps. A step
    after which Ũ at the new state rose by more than
    T·(:data:`JUMP_NATS` + :data:`JUMP_PER_SQRT_DIM`·√d) + :data:`JUMP_NOISE`·s_Ũ (Stan calls an
    energy error of 1000 a divergence), or at which Ũ or ∇Ũ is not finite, is undone: the chain
    goes back to the state before it and its step size is halved. At T = 0 only non-finite
    values count. Without it a start where the curvature understates the posterior's (a
    hierarchical model's scales at a start with weights near zero) let the first steps throw a
    chain to where the energy overflows, a state no later step could leave. The kinetic energy
    is left out: a thermostat's (SGNHT's ξ) rises legitimately while a chain descends."""

    previous: Any
    energy: jax.Array
    energy_noise: jax.Array


def start_guard(state: Any, energy_noise: jax.Array) -> Guard:
    """The guard at warm-up's start: the start is its own previous state, with no Ũ yet."""
    nan = jnp.full((), jnp.nan, jnp.float32)
    return Guard(state, nan, energy_noise.astype(jnp.float32))


def energy_jump_limit(guard: Guard, temperature: jax.Array, dim: int) -> jax.Array:
    """The rise of Ũ over one step beyond which the step is undone (:class:`Guard`)."""
    scale = JUMP_NATS + JUMP_PER_SQRT_DIM * math.sqrt(dim)
    return jnp.where(
        temperature > 0, temperature * scale + JUMP_NOISE * guard.energy_noise, jnp.inf
    )


def innermost(kernel: Kernel) -> RecipeKernel:
    """The recipe kernel inside any wrappers."""
    while isinstance(kernel, Wrapper):
        kernel = kernel.inner
    if not isinstance(kernel, RecipeKernel):
        raise TypeError(f"{kernel.name} is not built on a recipe kernel.")
    return kernel


def needs_adaptation(kernel: Kernel) -> bool:
    """Whether the kernel was built without a step size (then ``bdl.sample`` adapts it)."""
    try:
        return innermost(kernel).step_size is None
    except TypeError:
        return False


def momentum_kernel(kernel: Kernel) -> bool:
    return len(innermost(kernel).recipe.groups) > 1


def adapts_mass(kernel: Kernel) -> bool:
    inner = innermost(kernel)
    return isinstance(inner.history, Identity | NoHistory) and _takes_mass(inner)


def history_mass(kernel: Kernel, state: Any, grad: PyTree) -> Block | None:
    """The mass M = λ + √V that a per-step adaptive preconditioner (pSGLD's RMSprop) conditions
    the next step with, V initialised from ``grad`` before the first step; ``None`` for other
    kernels. The step size is then adapted to the curvature and gradient noise in the
    coordinates the kernel moves in (G = M⁻¹ ≈ n/|∇Ũ|), not to those of ∇Ũ."""
    inner, history = innermost(kernel), getattr(state, "history", None)
    if not isinstance(inner.history, RMSprop) or history is None:
        return None
    return Elementwise(inner.history.prepare(history, grad).mass)


def _takes_mass(kernel: RecipeKernel) -> bool:
    try:
        kernel.recipe.with_mass(Elementwise(()))
    except TypeError:
        return False
    return True


def apply(kernel: Kernel, params: AdaptParams | tuple) -> Kernel:
    """``kernel`` with the innermost recipe kernel set to the adapted (h, γ, M)."""
    if not isinstance(params, AdaptParams):
        return kernel
    if isinstance(kernel, Wrapper):
        return dataclasses.replace(kernel, inner=apply(kernel.inner, params))
    recipe = kernel.recipe
    if params.mass is not None:
        recipe = recipe.with_mass(params.mass)
    if len(recipe.groups) > 1:
        recipe = recipe.with_friction(params.friction)
    return dataclasses.replace(kernel, recipe=recipe, step_size=params.step_size)


def windows(burn_in: int) -> list[Window]:
    """Stan's warm-up schedule scaled to ``burn_in`` steps: a fast window of 15 %, slow windows
    doubling from 5 % (the last one absorbing the remainder), and a final fast window of 10 %."""
    if burn_in < MIN_BURN_IN:
        raise ValueError(
            f"burn_in={burn_in} is too short to adapt the step size and mass (at least "
            f"{MIN_BURN_IN} steps); lengthen burn_in or give the kernel a step_size."
        )
    first, last = math.ceil(0.15 * burn_in), math.ceil(0.1 * burn_in)
    middle = burn_in - first - last
    slow, size = [], max(1, math.ceil(0.05 * burn_in))
    while middle - sum(slow) >= 3 * size:
        slow.append(size)
        size *= 2
    slow.append(middle - sum(slow))
    return [Window(first, False), *(Window(s, True) for s in slow), Window(last, False)]


def dense(kernel: Kernel, position: PyTree) -> bool:
    """Whether the adapted mass is dense: kernels that adapt a mass, on at most
    :data:`DENSE_MAX_DIM` parameters (a d×d product per step costs little there, and a diagonal
    mass cannot undo correlations such as an intercept's with the slope of an uncentred
    predictor)."""
    size = sum(int(np.size(x)) for x in jax.tree.leaves(position))
    return adapts_mass(kernel) and size <= DENSE_MAX_DIM


def hessian_mass(grad_fn: Callable[[PyTree], PyTree], theta: PyTree) -> DenseMass:
    """A dense starting mass from the Hessian H of the minibatch energy at θ. Where H is
    positive definite (the energy is locally convex, as in generalised linear models), M = H: it
    carries the posterior's correlations (e.g. of collinear predictors) into the first window,
    which a chain under an identity mass could take long to reveal. Where it is not (a
    network's start is typically a saddle), the eigenvectors of H describe the start and nothing
    beyond it, and preconditioning along them sent chains far along directions that are stiff
    elsewhere; M is then diagonal, M = |diag H| (floored at 10⁻⁶ of the largest entry), as for
    the diagonal mass of :func:`hessian_diagonal_mass`."""
    flat, unravel = ravel_pytree(theta)
    hess = jax.jacfwd(lambda x: ravel_pytree(grad_fn(unravel(x)))[0])(flat)
    hess = 0.5 * (hess + hess.T)
    eigval, eigvec = jnp.linalg.eigh(hess)
    convex = eigval[0] > 1e-6 * eigval[-1]
    eigval = jnp.maximum(eigval, 1e-6 * jnp.max(jnp.abs(eigval)) + 1e-30)
    diag = jnp.abs(jnp.diagonal(hess))
    diag = jnp.maximum(diag, 1e-6 * jnp.max(diag) + 1e-30)
    return DenseMass(jnp.where(convex, eigvec / jnp.sqrt(eigval), jnp.diag(1.0 / jnp.sqrt(diag))))


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


def largest_curvature(
    grad_fn: Callable[[PyTree], PyTree], theta: PyTree, mass: Block | None, key: jax.Array
) -> jax.Array:
    """λ_max of Sᵀ H S, S a square root of M⁻¹ (the preconditioned Hessian), by power iteration
    on Hessian-vector products of ``grad_fn`` at θ (|λ| of the dominant eigenvalue: at a saddle
    the energy is not convex)."""
    root = None if mass is None else mass.power(-0.5)

    def hvp(v: PyTree) -> PyTree:
        u = v if root is None else root.times(v)
        hu = jax.jvp(grad_fn, (theta,), (u,))[1]
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
) -> AdaptParams:
    """(h, γ) from the curvature and the gradient noise (module docstring), h cut by the
    back-off factor, γ at least ``friction_floor``."""
    h = step_from_curvature(curvature, second_order)
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
    groups = innermost(kernel).recipe.groups
    if "scalar" not in groups.values():
        return 0.0
    d = sum(int(x.size) for x in jax.tree.leaves(position))
    return 3.0 * jnp.sqrt(jnp.asarray(temperature) / d)


def back_off(params: AdaptParams, ok: jax.Array) -> AdaptParams:
    """Halve h (and keep h·γ) after a non-finite step."""
    shrink = jnp.where(ok, 1.0, 0.5)
    return AdaptParams(
        params.step_size * shrink,
        jnp.maximum(params.friction, MOMENTUM_DECAY / (params.step_size * shrink)),
        params.mass,
        params.backoff * shrink,
    )


def frozen(kernel: Kernel, adapted: dict[str, Any], chain: int = 0) -> Kernel:
    """The constant kernel chain ``chain`` ran after burn-in: ``kernel`` (as built, without a
    step size) with ``samples.adapted``'s values, to reuse them or check them."""
    if "inverse_mass" in adapted:
        mass = dense_mass(jnp.asarray(adapted["inverse_mass"][chain]))
    elif "mass" in adapted:
        mass = Elementwise(jax.tree.map(lambda m: jnp.asarray(m[chain]), adapted["mass"]))
    else:
        mass = None
    params = AdaptParams(
        jnp.asarray(adapted["step_size"][chain]),
        jnp.asarray(adapted.get("friction", adapted["step_size"])[chain]),
        mass,
        jnp.ones(()),
    )
    return apply(kernel, params)

"""One-step increments Δz = z' − z of a kernel from a fixed state, for the stationarity checker.

Two views of the same step:

* ``kernel.step`` as a black box: Δz for one key (:func:`delta`) or for many (:func:`deltas`),
  the recipe state read through the kernel's ``recipe_state``;
* the recipe kernel's integrator with its Gaussian draw ξ an explicit input
  (:meth:`bdl.kernels.integrators.Integrator.move`): at a fixed state z' = Φ_h(z, ξ), and
  B_h = ∂Φ_h/∂ξ by forward-mode autodiff at ξ = 0 gives the one-step covariance B_h·B_hᵀ with no
  sampling (:func:`integrator_noise`). It is exact when the step is affine in ξ
  (Euler–Maruyama; symplectic Euler whose θ-drift is affine in the momentum) and the covariance's
  leading order in h otherwise (docs/checker.md, *The noise covariance, exactly*).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from bdl.kernels.base import Kernel
from bdl.kernels.integrators import Integrator, standard_normal
from bdl.kernels.recipe import Context, Recipe
from bdl.utils.owner_jit import owner_jit


def step(kernel: Kernel, key: jax.Array, state: Any, grad_fn: Any, h: float, T: float) -> Any:
    """``kernel.step`` at (h, T), compiled."""
    return _step_jit(kernel, key, state, grad_fn, _f64(h), _f64(T))


def delta(kernel: Kernel, state: Any, grad_fn: Any, h: float, T: float, key: jax.Array) -> Any:
    """Δz of one ``kernel.step`` from ``state``, flattened."""
    return _delta_jit(kernel, state, grad_fn, _f64(h), _f64(T), key)


def deltas(kernel: Kernel, state: Any, grad_fn: Any, h: float, T: float, keys: jax.Array) -> Any:
    """Δz of one ``kernel.step`` from ``state`` for each of ``keys``, shape (keys, dim z)."""
    return _deltas_jit(kernel, state, grad_fn, _f64(h), _f64(T), keys)


def _f64(x: float) -> jax.Array:
    """A float64 array that is not weakly typed: constants of a recipe given in float32 (values
    adapted by a float32 run) are then promoted, and the step is computed in float64."""
    return jnp.asarray(x, jnp.float64)


@owner_jit
def _step_jit(kernel: Kernel, key: jax.Array, state: Any, grad_fn: Any, h: Any, T: Any) -> Any:
    return kernel.step(key, state, grad_fn, h, T)


def _delta_fn(kernel: Kernel, state: Any, grad_fn: Any, h: Any, T: Any, key: jax.Array) -> Any:
    new, _ = kernel.step(key, state, grad_fn, h, T)
    after, before = kernel.recipe_state(new).z, kernel.recipe_state(state).z
    return ravel_pytree(after)[0] - ravel_pytree(before)[0]


_delta_jit = owner_jit(_delta_fn)


@owner_jit
def _deltas_jit(kernel: Kernel, state: Any, grad_fn: Any, h: Any, T: Any, keys: jax.Array) -> Any:
    return jax.vmap(lambda k: _delta_fn(kernel, state, grad_fn, h, T, k))(keys)


def integrator_noise(
    recipe: Recipe,
    integrator: Integrator,
    energy: Any,
    z: dict,
    T: float,
    h: float,
    key: jax.Array,
) -> dict[str, jax.Array]:
    """The integrator's step from z under ``recipe`` with its draw explicit, at (h, T):

    * ``rates``: C(h), C(h/2), C(h/4), stacked, where C(h) = B·Bᵀ/(2h), B = ∂z'/∂ξ at ξ = 0;
    * ``delta``: Δz of ``integrator.move`` given the standard draw ξ of ``key``, what
      :class:`bdl.kernels.RecipeKernel` computes from the same key.

    Ũ and ∇Ũ are ``energy`` and its gradient at z's θ."""
    return _integrator_noise(recipe, integrator, energy, z, _f64(T), _f64(h), key)


@owner_jit
def _integrator_noise(
    recipe: Recipe, integrator: Integrator, energy: Any, z: dict, T: Any, h: Any, key: jax.Array
) -> dict[str, jax.Array]:
    ctx = Context(*jax.value_and_grad(energy)(z["theta"]))
    ev = recipe.evaluate(z, ctx)
    groups = integrator.noisy_groups(ev)
    zero, unravel = ravel_pytree({g: z[g] for g in groups})

    def moved(xi: jax.Array, step_size: Any) -> jax.Array:
        new = integrator.move(recipe, ev, z, ctx, step_size, T, unravel(xi))
        return ravel_pytree(new)[0]

    def rate(step_size: Any) -> jax.Array:
        b = jax.jacfwd(moved)(jnp.zeros_like(zero), step_size)
        return b @ b.T / (2 * step_size)

    drawn = ravel_pytree(standard_normal(key, z, groups))[0]
    return {
        "rates": jax.vmap(rate)(jnp.stack([h, h / 2, h / 4])),
        "delta": moved(drawn.reshape(zero.shape), h) - ravel_pytree(z)[0],
    }

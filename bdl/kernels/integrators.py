"""Discretisations of the recipe SDE, kept separate from the dynamics they integrate.

Both draw the injected noise of all noisy groups with a single Gaussian draw.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from bdl.kernels.recipe import Context, Recipe, drift, noise_scale

PyTree = Any
Integrator = Callable[..., dict[str, PyTree]]


def _noise(key: jax.Array, z: dict[str, PyTree], groups: tuple[str, ...]) -> dict[str, PyTree]:
    """Standard-normal draws for ``groups`` from one ``random.normal`` call."""
    if not groups:
        return {}
    flat, unravel = ravel_pytree({g: z[g] for g in groups})
    return unravel(jax.random.normal(key, flat.shape, flat.dtype))


def _update(
    z: dict[str, PyTree],
    groups: tuple[str, ...],
    h: jax.Array,
    velocity: dict[str, PyTree],
    scale: dict[str, PyTree],
    noise: dict[str, PyTree],
) -> dict[str, PyTree]:
    out = dict(z)
    for g in groups:
        moved = jax.tree.map(lambda x, v: x + h * v, z[g], velocity[g])
        if g in scale:
            s = scale[g]
            if not isinstance(s, dict | list | tuple) and jnp.ndim(s) == 0:
                s = jax.tree.map(lambda _, s=s: s, moved)
            moved = jax.tree.map(lambda x, sc, e: x + sc * e, moved, s, noise[g])
        out[g] = moved
    return out


def euler_maruyama(
    recipe: Recipe,
    z: dict[str, PyTree],
    ctx: Context,
    h: jax.Array,
    temperature: jax.Array,
    key: jax.Array,
) -> dict[str, PyTree]:
    """z ← z + h·[−(D + Q)∇H + TΓ](z) + √(2ThD(z))·ξ, every group at once."""
    groups = tuple(recipe.groups)
    scale = noise_scale(recipe, z, ctx, temperature, h)
    noise = _noise(key, z, tuple(sorted(scale)))
    return _update(z, groups, h, drift(recipe, z, ctx, temperature), scale, noise)


def symplectic_euler(
    recipe: Recipe,
    z: dict[str, PyTree],
    ctx: Context,
    h: jax.Array,
    temperature: jax.Array,
    key: jax.Array,
) -> dict[str, PyTree]:
    """Auxiliary groups first at (θ, r), then θ at (θ, r_new) (semi-implicit Euler).

    For SGHMC this is r ← r − h∇Ũ − hCM⁻¹r + √(2ThC)ξ, θ ← θ + hM⁻¹r (Chen et al. 2014).
    θ is unchanged between the two half-updates, so Ũ and ∇Ũ are reused.
    """
    aux = tuple(g for g in recipe.groups if g != "theta")
    scale = noise_scale(recipe, z, ctx, temperature, h)
    noise = _noise(key, z, tuple(sorted(scale)))
    z = _update(z, aux, h, drift(recipe, z, ctx, temperature, aux), scale, noise)
    theta_scale = {
        k: v for k, v in noise_scale(recipe, z, ctx, temperature, h).items() if k == "theta"
    }
    return _update(
        z, ("theta",), h, drift(recipe, z, ctx, temperature, ("theta",)), theta_scale, noise
    )


INTEGRATORS: dict[str, Integrator] = {
    "euler_maruyama": euler_maruyama,
    "symplectic_euler": symplectic_euler,
}

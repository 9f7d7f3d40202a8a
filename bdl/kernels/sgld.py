"""SGLD: stochastic-gradient Langevin dynamics (Welling & Teh 2011).

Recipe: z = θ, g = 0, D = I, Q = 0. Euler–Maruyama gives

    θ ← θ − h∇Ũ(θ) + √(2Th)·ξ,   ξ ~ N(0, I),

whose stationary law tends to π_T ∝ exp(−U/T) as h → 0 (bias O(h)).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from bdl.kernels.recipe import Blocks, Context, GroupKind, Recipe
from bdl.kernels.recipe_kernel import RecipeKernel

PyTree = Any


class LangevinRecipe(Recipe):
    """g = 0, D = I, Q = 0 (overdamped Langevin)."""

    @property
    def groups(self) -> dict[str, GroupKind]:
        return {"theta": "elementwise"}

    def kinetic(self, z: dict[str, PyTree]) -> Any:
        return jnp.zeros(())

    def diffusion(self, z: dict[str, PyTree], ctx: Context) -> Blocks:
        return {("theta", "theta"): 1.0}

    def curl(self, z: dict[str, PyTree], ctx: Context) -> Blocks:
        return {}

    @property
    def state_dependent(self) -> bool:
        return False


class SGLD(RecipeKernel):
    """SGLD with step size h (a float or a schedule ``t -> h_t``)."""

    def recipe(self) -> Recipe:
        return LangevinRecipe()

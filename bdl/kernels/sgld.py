"""SGLD: stochastic-gradient Langevin dynamics (Welling & Teh 2011), optionally preconditioned.

Recipe: z = θ, g = 0, D = I, Q = 0. Euler–Maruyama gives

    θ ← θ − h∇Ũ(θ) + √(2Th)·ξ,   ξ ~ N(0, I),

whose stationary law tends to π_T ∝ exp(−U/T) as h → 0 (bias O(h)).

With a diagonal preconditioner (:mod:`bdl.kernels.preconditioners`) of mass M, the recipe is
D = G = M⁻¹, Q = 0 (Ma, Chen & Fox 2015):

    θ ← θ − hG∇Ũ(θ) + √(2ThG)·ξ.

G depends only on past gradients (never on the current θ), so Γ = 0; a frozen or semi-adaptive
G (``layerwise``) is exact between its updates, a per-step adapted G (``rmsprop``, pSGLD) is
approximate because it depends on the gradient history.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from bdl.kernels.base import EnergyAndGrad, Info
from bdl.kernels.preconditioners import (
    PreconditionedState,
    Preconditioner,
    check_preconditioner,
    inverse,
    preconditioned_step,
)
from bdl.kernels.recipe import Blocks, Context, GroupKind, Recipe
from bdl.kernels.recipe_kernel import RecipeKernel, RecipeState

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


class PreconditionedLangevinRecipe(LangevinRecipe):
    """g = 0, D = G (a fixed diagonal, θ-shaped or one scalar per leaf), Q = 0."""

    inverse_mass: Any = 1.0

    def diffusion(self, z: dict[str, PyTree], ctx: Context) -> Blocks:
        return {("theta", "theta"): self.inverse_mass}


class SGLD(RecipeKernel):
    """SGLD with step size h (a float or a schedule ``t -> h_t``).

    Args:
        step_size: h.
        preconditioner: optional diagonal preconditioner, e.g.
            ``bdl.kernels.preconditioners.layerwise()``; D = M⁻¹.
    """

    preconditioner: Preconditioner | None = None

    def __check_init__(self) -> None:
        check_preconditioner(self.preconditioner, self.name)

    def active_preconditioner(self) -> Preconditioner | None:
        """The preconditioner the step uses (subclasses may build it from their fields)."""
        return self.preconditioner

    def bind(self, target: Any) -> SGLD:
        if self.preconditioner is None:
            return self
        return dataclasses.replace(self, preconditioner=self.preconditioner.bind(target))

    def recipe(self) -> Recipe:
        return LangevinRecipe()

    def recipe_at(self, state: Any) -> Recipe:
        if self.active_preconditioner() is None:
            return self.recipe()
        return PreconditionedLangevinRecipe(inverse(state.precond.mass))

    def init(self, position: PyTree, key: jax.Array) -> Any:
        p = self.active_preconditioner()
        if p is None:
            return super().init(position, key)
        return PreconditionedState({"theta": position}, p.init(position))

    def step(
        self,
        key: jax.Array,
        state: RecipeState | PreconditionedState,
        energy_and_grad: EnergyAndGrad,
        step_size: jax.Array,
        temperature: jax.Array,
    ) -> tuple[Any, Info]:
        p = self.active_preconditioner()
        if p is None:
            return super().step(key, state, energy_and_grad, step_size, temperature)
        return preconditioned_step(
            p,
            lambda mass: PreconditionedLangevinRecipe(inverse(mass)),
            self.integrator,
            key,
            state,
            energy_and_grad,
            step_size,
            temperature,
        )

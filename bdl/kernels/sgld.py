"""SGLD: stochastic-gradient Langevin dynamics (Welling & Teh 2011), optionally preconditioned.

Recipe: z = θ, g = 0, D = M⁻¹ (M = I unless a preconditioner sets it), Q = 0. Euler–Maruyama:

    θ ← θ − hM⁻¹∇Ũ(θ) + √(2ThM⁻¹)·ξ,   ξ ~ N(0, I),

whose stationary law tends to π_T ∝ exp(−U/T) as h → 0 (bias O(h)). M depends only on past
gradients (never on the current θ), so Γ = 0; a frozen or semi-adaptive M (``layerwise``) is exact
between its updates, a per-step adapted M (``rmsprop``, pSGLD) is approximate because it depends
on the gradient history (Ma, Chen & Fox 2015).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bdl.kernels.blocks import Block, GroupKind, Scalar
from bdl.kernels.integrators import EulerMaruyama
from bdl.kernels.preconditioners import IDENTITY, Preconditioner, check_preconditioner
from bdl.kernels.recipe import Context, Recipe, State
from bdl.kernels.recipe_kernel import RecipeKernel, StepSize


class Langevin(Recipe):
    """g = 0, D = M⁻¹, Q = 0 (overdamped Langevin)."""

    mass: Block = Scalar(1.0)

    @property
    def groups(self) -> dict[str, GroupKind]:
        return {"theta": "elementwise"}

    state_dependent = False

    def kinetic(self, z: State) -> jax.Array:
        return jnp.zeros(())

    def diffusion(self, z: State, ctx: Context) -> dict[str, Block]:
        return {"theta": self.mass.power(-1)}

    def curl(self, z: State, ctx: Context) -> dict[tuple[str, str], Block]:
        return {}

    def with_mass(self, mass: Block) -> Langevin:
        return Langevin(mass)


def sgld(
    step_size: StepSize | None = None, preconditioner: Preconditioner = IDENTITY
) -> RecipeKernel:
    """SGLD with step size h (a float or a schedule ``t -> h_t``).

    Args:
        step_size: h.
        preconditioner: a diagonal preconditioner, e.g.
            ``bdl.kernels.preconditioners.layerwise()``; D = M⁻¹ (default: M = I).

    Returns:
        The kernel, a :class:`RecipeKernel`.
    """
    check_preconditioner(preconditioner, "sgld")
    return RecipeKernel(Langevin(), step_size, EulerMaruyama(), preconditioner, name="sgld")

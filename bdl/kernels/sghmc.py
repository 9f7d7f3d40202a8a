"""SGHMC: stochastic-gradient Hamiltonian Monte Carlo (Chen, Fox & Guestrin 2014).

Recipe: z = (θ, r), g = ½ rᵀM⁻¹r, Q = [[0, −I], [I, 0]], D = diag(0, C). Symplectic Euler:

    r ← r − h∇Ũ(θ) − hCM⁻¹r + √(2ThC)·ξ,    θ ← θ + hM⁻¹r.

Deep-learning parameterisation (Wenzel et al. 2020, App. B): a learning rate ℓ and momentum
decay β give h = √(ℓ/n) and C = (1 − β)√(n/ℓ) (with M = I). At T = 0 this is exactly
``optax.sgd(ℓ, momentum=β)`` on the mean minibatch loss Ũ/n, with r = −(h·n)·(optax trace).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from bdl.kernels.recipe import Blocks, Context, GroupKind, Recipe
from bdl.kernels.recipe_kernel import RecipeKernel
from bdl.utils.trees import tree_normal_like

PyTree = Any


class HamiltonianRecipe(Recipe):
    """g = ½ Σ r²/m, Q = [[0, −I], [I, 0]], D = diag(0, C); M and C diagonal (scalars or θ-like)."""

    mass: Any = 1.0
    friction: Any = 1.0

    @property
    def groups(self) -> dict[str, GroupKind]:
        return {"theta": "elementwise", "r": "elementwise"}

    def kinetic(self, z: dict[str, PyTree]) -> jax.Array:
        if isinstance(self.mass, int | float):
            return 0.5 * sum(jnp.sum(r * r) for r in jax.tree.leaves(z["r"])) / self.mass
        return 0.5 * sum(
            jnp.sum(r * r / m)
            for r, m in zip(jax.tree.leaves(z["r"]), jax.tree.leaves(self.mass), strict=True)
        )

    def diffusion(self, z: dict[str, PyTree], ctx: Context) -> Blocks:
        return {("r", "r"): self.friction}

    def curl(self, z: dict[str, PyTree], ctx: Context) -> Blocks:
        return {("theta", "r"): -1.0, ("r", "theta"): 1.0}

    @property
    def state_dependent(self) -> bool:
        return False


class SGHMC(RecipeKernel):
    """SGHMC with step size h and friction C, or learning rate ℓ and momentum decay β.

    Args:
        step_size: h (float or schedule); or leave ``None`` and give ``learning_rate``.
        friction: C > 0 (a float or a θ-shaped pytree).
        mass: diagonal mass M (a float or a θ-shaped pytree).
        learning_rate, momentum: the (ℓ, β) parameterisation, resolved at :meth:`bind` with the
            training-set size n of the target.
        init_momentum: ``"zero"`` (default; as SGD) or ``"sample"`` (r ~ N(0, M)).
    """

    friction: Any = 1.0
    mass: Any = 1.0
    learning_rate: float | None = None
    momentum: float | None = None
    init_momentum: str = "zero"
    integrator: str = "symplectic_euler"

    def __check_init__(self) -> None:
        if self.learning_rate is not None:
            if self.step_size is not None:
                raise ValueError(
                    "sghmc: give either step_size (with friction) or learning_rate "
                    "(with momentum), not both."
                )
            if not self.learning_rate > 0:
                raise ValueError(f"sghmc: learning_rate must be > 0; got {self.learning_rate}.")
            if self.momentum is None or not 0 <= self.momentum < 1:
                raise ValueError(
                    f"sghmc: momentum must be in [0, 1) with learning_rate; got {self.momentum}."
                )
        if isinstance(self.friction, int | float) and not self.friction > 0:
            raise ValueError(f"sghmc: friction must be > 0; got {self.friction}.")
        if isinstance(self.mass, int | float) and not self.mass > 0:
            raise ValueError(f"sghmc: mass must be > 0; got {self.mass}.")
        if self.init_momentum not in ("zero", "sample"):
            raise ValueError("sghmc: init_momentum must be 'zero' or 'sample'.")

    def has_alternative_step_size(self) -> bool:
        return self.learning_rate is not None

    def bind(self, target: Any) -> SGHMC:
        if self.learning_rate is None:
            return self
        n = target.n
        h = math.sqrt(self.learning_rate / n)
        c = (1.0 - self.momentum) * math.sqrt(n / self.learning_rate)
        return SGHMC(
            step_size=h,
            friction=c,
            mass=self.mass,
            init_momentum=self.init_momentum,
            integrator=self.integrator,
        )

    def recipe(self) -> Recipe:
        return HamiltonianRecipe(mass=self.mass, friction=self.friction)

    def init_aux(self, position: PyTree, key: jax.Array) -> dict[str, PyTree]:
        if self.init_momentum == "zero":
            return {"r": jax.tree.map(jnp.zeros_like, position)}
        noise = tree_normal_like(key, position)
        if isinstance(self.mass, int | float):
            return {"r": jax.tree.map(lambda e: e * math.sqrt(self.mass), noise)}
        return {"r": jax.tree.map(lambda e, m: e * jnp.sqrt(m), noise, self.mass)}

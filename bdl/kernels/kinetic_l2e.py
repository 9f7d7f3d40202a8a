"""Kinetic-L2E: L2E with a learned kinetic energy (Kim, Jung, Kim & Lee, ICML 2024, App. D).

Recipe: z = (θ, r), SGHMC's D = diag(0, C) and Q = [[0, −I], [I, 0]], and the learned kinetic
energy of a Gaussian momentum r | θ ~ N(f_φ(θ), T·I) with a learned mean:

    g(θ, r) = ½‖r − f_φ(θ)‖²,    f_φ(θ)ᵢ = MLP_φ(θᵢ),

an elementwise MLP (1 → 32 → 32 → 1). ∫exp(−g/T)dr = (2πT)^{d/2} does not depend on θ, D and Q
are constant (Γ = 0), so exp(−(U + g)/T) is stationary and the θ-marginal is π_T: the sampler is
exact whatever φ. α = ∇_θ g = −(r − f_φ)·f_φ'(θ) and β = ∇_r g = r − f_φ by autodiff of g.
Symplectic Euler (App. D, Eq. 13, with θ moved at the new momentum):

    r ← r − h[∇Ũ(θ) + ∇_θ g(θ, r) + C·(r − f_φ(θ))] + √(2ThC)·ξ,
    θ ← θ + h·(r_new − f_φ(θ)).

The paper also feeds ∇Ũ(θ) to f_φ; bdl does not: g would then depend on the minibatch (not a
fixed function of z, so not exact) and ∇_θ g would need Hessian-vector products of U.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp

from bdl.kernels.elementwise_mlp import (
    ElementwiseMLP,
    MetaParams,
    check_architecture,
    init_mlp,
    resolve_meta_params,
)
from bdl.kernels.recipe import Blocks, Context, GroupKind, Recipe
from bdl.kernels.recipe_kernel import RecipeKernel
from bdl.kernels.sghmc import check_sgd_parameterisation, sgd_changes
from bdl.utils.trees import tree_normal_like

PyTree = Any

NETWORKS: dict[str, tuple[int, int]] = {"f": (1, 1)}


def init_kinetic_l2e_params(
    seed: int = 0,
    hidden: tuple[int, ...] = (32, 32),
    *,
    final_scale: float = 0.1,
    activation: str = "tanh",
) -> MetaParams:
    """Random meta-parameters: f_φ = MLP 1 → 32 → 32 → 1 with its last layer scaled by
    ``final_scale`` (0: f_φ = 0 and Kinetic-L2E is exactly SGHMC)."""
    key = jax.random.key(seed)
    return {"f": init_mlp(key, (1, *hidden, 1), activation=activation, final_scale=final_scale)}


class KineticL2ERecipe(Recipe):
    """g = ½‖r − f_φ(θ)‖², D = diag(0, C), Q = [[0, −I], [I, 0]]."""

    net: ElementwiseMLP
    friction: Any = 1.0

    @property
    def groups(self) -> dict[str, GroupKind]:
        return {"theta": "elementwise", "r": "elementwise"}

    def shift(self, theta: PyTree) -> PyTree:
        """f_φ(θ), the learned mean of r given θ."""
        (out,) = self.net.map_tree(theta)
        return out

    def kinetic(self, z: dict[str, PyTree]) -> jax.Array:
        f = self.shift(z["theta"])
        return 0.5 * sum(
            jnp.sum(jnp.square(r - m))
            for r, m in zip(jax.tree.leaves(z["r"]), jax.tree.leaves(f), strict=True)
        )

    def diffusion(self, z: dict[str, PyTree], ctx: Context) -> Blocks:
        return {("r", "r"): self.friction}

    def curl(self, z: dict[str, PyTree], ctx: Context) -> Blocks:
        return {("theta", "r"): -1.0, ("r", "theta"): 1.0}

    @property
    def state_dependent(self) -> bool:
        return False


class KineticL2E(RecipeKernel):
    """Kinetic-L2E with step size h and friction C (or learning rate ℓ and momentum β).

    Args:
        meta_params: ``{"f": ElementwiseMLP(1 → … → 1)}``, a path from
            :func:`save_meta_params`, or ``None`` for the package default.
        step_size: h (float or schedule); or ``None`` with ``learning_rate``.
        friction: C > 0.
        learning_rate, momentum: (ℓ, β) → h = √(ℓ/n), C = (1 − β)√(n/ℓ) at :meth:`bind`.
        init_momentum: ``"zero"`` or ``"sample"`` (r ~ N(f_φ(θ), I)).
    """

    meta_params: Any = None
    friction: float = 1.0
    learning_rate: float | None = None
    momentum: float | None = None
    init_momentum: str = "zero"
    integrator: str = "symplectic_euler"

    def __post_init__(self) -> None:
        self.meta_params = resolve_meta_params(
            "kinetic-l2e", self.meta_params, None, init_kinetic_l2e_params
        )

    def __check_init__(self) -> None:
        check_architecture("kinetic-l2e", self.meta_params, NETWORKS)
        check_sgd_parameterisation("kinetic-l2e", self.learning_rate, self.momentum, self.step_size)
        if not (math.isfinite(self.friction) and self.friction > 0):
            raise ValueError(f"kinetic-l2e: friction must be > 0; got {self.friction}.")
        if self.init_momentum not in ("zero", "sample"):
            raise ValueError("kinetic-l2e: init_momentum must be 'zero' or 'sample'.")

    @property
    def name(self) -> str:
        return "kinetic-l2e"

    def has_alternative_step_size(self) -> bool:
        return self.learning_rate is not None

    def bind(self, target: Any) -> KineticL2E:
        changes = sgd_changes(self, target.n)
        return dataclasses.replace(self, **changes) if changes else self

    def recipe(self) -> KineticL2ERecipe:
        return KineticL2ERecipe(net=self.meta_params["f"], friction=self.friction)

    def init_aux(self, position: PyTree, key: jax.Array) -> dict[str, PyTree]:
        if self.init_momentum == "zero":
            return {"r": jax.tree.map(jnp.zeros_like, position)}
        shift = self.recipe().shift(position)
        return {"r": jax.tree.map(jnp.add, shift, tree_normal_like(key, position))}


def make_kinetic_l2e(
    *, meta_params: Any = None, seed: int | None = None, **hyper: Any
) -> KineticL2E:
    """Registry factory: ``meta_params`` (dict or path) or ``seed`` (random meta-parameters)."""
    params = resolve_meta_params("kinetic-l2e", meta_params, seed, init_kinetic_l2e_params)
    return KineticL2E(meta_params=params, **hyper)

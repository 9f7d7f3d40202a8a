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

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from bdl.kernels.blocks import Block, Scalar
from bdl.kernels.elementwise_mlp import (
    ElementwiseMLP,
    MetaParams,
    init_mlp,
    resolve_meta_params,
)
from bdl.kernels.integrators import SymplecticEuler
from bdl.kernels.parameterisation import step_and_friction
from bdl.kernels.recipe import State
from bdl.kernels.recipe_kernel import RecipeKernel, StepSize
from bdl.kernels.sghmc import UnitMassMomentum, check_init_momentum
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


class KineticL2ERecipe(UnitMassMomentum):
    """g = ½‖r − f_φ(θ)‖², D = diag(0, C), Q = [[0, −I], [I, 0]]."""

    net: ElementwiseMLP
    friction: Block = eqx.field(default=Scalar(1.0), kw_only=True)
    init_momentum: str = eqx.field(static=True, default="zero")

    @property
    def meta_params(self) -> MetaParams:
        return {"f": self.net}

    def shift(self, theta: PyTree) -> PyTree:
        """f_φ(θ), the learned mean of r given θ."""
        (out,) = self.net.map_tree(theta)
        return out

    def kinetic(self, z: State) -> jax.Array:
        f = self.shift(z["theta"])
        return 0.5 * sum(
            jnp.sum(jnp.square(r - m))
            for r, m in zip(jax.tree.leaves(z["r"]), jax.tree.leaves(f), strict=True)
        )

    def kinetic_grad(self, z: State) -> State:
        """∇g = (−(r − f_φ(θ))·f_φ'(θ), r − f_φ(θ)), exactly the gradient of :meth:`kinetic`.

        f_φ acts on each θᵢ alone, so ∂f_φ(θ)ᵢ/∂θᵢ is its only non-zero derivative: f_φ and f_φ'
        come from one forward pass that carries the derivative beside the value
        (:meth:`ElementwiseMLP.map_tree_with_partials`), instead of a forward and a reverse pass
        through the network. θ does not move between the two half-steps of
        :class:`SymplecticEuler`, so the pass is shared between them.
        """
        (f,), ((df,),) = self.net.map_tree_with_partials(z["theta"], wrt=(0,))
        beta = jax.tree.map(jnp.subtract, z["r"], f)
        alpha = jax.tree.map(lambda b, d: -b * d, beta, df)
        return {"theta": alpha, "r": beta}

    def init_aux(self, position: PyTree, key: jax.Array) -> State:
        if self.init_momentum == "zero":
            return {"r": jax.tree.map(jnp.zeros_like, position)}
        return {"r": jax.tree.map(jnp.add, self.shift(position), tree_normal_like(key, position))}


def kinetic_l2e(
    step_size: StepSize | None = None,
    friction: float | None = None,
    *,
    meta_params: Any = None,
    seed: int | None = None,
    learning_rate: float | None = None,
    momentum: float | None = None,
    init_momentum: str = "zero",
) -> RecipeKernel:
    """Kinetic-L2E with step size h and friction C (or learning rate ℓ and momentum β); the
    arguments it shares with :func:`~bdl.kernels.l2e.l2e` mean what they mean there.

    Args:
        step_size: h, as for L2E.
        friction: C, as for L2E.
        meta_params: ``{"f": ElementwiseMLP(1 → … → 1)}``, a path from
            :func:`save_meta_params`, or ``None`` for the package default.
        seed: as for L2E.
        learning_rate: ℓ, as for L2E.
        momentum: β, as for L2E.
        init_momentum: ``"zero"`` or ``"sample"`` (r ~ N(f_φ(θ), I)).

    Returns:
        The kernel, a :class:`RecipeKernel`.
    """
    step, friction = step_and_friction("kinetic-l2e", step_size, friction, learning_rate, momentum)
    check_init_momentum(init_momentum, "kinetic-l2e")
    params = resolve_meta_params(
        "kinetic-l2e", meta_params, seed, init_kinetic_l2e_params, NETWORKS
    )
    recipe = KineticL2ERecipe(params["f"], friction=Scalar(friction), init_momentum=init_momentum)
    return RecipeKernel(recipe, step, SymplecticEuler(), name="kinetic-l2e")

"""L2E: Learning to Explore (Kim, Jung, Kim & Lee, ICML 2024).

SGHMC's D = diag(0, C) and Q = [[0, −I], [I, 0]] with the kinetic gradient (∇_θ g, ∇_r g)
replaced by a learned field (α_φ, β_φ). Symplectic Euler (Kim et al. 2024, Eq. 6):

    r ← r − h[∇Ũ(θ) + α_φ(θ, r) + C·β_φ(θ, r)] + √(2ThC)·ξ,
    θ ← θ + h·β_φ(θ, r_new).

α_φ and β_φ come from ONE elementwise MLP (two hidden layers of 32, a shared trunk and a 2-output
last layer: the two heads) applied to 9 features per coordinate (App. I.1): the stochastic
gradient gᵢ, the parameter θᵢ, the momentum rᵢ and six running averages of the gradient
m_k ← d_k·m_k + (1 − d_k)·g with decays d = (0.1, 0.5, 0.9, 0.99, 0.999, 0.9999), updated with
the step's gradient before the features are formed. Each feature is divided by its RMS over its
tensor (leaf), x̂ = x/√(mean(x²) + ε). The heads are read in the units of the quantity they
correct, with the network as a residual around SGHMC:

    α_φ = σ_g·head_α(x̂),    β_φ = r + σ_r·head_β(x̂),

where σ_g and σ_r are the per-leaf RMS of the gradient and of the momentum. Zero heads give
α = 0, β = r: exactly SGHMC (with unit mass), step for step.

The running averages are kernel state (history), not recipe variables, and the field is neither
constrained to be a gradient nor a function of z alone: ``bdl check l2e`` reports L2E as
approximate (the paper's Assumption 3.1 is assumed, not enforced). ``recipe_at(state)`` declares
SGHMC's D, Q with the learned field at the state's stored gradient and averages.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from bdl.kernels.base import Info, tree_norm
from bdl.kernels.elementwise_mlp import (
    ElementwiseMLP,
    MetaParams,
    check_architecture,
    init_mlp,
    resolve_meta_params,
)
from bdl.kernels.integrators import INTEGRATORS
from bdl.kernels.recipe import Context
from bdl.kernels.recipe_kernel import RecipeKernel
from bdl.kernels.sghmc import (
    HamiltonianRecipe,
    check_sgd_parameterisation,
    sgd_changes,
)
from bdl.utils.trees import tree_normal_like

PyTree = Any

#: decays of the gradient running averages (Kim et al. 2024, App. I.1)
EMA_DECAYS: tuple[float, ...] = (0.1, 0.5, 0.9, 0.99, 0.999, 0.9999)
NUM_FEATURES = 3 + len(EMA_DECAYS)
NETWORKS: dict[str, tuple[int, int]] = {"net": (NUM_FEATURES, 2)}
_EPS = 1e-30


def init_l2e_params(
    seed: int = 0,
    hidden: tuple[int, ...] = (32, 32),
    *,
    final_scale: float = 0.1,
    activation: str = "tanh",
) -> MetaParams:
    """Random meta-parameters: one MLP 9 → 32 → 32 → 2 (heads α, β) whose last layer is scaled
    by ``final_scale`` (0: L2E is exactly SGHMC)."""
    key = jax.random.key(seed)
    sizes = (NUM_FEATURES, *hidden, 2)
    return {"net": init_mlp(key, sizes, activation=activation, final_scale=final_scale)}


def _rms(x: jax.Array) -> jax.Array:
    return jnp.sqrt(jnp.mean(jnp.square(x)) + _EPS)


def update_emas(emas: tuple[PyTree, ...], grad: PyTree) -> tuple[PyTree, ...]:
    """m_k ← d_k·m_k + (1 − d_k)·g for every decay d_k."""
    return tuple(
        jax.tree.map(lambda m, g, d=d: d * m + (1.0 - d) * g, m, grad)
        for d, m in zip(EMA_DECAYS, emas, strict=True)
    )


def features(theta: PyTree, r: PyTree, grad: PyTree, emas: tuple[PyTree, ...]) -> list[PyTree]:
    """The 9 per-coordinate features (g, θ, r, m_0.1, …, m_0.9999), each divided by its RMS over
    its leaf."""
    raw = [grad, theta, r, *emas]
    return [jax.tree.map(lambda x: x / _rms(x), f) for f in raw]


def learned_field(
    net: ElementwiseMLP, theta: PyTree, r: PyTree, grad: PyTree, emas: tuple[PyTree, ...]
) -> tuple[PyTree, PyTree]:
    """(α_φ, β_φ) = (σ_g·head_α, r + σ_r·head_β) at (θ, r) given the gradient features."""
    head_a, head_b = net.map_tree(*features(theta, r, grad, emas))
    alpha = jax.tree.map(lambda a, g: _rms(g) * a, head_a, grad)
    beta = jax.tree.map(lambda b, m: m + _rms(m) * b, head_b, r)
    return alpha, beta


class L2ERecipe(HamiltonianRecipe):
    """SGHMC's D and Q with the kinetic field (α_φ, β_φ) at fixed gradient features."""

    net: ElementwiseMLP | None = None
    grad: PyTree = None
    emas: tuple[PyTree, ...] = ()

    def kinetic_grad(self, z: dict[str, PyTree]) -> dict[str, PyTree]:
        alpha, beta = learned_field(self.net, z["theta"], z["r"], self.grad, self.emas)
        return {"theta": alpha, "r": beta}


class L2EState(NamedTuple):
    """z = (θ, r); the gradient running averages and the last gradient are history."""

    z: dict[str, PyTree]
    emas: tuple[PyTree, ...]
    grad: PyTree


class L2E(RecipeKernel):
    """L2E with step size h and friction C (or learning rate ℓ and momentum β).

    Args:
        meta_params: ``{"net": ElementwiseMLP(9 → … → 2)}``, a path from
            :func:`save_meta_params`, or ``None`` for the package default.
        step_size: h (float or schedule); or ``None`` with ``learning_rate``.
        friction: C > 0.
        learning_rate, momentum: (ℓ, β) → h = √(ℓ/n), C = (1 − β)√(n/ℓ) at :meth:`bind`.
        init_momentum: ``"zero"`` or ``"sample"`` (r ~ N(0, I)).
    """

    meta_params: Any = None
    friction: float = 1.0
    learning_rate: float | None = None
    momentum: float | None = None
    init_momentum: str = "zero"
    integrator: str = "symplectic_euler"

    def __post_init__(self) -> None:
        self.meta_params = resolve_meta_params("l2e", self.meta_params, None, init_l2e_params)

    def __check_init__(self) -> None:
        check_architecture("l2e", self.meta_params, NETWORKS)
        check_sgd_parameterisation("l2e", self.learning_rate, self.momentum, self.step_size)
        if not (math.isfinite(self.friction) and self.friction > 0):
            raise ValueError(f"l2e: friction must be > 0; got {self.friction}.")
        if self.init_momentum not in ("zero", "sample"):
            raise ValueError("l2e: init_momentum must be 'zero' or 'sample'.")

    def has_alternative_step_size(self) -> bool:
        return self.learning_rate is not None

    def bind(self, target: Any) -> L2E:
        changes = sgd_changes(self, target.n)
        return dataclasses.replace(self, **changes) if changes else self

    def recipe(self) -> L2ERecipe:
        raise TypeError("l2e: the recipe depends on the gradient history; use recipe_at(state).")

    def _recipe(self, grad: PyTree, emas: tuple[PyTree, ...]) -> L2ERecipe:
        return L2ERecipe(
            mass=1.0, friction=self.friction, net=self.meta_params["net"], grad=grad, emas=emas
        )

    def recipe_at(self, state: L2EState) -> L2ERecipe:
        return self._recipe(state.grad, state.emas)

    def init(self, position: PyTree, key: jax.Array) -> L2EState:
        if self.init_momentum == "zero":
            r = jax.tree.map(jnp.zeros_like, position)
        else:
            r = tree_normal_like(key, position)
        zeros = jax.tree.map(jnp.zeros_like, position)
        return L2EState({"theta": position, "r": r}, tuple(zeros for _ in EMA_DECAYS), zeros)

    def step(
        self,
        key: jax.Array,
        state: L2EState,
        energy_and_grad: Any,
        step_size: jax.Array,
        temperature: jax.Array,
    ) -> tuple[L2EState, Info]:
        energy, grad = energy_and_grad(state.z["theta"])
        emas = update_emas(state.emas, grad)
        recipe = self._recipe(grad, emas)
        ctx = Context(energy, grad)
        z = INTEGRATORS[self.integrator](recipe, state.z, ctx, step_size, temperature, key)
        info = Info(energy, recipe.kinetic(z), tree_norm(grad), step_size, temperature)
        return L2EState(z, emas, grad), info


def make_l2e(*, meta_params: Any = None, seed: int | None = None, **hyper: Any) -> L2E:
    """Registry factory: ``meta_params`` (dict or path) or ``seed`` (random meta-parameters)."""
    return L2E(meta_params=resolve_meta_params("l2e", meta_params, seed, init_l2e_params), **hyper)

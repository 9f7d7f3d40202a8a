"""SGHMC: stochastic-gradient Hamiltonian Monte Carlo (Chen, Fox & Guestrin 2014).

Recipe: z = (θ, r), g = ½ rᵀM⁻¹r, Q = [[0, −I], [I, 0]], D = diag(0, C). Symplectic Euler:

    r ← r − h∇Ũ(θ) − hCM⁻¹r + √(2ThC)·ξ,    θ ← θ + hM⁻¹r.

Deep-learning parameterisation (Wenzel et al. 2020, App. B): a learning rate ℓ and momentum
decay β give h = √(ℓ/n) and C = (1 − β)√(n/ℓ) (with M = I). At T = 0 this is exactly
``optax.sgd(ℓ, momentum=β)`` on the mean minibatch loss Ũ/n, with r = −(h·n)·(optax trace).

With a preconditioner (:mod:`bdl.kernels.preconditioners`) the mass M is the preconditioner's
diagonal and ``friction`` is the *rate* γ (C = γM in the r-form above):

    r ← r − h∇Ũ(θ) − hγr + √(2ThγM)·ξ,    θ ← θ + hM⁻¹r

(Wenzel et al. 2020, Eq. 8–10: the momentum decays by (1 − hγ) per step whatever M is, and the
(ℓ, β) map above still holds), and a change of M rescales r ← M_new^{1/2} M_old^{−1/2} r (App. D).
The state stores the *canonical* momentum p = M^{−1/2}r, which that rescaling leaves unchanged, so
no extra pass over the parameters is needed when M changes. Recipe in z = (θ, p):

    g = ½pᵀp,   Q = [[0, −M^{−1/2}], [M^{−1/2}, 0]],   D = diag(0, γ),
    p ← p − hM^{−1/2}∇Ũ − hγp + √(2Thγ)·ξ,    θ ← θ + hM^{−1/2}p,

which is the r-form above step for step. M depends on past gradients only, so Γ = 0; a frozen or
semi-adaptive M is exact between its updates. ``collect`` reports r = M^{1/2}p and M.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from bdl.kernels.base import EnergyAndGrad, Info
from bdl.kernels.preconditioners import (
    PreconditionedState,
    Preconditioner,
    check_preconditioner,
    preconditioned_step,
)
from bdl.kernels.recipe import Blocks, Context, GroupKind, Recipe
from bdl.kernels.recipe_kernel import RecipeKernel, RecipeState
from bdl.utils.trees import tree_normal_like


def langevin_from_sgd(learning_rate: float, momentum: float, n: float) -> tuple[float, float]:
    """(h, γ) of SGD(ℓ, β) on the mean loss: h = √(ℓ/n), γ = (1 − β)√(n/ℓ) (Wenzel et al. 2020,
    App. B, Eq. 12–13); shared by every kernel with the learning-rate parameterisation."""
    n = float(n)
    return math.sqrt(learning_rate / n), (1.0 - momentum) * math.sqrt(n / learning_rate)


def sgd_changes(kernel: Any, n: float) -> dict[str, Any]:
    """The field changes that bind a friction kernel given as (ℓ, β): ``step_size`` and
    ``friction`` from :func:`langevin_from_sgd`, ``learning_rate`` and ``momentum`` cleared;
    empty when the kernel was given (h, C)."""
    if kernel.learning_rate is None:
        return {}
    step_size, friction = langevin_from_sgd(kernel.learning_rate, kernel.momentum, n)
    return {"step_size": step_size, "friction": friction, "learning_rate": None, "momentum": None}


def check_sgd_parameterisation(
    name: str, learning_rate: Any, momentum: Any, step_size: Any
) -> None:
    """Raise ``ValueError`` naming the argument unless (ℓ, β) is absent or valid: ℓ > 0,
    β ∈ [0, 1), and no ``step_size`` beside it."""
    if learning_rate is None:
        return
    if step_size is not None:
        raise ValueError(
            f"{name}: give either step_size or learning_rate (with momentum), not both."
        )
    if not learning_rate > 0:
        raise ValueError(f"{name}: learning_rate must be > 0; got {learning_rate}.")
    if momentum is None or not 0 <= momentum < 1:
        raise ValueError(f"{name}: momentum must be in [0, 1) with learning_rate; got {momentum}.")


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


class CanonicalHamiltonianRecipe(Recipe):
    """z = (θ, p), p = M^{−1/2}r: g = ½pᵀp, Q_θp = −M^{−1/2}, Q_pθ = M^{−1/2}, D_pp = γ.

    ``inv_sqrt_mass`` M^{−1/2} and ``friction`` γ are diagonal (scalars, θ-shaped pytrees or one
    0-d array per leaf) and constant in z.
    """

    inv_sqrt_mass: Any = 1.0
    friction: Any = 1.0

    @property
    def groups(self) -> dict[str, GroupKind]:
        return {"theta": "elementwise", "p": "elementwise"}

    def kinetic(self, z: dict[str, PyTree]) -> jax.Array:
        return 0.5 * sum(jnp.sum(p * p) for p in jax.tree.leaves(z["p"]))

    def diffusion(self, z: dict[str, PyTree], ctx: Context) -> Blocks:
        return {("p", "p"): self.friction}

    def curl(self, z: dict[str, PyTree], ctx: Context) -> Blocks:
        s = self.inv_sqrt_mass
        return {("theta", "p"): jax.tree.map(jnp.negative, s), ("p", "theta"): s}

    @property
    def state_dependent(self) -> bool:
        return False


class SGHMC(RecipeKernel):
    """SGHMC with step size h and friction C, or learning rate ℓ and momentum decay β.

    Args:
        step_size: h (float or schedule); or leave ``None`` and give ``learning_rate``.
        friction: C > 0 (a float or a θ-shaped pytree); with a preconditioner, the rate γ
            (C = γM).
        mass: constant diagonal mass M (a float or a θ-shaped pytree).
        learning_rate, momentum: the (ℓ, β) parameterisation, resolved at :meth:`bind` with the
            training-set size n of the target.
        init_momentum: ``"zero"`` (default; as SGD) or ``"sample"`` (r ~ N(0, M)).
        preconditioner: optional adapted diagonal mass, e.g. ``layerwise()`` (then ``mass``
            must stay 1).
        collect_momentum: also collect ``"momentum"`` r (and ``"mass"`` M when preconditioned)
            with every draw, for kinetic-temperature diagnostics.
    """

    friction: Any = 1.0
    mass: Any = 1.0
    learning_rate: float | None = None
    momentum: float | None = None
    init_momentum: str = "zero"
    integrator: str = "symplectic_euler"
    preconditioner: Preconditioner | None = None
    collect_momentum: bool = eqx.field(static=True, default=False)

    def __check_init__(self) -> None:
        check_sgd_parameterisation(self.name, self.learning_rate, self.momentum, self.step_size)
        if isinstance(self.friction, int | float) and not self.friction > 0:
            raise ValueError(f"{self.name}: friction must be > 0; got {self.friction}.")
        if isinstance(self.mass, int | float) and not self.mass > 0:
            raise ValueError(f"{self.name}: mass must be > 0; got {self.mass}.")
        if self.init_momentum not in ("zero", "sample"):
            raise ValueError(f"{self.name}: init_momentum must be 'zero' or 'sample'.")
        check_preconditioner(self.preconditioner, self.name)
        if self.preconditioner is not None and not (
            isinstance(self.mass, int | float) and self.mass == 1
        ):
            raise ValueError(
                f"{self.name}: give either a constant mass or a preconditioner, not both."
            )

    def has_alternative_step_size(self) -> bool:
        return self.learning_rate is not None

    def bind(self, target: Any) -> SGHMC:
        changes: dict[str, Any] = {}
        if self.preconditioner is not None:
            changes["preconditioner"] = self.preconditioner.bind(target)
        changes.update(sgd_changes(self, target.n))
        return dataclasses.replace(self, **changes) if changes else self

    def recipe(self) -> Recipe:
        return HamiltonianRecipe(mass=self.mass, friction=self.friction)

    def preconditioned_recipe(self, mass: PyTree) -> Recipe:
        """The canonical-momentum recipe for the preconditioner's M (module docstring)."""
        inv_sqrt = jax.tree.map(jax.lax.rsqrt, mass)
        return CanonicalHamiltonianRecipe(inv_sqrt_mass=inv_sqrt, friction=self.friction)

    def recipe_at(self, state: Any) -> Recipe:
        if self.preconditioner is None:
            return self.recipe()
        return self.preconditioned_recipe(state.precond.mass)

    def init_aux(self, position: PyTree, key: jax.Array) -> dict[str, PyTree]:
        if self.init_momentum == "zero":
            return {"r": jax.tree.map(jnp.zeros_like, position)}
        noise = tree_normal_like(key, position)
        if isinstance(self.mass, int | float):
            return {"r": jax.tree.map(lambda e: e * math.sqrt(self.mass), noise)}
        return {"r": jax.tree.map(lambda e, m: e * jnp.sqrt(m), noise, self.mass)}

    def init(self, position: PyTree, key: jax.Array) -> Any:
        if self.preconditioner is None:
            return super().init(position, key)
        if self.init_momentum == "zero":
            p = jax.tree.map(jnp.zeros_like, position)
        else:  # r ~ N(0, M) ⇔ p ~ N(0, I)
            p = tree_normal_like(key, position)
        return PreconditionedState({"theta": position, "p": p}, self.preconditioner.init(position))

    def step(
        self,
        key: jax.Array,
        state: RecipeState | PreconditionedState,
        energy_and_grad: EnergyAndGrad,
        step_size: jax.Array,
        temperature: jax.Array,
    ) -> tuple[Any, Info]:
        if self.preconditioner is None:
            return super().step(key, state, energy_and_grad, step_size, temperature)
        return preconditioned_step(
            self.preconditioner,
            self.preconditioned_recipe,
            self.integrator,
            key,
            state,
            energy_and_grad,
            step_size,
            temperature,
        )

    def momentum_of(self, state: Any) -> PyTree:
        """The momentum r (= M^{1/2}p with a preconditioner)."""
        if self.preconditioner is None:
            return state.z["r"]
        return jax.tree.map(lambda p, m: p * jnp.sqrt(m), state.z["p"], state.precond.mass)

    def collect(self, state: Any) -> dict[str, PyTree]:
        out = {"position": self.position(state)}
        if self.collect_momentum:
            out["momentum"] = self.momentum_of(state)
            if self.preconditioner is not None:
                out["mass"] = state.precond.mass
        return out

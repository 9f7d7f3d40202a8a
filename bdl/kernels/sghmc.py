"""SGHMC: stochastic-gradient Hamiltonian Monte Carlo (Chen, Fox & Guestrin 2014).

Recipe in canonical momentum p = M^{−1/2}r, with M the diagonal mass (I, a constant, or a
preconditioner's) and γ the friction rate (C = γM in the r-form):

    z = (θ, p),   g = ½pᵀp,   Q = [[0, −M^{−1/2}], [M^{−1/2}, 0]],   D = diag(0, γ).

Symplectic Euler gives, written in r = M^{1/2}p,

    r ← r − h∇Ũ(θ) − hγr + √(2ThγM)·ξ,    θ ← θ + hM⁻¹r,

which for M = I is Chen et al.'s update with C = γ (Wenzel et al. 2020, Eq. 8–10, for general M:
the momentum decays by (1 − hγ) per step whatever M is). A preconditioner that changes M between
steps rescales r ← M_new^{1/2} M_old^{−1/2} r (Wenzel et al. 2020, App. D); the canonical p is
unchanged by that rescaling, so storing p makes it exact and free. M depends on past gradients
only, so Γ = 0.

Deep-learning parameterisation (docs/design.md): a learning rate ℓ and momentum decay β give
h = √(ℓ/n) and γ = (1 − β)√(n/ℓ). At T = 0 this is ``optax.sgd(ℓ, momentum=β)`` on the mean
minibatch loss Ũ/n, with r = −(h·n)·(optax trace).
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from bdl.kernels.blocks import Block, DenseMass, Elementwise, GroupKind, Scalar
from bdl.kernels.integrators import SymplecticEuler
from bdl.kernels.parameterisation import learning_rate_or_step
from bdl.kernels.preconditioners import IDENTITY, Identity, Preconditioner, check_preconditioner
from bdl.kernels.recipe import Context, Recipe, State
from bdl.kernels.recipe_kernel import RecipeKernel, StepSize
from bdl.utils import arguments
from bdl.utils.trees import leaf_paths, tree_normal_like

PyTree = Any
INIT_MOMENTA = ("zero", "sample")


class Hamiltonian(Recipe):
    """g = ½pᵀp, Q_θp = −M^{−1/2} = −Q_pθ, D_pp = γ; M and γ diagonal and constant in z."""

    friction: Block = Scalar(1.0)
    mass: Block = Scalar(1.0)
    init_momentum: str = eqx.field(static=True, default="zero")

    @property
    def groups(self) -> dict[str, GroupKind]:
        return {"theta": "elementwise", "p": "elementwise"}

    state_dependent = False

    def kinetic(self, z: State) -> jax.Array:
        return 0.5 * sum(jnp.sum(p * p) for p in jax.tree.leaves(z["p"]))

    def diffusion(self, z: State, ctx: Context) -> dict[str, Block]:
        return {"p": self.friction}

    def curl(self, z: State, ctx: Context) -> dict[tuple[str, str], Block]:
        s = self.mass.power(-0.5)
        return {("theta", "p"): s.map(jnp.negative), ("p", "theta"): s.transpose()}

    def init_aux(self, position: PyTree, key: jax.Array) -> State:
        if self.init_momentum == "zero":
            return {"p": jax.tree.map(jnp.zeros_like, position)}
        return {"p": tree_normal_like(key, position)}  # r ~ N(0, M) ⇔ p ~ N(0, I)

    def observables(self, z: State) -> dict[str, PyTree]:
        """``momentum`` r = M^{1/2}p and ``mass`` M (one value per leaf, or per coordinate)."""
        momentum = self.mass.power(0.5).times(z["p"])
        if isinstance(self.mass, Scalar):
            mass = jax.tree.map(lambda x: jnp.full((), self.mass.value, x.dtype), z["p"])
        elif isinstance(self.mass, DenseMass):
            mass = self.mass.root  # a square root S of M⁻¹ (S·Sᵀ = M⁻¹)
        else:
            mass = self.mass.values
        return {"momentum": momentum, "mass": mass}

    def with_mass(self, mass: Block) -> Hamiltonian:
        return Hamiltonian(self.friction, mass, self.init_momentum)

    def with_friction(self, friction: float) -> Hamiltonian:
        return Hamiltonian(Scalar(friction), self.mass, self.init_momentum)


class UnitMassMomentum(Recipe):
    """The part of SGHMC's recipe the learned kernels keep: z = (θ, r), unit mass,
    D = diag(0, C), Q = [[0, −I], [I, 0]], C constant (subclasses declare ``friction`` and
    the kinetic energy)."""

    friction: eqx.AbstractVar[Block]

    @property
    def groups(self) -> dict[str, GroupKind]:
        return {"theta": "elementwise", "r": "elementwise"}

    state_dependent = False

    def diffusion(self, z: State, ctx: Context) -> dict[str, Block]:
        return {"r": self.friction}

    def curl(self, z: State, ctx: Context) -> dict[tuple[str, str], Block]:
        return {("theta", "r"): Scalar(-1.0), ("r", "theta"): Scalar(1.0)}

    def with_friction(self, friction: Any) -> UnitMassMomentum:
        return eqx.tree_at(lambda r: r.friction, self, Scalar(friction))


def diagonal(value: Any, name: str, owner: str) -> Block:
    """A positive constant diagonal from a number (:class:`Scalar`) or a θ-shaped pytree of
    arrays (:class:`Elementwise`); ``ValueError`` naming ``name`` for a number or an entry that
    is not finite and > 0, ``TypeError`` for anything else (a string, a bool)."""
    if isinstance(value, Block):
        return value
    if isinstance(value, bool | str) or value is None:
        arguments.number(value, f"{owner}: {name}", above=0.0)  # raises the TypeError
    if isinstance(value, int | float | np.number):
        return Scalar(arguments.number(value, f"{owner}: {name}", above=0.0))
    for path, leaf in zip(leaf_paths(value), jax.tree.leaves(value), strict=True):
        where = f"{owner}: {name}" + (f" leaf {path}" if path else "")
        if not isinstance(leaf, np.ndarray | jax.Array | float | int) or isinstance(leaf, bool):
            raise TypeError(
                f"{where} must be a number > 0 or a θ-shaped pytree of positive arrays; got "
                f"{arguments.shown(leaf)}."
            )
        if isinstance(leaf, jax.core.Tracer):
            continue
        values = np.asarray(leaf, float)
        ok = np.isfinite(values) & (values > 0)
        if not ok.all():
            raise ValueError(f"{where} must have finite entries > 0; got {values[~ok][0]:g}.")
    return Elementwise(value)


def check_init_momentum(value: str, owner: str) -> None:
    if value not in INIT_MOMENTA:
        raise ValueError(f"{owner}: init_momentum must be 'zero' or 'sample'; got {value!r}.")


def sghmc(
    step_size: StepSize | None = None,
    friction: Any = None,
    *,
    mass: Any = 1.0,
    learning_rate: float | None = None,
    momentum: float | None = None,
    init_momentum: str = "zero",
    preconditioner: Preconditioner = IDENTITY,
    collect_momentum: bool = False,
) -> RecipeKernel:
    """SGHMC with step size h and friction γ, or learning rate ℓ and momentum decay β.

    Args:
        step_size: h (float or schedule); or give ``learning_rate``; or neither: ``bdl.sample``
            then adapts h, the diagonal mass and γ during burn-in (:mod:`bdl.sampling.warmup`).
        friction: γ > 0, the friction rate (a float or a θ-shaped pytree; C = γM); default 1.
            With ``learning_rate`` it is derived, and without a step size it is adapted: then it
            must not be given.
        mass: constant diagonal mass M (a float or a θ-shaped pytree).
        learning_rate: ℓ of the (ℓ, β) parameterisation, instead of ``step_size``: h = √(ℓ/n),
            resolved at bind with the training-set size n of the target.
        momentum: β of the (ℓ, β) parameterisation: γ = (1 − β)√(n/ℓ).
        init_momentum: ``"zero"`` (default; as SGD) or ``"sample"`` (r ~ N(0, M)).
        preconditioner: an adapted diagonal mass, e.g. ``layerwise()`` (then ``mass`` must
            stay 1).
        collect_momentum: also collect ``"momentum"`` r and ``"mass"`` M with every draw, for the
            kinetic-temperature diagnostics.

    Returns:
        The kernel, a :class:`RecipeKernel`.
    """
    step = learning_rate_or_step("sghmc", step_size, learning_rate, momentum)
    if step is None and friction is not None:
        raise ValueError(
            "sghmc: friction is adapted with the step size when step_size is not given; give "
            "step_size too, or neither."
        )
    if learning_rate is not None and friction is not None:
        raise ValueError(
            "sghmc: friction is derived from learning_rate and momentum; do not give both."
        )
    check_init_momentum(init_momentum, "sghmc")
    check_preconditioner(preconditioner, "sghmc")
    mass_block = diagonal(mass, "mass", "sghmc")
    if not isinstance(preconditioner, Identity) and not (
        isinstance(mass_block, Scalar) and mass_block.value == 1
    ):
        raise ValueError("sghmc: give either a constant mass or a preconditioner, not both.")
    recipe = Hamiltonian(
        diagonal(1.0 if friction is None else friction, "friction", "sghmc"),
        mass_block,
        init_momentum,
    )
    observe = (
        ("momentum", "mass") if arguments.flag(collect_momentum, "sghmc: collect_momentum") else ()
    )
    return RecipeKernel(
        recipe, step, SymplecticEuler(), preconditioner, name="sghmc", observe=observe
    )

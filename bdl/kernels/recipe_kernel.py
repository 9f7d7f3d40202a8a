"""The one transition: a kernel is data — a recipe, an integrator and a history transform.

    energy, grad = Ũ(θ), ∇Ũ(θ)                       # one minibatch gradient
    history = transform.prepare(history, grad)
    recipe = transform.condition(recipe, history)     # e.g. the preconditioner's mass
    z = integrator(recipe, z, (energy, grad), h, T, key)
    history = transform.update(history, grad)

Every registered kernel is a :class:`RecipeKernel` (possibly inside wrappers): SGLD is the
Langevin recipe under Euler–Maruyama, pSGLD the same with the RMSprop transform, SGHMC the
Hamiltonian recipe under symplectic Euler, and so on. Adding a kernel means writing a recipe
(docs/architecture.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from bdl.kernels.base import EnergyAndGrad, Info, Kernel, tree_norm
from bdl.kernels.blocks import Elementwise
from bdl.kernels.history import History, NoHistory
from bdl.kernels.integrators import EulerMaruyama, Integrator
from bdl.kernels.parameterisation import LearningRate, langevin_from_sgd
from bdl.kernels.recipe import Context, Recipe
from bdl.schedules import Schedule, as_schedule
from bdl.utils.trees import describe

PyTree = Any
StepSize = float | Schedule | LearningRate


class RecipeState(NamedTuple):
    """``z``: the recipe's groups ``{"theta": θ, "p": momentum, …}``; ``history``: the history
    transform's state (``()`` when there is none).

    Attributes:
        z: the recipe's groups.
        history: the history transform's state.
    """

    z: dict[str, PyTree]
    history: PyTree = ()


class RecipeKernel(Kernel):
    """A kernel = recipe + integrator + history transform + step size.

    Args:
        recipe: the (g, D, Q) to discretise (:class:`bdl.kernels.recipe.Recipe`).
        step_size: h, a float > 0 or a schedule ``t -> h_t``; or a
            :class:`bdl.kernels.parameterisation.LearningRate` (ℓ, β), resolved at :meth:`bind`
            to h = √(ℓ/n) and the recipe's friction γ = (1 − β)√(n/ℓ); or ``None``: ``bdl.sample``
            adapts h (and the mass and friction) during burn-in (:mod:`bdl.sampling.warmup`).
        integrator: the discretisation (default Euler–Maruyama).
        history: a transform of the gradient history that conditions the recipe (default none;
            a preconditioner from :mod:`bdl.kernels.preconditioners`).
        name: the kernel's name.
        observe: names of the recipe's :meth:`~bdl.kernels.recipe.Recipe.observables` collected
            with every draw (e.g. ``("momentum", "mass")``).
    """

    recipe: Recipe
    step_size: StepSize | None
    integrator: Integrator = EulerMaruyama()
    history: History = NoHistory()
    name: str = eqx.field(static=True, default="recipe", kw_only=True)
    observe: tuple[str, ...] = eqx.field(static=True, default=())

    def __check_init__(self) -> None:
        if not isinstance(self.recipe, Recipe):
            raise TypeError(
                f"{self.name}: recipe must be a bdl.kernels.recipe.Recipe; "
                f"got {type(self.recipe).__name__}."
            )
        step = self.step_size
        # arrays come from adaptation (traced, or per chain); a concrete scalar is checked
        if isinstance(step, jax.Array):
            checked = not isinstance(step, jax.core.Tracer) and step.ndim == 0
        else:
            checked = step is not None and not isinstance(step, LearningRate)
        if checked:
            as_schedule(step, f"{self.name}: step_size")
        if not isinstance(self.integrator, Integrator):
            raise TypeError(
                f"{self.name}: integrator must be a bdl.kernels.integrators.Integrator "
                f"(EulerMaruyama(), SymplecticEuler()); got {type(self.integrator).__name__}."
            )
        if not isinstance(self.history, History):
            raise TypeError(
                f"{self.name}: history must be a bdl.kernels.history.History (e.g. a "
                f"preconditioner); got {type(self.history).__name__}."
            )

    @property
    def meta_params(self) -> Any:
        """The learned recipe's meta-parameters (``None`` for a hand-designed recipe)."""
        return getattr(self.recipe, "meta_params", None)

    # ----------------------------------------------------------------------------- transition
    def bind(self, target: Any) -> RecipeKernel:
        recipe, step_size = self.recipe.bind(target), self.step_size
        if isinstance(step_size, LearningRate):
            step_size, friction = langevin_from_sgd(*step_size, target.n)
            recipe = recipe.with_friction(friction)
        return dataclasses.replace(
            self, recipe=recipe, step_size=step_size, history=self.history.bind(target)
        )

    def init(self, position: PyTree, key: jax.Array) -> RecipeState:
        _check_diagonals(self.recipe, position, self.name)
        z = {"theta": position, **self.recipe.init_aux(position, key)}
        return RecipeState(z, self.history.init(position))

    def step(
        self,
        key: jax.Array,
        state: RecipeState,
        energy_and_grad: EnergyAndGrad,
        step_size: jax.Array,
        temperature: jax.Array,
    ) -> tuple[RecipeState, Info]:
        energy, grad = energy_and_grad(state.z["theta"])
        history = self.history.prepare(state.history, grad)
        recipe = self.history.condition(self.recipe, history)
        z = self.integrator(recipe, state.z, Context(energy, grad), step_size, temperature, key)
        info = Info(energy, recipe.kinetic(z), tree_norm(grad), step_size, temperature)
        return RecipeState(z, self.history.update(history, grad)), info

    # ----------------------------------------------------------------------------- phases
    def step_size_at(self, step: jax.Array) -> jax.Array:
        """h_t, the step size of step t (the schedule's value, or the adapted constant).

        Args:
            step: the global step t.

        Returns:
            The scalar step size.

        Raises:
            ValueError: the kernel has no step size yet (it is adapted by ``bdl.sample``) or is
                parameterised by a learning rate and not bound to a target.
        """
        if self.step_size is None:
            raise ValueError(
                f"{self.name}: no step size: bdl.sample adapts it during burn-in; to step the "
                "kernel yourself, give step_size."
            )
        if isinstance(self.step_size, jax.Array):
            return self.step_size
        if isinstance(self.step_size, LearningRate):
            raise ValueError(
                f"{self.name}: the step size is set when the kernel is bound to a target; call "
                "kernel.bind(compiled) first (bdl.sample does)."
            )
        return as_schedule(self.step_size)(step)

    def hyper(self, step: jax.Array, temperature: jax.Array) -> tuple[jax.Array, jax.Array]:
        return self.step_size_at(step), temperature

    def is_sample(self, step: jax.Array) -> jax.Array:
        return jax.numpy.asarray(True)

    # ----------------------------------------------------------------------------- collection
    def position(self, state: RecipeState) -> PyTree:
        return state.z["theta"]

    def collect(self, state: RecipeState) -> dict[str, PyTree]:
        out = {"position": state.z["theta"]}
        if self.observe:
            seen = self.recipe_at(state).observables(state.z)
            out.update({k: seen[k] for k in self.observe})
        return out

    # ----------------------------------------------------------------------------- checker
    def recipe_at(self, state: RecipeState) -> Recipe:
        return self.history.condition(self.recipe, state.history)

    def augment_energy(self, energy_fn: Callable[[PyTree], jax.Array]) -> Any:
        return energy_fn

    # ----------------------------------------------------------------------------- adaptation
    def recipe_kernel(self) -> RecipeKernel:
        return self

    def with_recipe_kernel(self, kernel: RecipeKernel) -> RecipeKernel:
        return kernel

    def recipe_state(self, state: RecipeState) -> RecipeState:
        return state

    def with_recipe_state(self, state: RecipeState, inner: RecipeState) -> RecipeState:
        return inner


def _check_diagonals(recipe: Recipe, position: PyTree, name: str) -> None:
    """A pytree-valued constant diagonal (``friction=``, ``mass=``) has the positions' structure
    and each leaf's shape broadcasts to the position leaf's: else ``ValueError`` naming it."""
    for field in dataclasses.fields(recipe):
        block = getattr(recipe, field.name, None)
        if not isinstance(block, Elementwise):
            continue
        values = block.values
        fits = jax.tree.structure(values) == jax.tree.structure(position) and all(
            _broadcasts(jnp.shape(v), jnp.shape(p))
            for v, p in zip(jax.tree.leaves(values), jax.tree.leaves(position), strict=True)
        )
        if not fits:
            raise ValueError(
                f"{name}: {field.name} {describe(values)} does not fit the positions "
                f"{describe(position)}; give a number, or a pytree of the positions' structure "
                "with each leaf's shape (or one that broadcasts to it)."
            )


def _broadcasts(shape: tuple[int, ...], to: tuple[int, ...]) -> bool:
    try:
        return jnp.broadcast_shapes(shape, to) == to
    except ValueError:
        return False

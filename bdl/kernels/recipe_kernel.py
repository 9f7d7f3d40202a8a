"""Kernels defined by a recipe (g, D, Q) and an integrator.

A subclass provides the recipe (:meth:`RecipeKernel.recipe`), the initial auxiliary variables
(:meth:`RecipeKernel.init_aux`) and chooses an integrator; the step is then generic.
"""

from __future__ import annotations

import abc
from typing import Any, NamedTuple

import equinox as eqx
import jax

from bdl.kernels.base import Info, Kernel, Schedule, as_schedule, tree_norm
from bdl.kernels.integrators import INTEGRATORS
from bdl.kernels.recipe import Context, Recipe

PyTree = Any


class RecipeState(NamedTuple):
    """z: the recipe's groups, ``{"theta": θ, "r": momentum, …}``."""

    z: dict[str, PyTree]


class RecipeKernel(Kernel):
    """A kernel = recipe + integrator + defaults."""

    step_size: float | Schedule | None = None
    integrator: str = eqx.field(static=True, default="euler_maruyama")

    def __check_init__(self) -> None:
        if self.step_size is not None:
            as_schedule(self.step_size)
        elif not self.has_alternative_step_size():
            raise ValueError(f"{self.name}: step_size is required (a float > 0 or a schedule).")
        if self.integrator not in INTEGRATORS:
            raise ValueError(
                f"integrator must be one of {sorted(INTEGRATORS)}; got {self.integrator!r}."
            )

    def has_alternative_step_size(self) -> bool:
        """Whether the step size is derived from other hyper-parameters at :meth:`bind`."""
        return False

    @abc.abstractmethod
    def recipe(self) -> Recipe:
        """The (g, D, Q) this kernel discretises."""

    def recipe_at(self, state: RecipeState) -> Recipe:
        return self.recipe()

    def init_aux(self, position: PyTree, key: jax.Array) -> dict[str, PyTree]:
        """Initial auxiliary groups (none for first-order kernels)."""
        return {}

    def init(self, position: PyTree, key: jax.Array) -> RecipeState:
        return RecipeState({"theta": position, **self.init_aux(position, key)})

    def step_size_at(self, step: jax.Array) -> jax.Array:
        if self.step_size is None:
            raise ValueError(
                f"{self.name}: the step size is set when the kernel is bound to a "
                "target; call kernel.bind(compiled) first (bdl.sample does)."
            )
        return as_schedule(self.step_size)(step)

    def step(
        self,
        key: jax.Array,
        state: RecipeState,
        energy_and_grad: Any,
        step_size: jax.Array,
        temperature: jax.Array,
    ) -> tuple[RecipeState, Info]:
        recipe = self.recipe_at(state)
        energy, grad = energy_and_grad(state.z["theta"])
        ctx = Context(energy, grad)
        z = INTEGRATORS[self.integrator](recipe, state.z, ctx, step_size, temperature, key)
        info = Info(energy, recipe.kinetic(z), tree_norm(grad), step_size, temperature)
        return RecipeState(z), info

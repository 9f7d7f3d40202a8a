"""The delegating base of every kernel wrapper.

A wrapper holds an ``inner`` kernel and changes one concern of it — cyclical SG-MCMC its phases,
Entropy-MCMC its position and energy, Wenzel et al.'s scheme its schedules. :class:`Wrapper`
forwards every method of the kernel protocol (:mod:`bdl.kernels.base`) to ``inner``, so a
subclass overrides only what it changes, and a method added to the protocol reaches every wrapper
here, in one place (``tests/test_wrappers.py`` checks that none is missing).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax

from bdl.kernels.base import EnergyAndGrad, Info, Kernel
from bdl.kernels.recipe import Recipe

if TYPE_CHECKING:
    from bdl.kernels.recipe_kernel import RecipeKernel, RecipeState

PyTree = Any


class Wrapper(Kernel):
    """A kernel around ``inner`` that forwards the whole protocol to it.

    Args:
        inner: the kernel wrapped.
    """

    inner: Kernel

    @property
    def name(self) -> str:
        return self.inner.name

    # transition
    def init(self, position: PyTree, key: jax.Array) -> Any:
        return self.inner.init(position, key)

    def step(
        self,
        key: jax.Array,
        state: Any,
        energy_and_grad: EnergyAndGrad,
        step_size: jax.Array,
        temperature: jax.Array,
    ) -> tuple[Any, Info]:
        return self.inner.step(key, state, energy_and_grad, step_size, temperature)

    def bind(self, target: Any) -> Wrapper:
        return dataclasses.replace(self, inner=self.inner.bind(target))

    # phases
    def hyper(self, step: jax.Array, temperature: jax.Array) -> tuple[jax.Array, jax.Array]:
        return self.inner.hyper(step, temperature)

    def is_sample(self, step: jax.Array) -> jax.Array:
        return self.inner.is_sample(step)

    # collection
    def position(self, state: Any) -> PyTree:
        return self.inner.position(state)

    def collect(self, state: Any) -> dict[str, PyTree]:
        return self.inner.collect(state)

    # checker
    def recipe_at(self, state: Any) -> Recipe | None:
        return self.inner.recipe_at(state)

    def augment_energy(self, energy_fn: Callable[[PyTree], jax.Array]) -> Any:
        return self.inner.augment_energy(energy_fn)

    # adaptation
    def recipe_kernel(self) -> RecipeKernel | None:
        return self.inner.recipe_kernel()

    def with_recipe_kernel(self, kernel: RecipeKernel) -> Wrapper:
        return dataclasses.replace(self, inner=self.inner.with_recipe_kernel(kernel))

    def recipe_state(self, state: Any) -> RecipeState:
        return self.inner.recipe_state(state)

    def with_recipe_state(self, state: Any, inner: RecipeState) -> Any:
        return self.inner.with_recipe_state(state, inner)


def check_inner(inner: Any, wrapper: str) -> None:
    if not isinstance(inner, Kernel):
        raise ValueError(f"{wrapper}: inner must be a bdl kernel; got {type(inner).__name__}.")


def base_kernel(wrapper: str, base: str | Kernel, base_hyper: dict[str, Any]) -> Kernel:
    """The wrapped kernel: ``base`` itself, or the registered kernel ``base`` built with
    ``base_hyper``."""
    if isinstance(base, Kernel):
        if base_hyper:
            raise ValueError(
                f"{wrapper}: hyper-parameters {sorted(base_hyper)} are for a base kernel given "
                "by name; pass them to the kernel object instead."
            )
        return base
    if isinstance(base, str):
        from bdl.kernels import registry

        return registry.get(base, **base_hyper)
    raise ValueError(
        f"{wrapper}: base must be a kernel name or a bdl kernel; got {type(base).__name__}."
    )


def protocol_methods() -> set[str]:
    """Every method of the kernel protocol (its abstract methods and the name)."""
    return set(Kernel.__abstractmethods__) | {"name"}

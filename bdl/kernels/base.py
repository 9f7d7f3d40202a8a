"""The kernel protocol: pure ``init``/``step`` over NamedTuple states, split by concern.

A kernel is an immutable Equinox module (its meta-parameters, if any, are pytree leaves). Its
methods fall into four concerns, each an abstract class here, and :class:`Kernel` is all four:

* :class:`Transition` — ``init(position, key) -> state``, ``step(key, state, energy_and_grad, h,
  T) -> (state, info)`` where ``energy_and_grad(θ) -> (Ũ, ∇Ũ)`` is the minibatch estimate at
  full-data scale, and ``bind(target)`` resolving what depends on the target (its size n, its
  epoch length);
* :class:`Phases` — ``hyper(t, T)``: the step size and temperature of step t (schedules, cycles,
  ramps), and ``is_sample(t)``: whether the state after step t may be collected;
* :class:`Collection` — ``position(state)`` (θ) and ``collect(state)``: what a draw holds
  (``{"position": θ}``, plus e.g. the Entropy-MCMC guide or the momentum);
* :class:`Checkable` — what the stationarity checker reads: ``recipe_at(state)``, the recipe the
  next step discretises, and ``augment_energy(U)``, the energy over the recipe's θ group;
* :class:`Adaptable` — what warm-up adaptation reads and sets: ``recipe_kernel()``, the recipe
  kernel inside any wrappers, ``with_recipe_kernel(k)``, this kernel around another one, and
  ``recipe_state(state)`` / ``with_recipe_state(state, inner)``, that kernel's state inside this
  kernel's (a wrapper that keeps state of its own, such as a step counter, unwraps it here).

Wrappers (cyclical steps, Entropy-MCMC, Wenzel et al.'s schedules) derive from
:class:`bdl.kernels.wrapper.Wrapper`, which delegates every method of this protocol.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from bdl.kernels.recipe import Recipe

PyTree = Any
EnergyAndGrad = Callable[[PyTree], tuple[jax.Array, PyTree]]


class Info(NamedTuple):
    """Per-step diagnostics. ``energy`` is Ũ(θ) at the start of the step.

    Attributes:
        energy: Ũ(θ) at the start of the step.
        kinetic_energy: K = g(θ, r) after the step (0 for first-order kernels).
        grad_norm: ‖∇Ũ(θ)‖.
        step_size: h_t.
        temperature: T_t.
    """

    energy: jax.Array
    kinetic_energy: jax.Array
    grad_norm: jax.Array
    step_size: jax.Array
    temperature: jax.Array


class Transition(eqx.Module):
    """How the state moves."""

    @abc.abstractmethod
    def init(self, position: PyTree, key: jax.Array) -> Any:
        """The initial state at ``position``.

        Args:
            position: θ₀, a position pytree (no chain axis).
            key: the key of the auxiliary variables' first draw (a sampled momentum).

        Returns:
            The kernel's state at ``position``.
        """

    @abc.abstractmethod
    def step(
        self,
        key: jax.Array,
        state: Any,
        energy_and_grad: EnergyAndGrad,
        step_size: jax.Array,
        temperature: jax.Array,
    ) -> tuple[Any, Info]:
        """One transition at step size h and temperature T.

        Args:
            key: the step's random key.
            state: the current state.
            energy_and_grad: θ ↦ (Ũ(θ), ∇Ũ(θ)) on this step's minibatch, at full-data scale.
            step_size: h_t.
            temperature: T_t.

        Returns:
            ``(state, info)``: the next state and the step's :class:`Info`.
        """

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """The kernel's name, e.g. ``"cyclical(sghmc)"`` (a property or a field)."""

    @abc.abstractmethod
    def bind(self, target: Any) -> Transition:
        """This kernel with target-dependent hyper-parameters resolved for ``target``.

        Args:
            target: the compiled target (its size n, its epoch length).

        Returns:
            The kernel with those hyper-parameters resolved.
        """


class Phases(eqx.Module):
    """Which step size and temperature each step runs at, and which states are draws."""

    @abc.abstractmethod
    def hyper(self, step: jax.Array, temperature: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(h_t, T_t) for step t given the target's temperature T(t).

        Args:
            step: the global step t.
            temperature: the target's temperature T(t).

        Returns:
            ``(h_t, T_t)``.
        """

    @abc.abstractmethod
    def is_sample(self, step: jax.Array) -> jax.Array:
        """Whether the state after step t is a draw (cyclical kernels skip exploration).

        Args:
            step: the global step t.

        Returns:
            A boolean scalar.
        """


class Collection(eqx.Module):
    """What a draw holds."""

    @abc.abstractmethod
    def position(self, state: Any) -> PyTree:
        """θ of the state.

        Args:
            state: a state of this kernel.

        Returns:
            θ, a position pytree.
        """

    @abc.abstractmethod
    def collect(self, state: Any) -> dict[str, PyTree]:
        """``{"position": θ, …}``: everything a draw keeps.

        Args:
            state: a state of this kernel.

        Returns:
            What a draw keeps, by name (``"position"`` first).
        """


class Checkable(eqx.Module):
    """What the stationarity checker (:mod:`bdl.kernels.checker`) reads."""

    @abc.abstractmethod
    def recipe_at(self, state: Any) -> Recipe | None:
        """The recipe (g, D, Q) the next step discretises; ``None`` when no single recipe
        describes the step (the checker then reports the kernel as not checkable).

        Args:
            state: a state of this kernel.

        Returns:
            The recipe, or ``None``.
        """

    @abc.abstractmethod
    def augment_energy(self, energy_fn: Callable[[PyTree], jax.Array]) -> Any:
        """U over the recipe's θ group given U over the model's θ (Entropy-MCMC: the joint).

        Args:
            energy_fn: θ ↦ U(θ) over the model's position.

        Returns:
            The energy over the recipe's θ group.
        """


class Adaptable(eqx.Module):
    """What warm-up adaptation (:mod:`bdl.sampling.warmup`) reads and sets, without knowing how
    wrappers nest or what state they keep."""

    @abc.abstractmethod
    def recipe_kernel(self) -> Kernel | None:
        """The :class:`~bdl.kernels.recipe_kernel.RecipeKernel` this kernel steps (inside any
        wrappers); ``None`` for a kernel that is not built on one.

        Returns:
            The recipe kernel, or ``None``.
        """

    @abc.abstractmethod
    def with_recipe_kernel(self, kernel: Kernel) -> Kernel:
        """This kernel with its recipe kernel replaced by ``kernel`` (e.g. the adapted one).

        Args:
            kernel: the recipe kernel to put in its place.

        Returns:
            The kernel with it.
        """

    @abc.abstractmethod
    def recipe_state(self, state: Any) -> Any:
        """The recipe kernel's state inside ``state`` (a
        :class:`~bdl.kernels.recipe_kernel.RecipeState`: its groups z, θ the recipe's θ group,
        and gradient history).

        Args:
            state: a state of this kernel.

        Returns:
            The recipe kernel's :class:`~bdl.kernels.recipe_kernel.RecipeState`.
        """

    @abc.abstractmethod
    def with_recipe_state(self, state: Any, inner: Any) -> Any:
        """``state`` with the recipe kernel's state replaced by ``inner``.

        Args:
            state: a state of this kernel.
            inner: the recipe kernel's new state.

        Returns:
            ``state`` with it.
        """


class Kernel(Transition, Phases, Collection, Checkable, Adaptable):
    """A sampling kernel: every concern of the protocol (module docstring)."""


def tree_norm(tree: PyTree) -> jax.Array:
    return jnp.sqrt(sum(jnp.sum(jnp.square(x)) for x in jax.tree.leaves(tree)))

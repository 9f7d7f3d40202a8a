"""The kernel protocol: pure ``init``/``step`` over NamedTuple states, schedules per step.

A kernel is an immutable Equinox module (its meta-parameters, if any, are pytree leaves):

* ``init(position, key) -> state``
* ``step(key, state, energy_and_grad, step_size, temperature) -> (state, info)`` where
  ``energy_and_grad(θ) -> (Ũ, ∇Ũ)`` is the minibatch estimate at full-data scale;
* ``bind(target)`` resolves hyper-parameters that depend on the training-set size n;
* ``hyper(t, T)`` gives the step size and temperature of step t (schedules, cyclical phases);
* ``is_sample(t)`` says whether the state after step t may be collected;
* ``collect(state)`` names what is collected (``{"position": θ}``, plus e.g. the Entropy-MCMC
  guide).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

PyTree = Any
EnergyAndGrad = Callable[[PyTree], tuple[jax.Array, PyTree]]
Schedule = Callable[[jax.Array], jax.Array]


class Info(NamedTuple):
    """Per-step diagnostics. ``energy`` is Ũ(θ) at the start of the step."""

    energy: jax.Array
    kinetic_energy: jax.Array
    grad_norm: jax.Array
    step_size: jax.Array
    temperature: jax.Array


class Kernel(eqx.Module):
    """Abstract sampling kernel (see module docstring for the protocol)."""

    @abc.abstractmethod
    def init(self, position: PyTree, key: jax.Array) -> Any:
        """The initial state at ``position``."""

    @abc.abstractmethod
    def step(
        self,
        key: jax.Array,
        state: Any,
        energy_and_grad: EnergyAndGrad,
        step_size: jax.Array,
        temperature: jax.Array,
    ) -> tuple[Any, Info]:
        """One transition."""

    @property
    def name(self) -> str:
        return type(self).__name__.lower()

    def bind(self, target: Any) -> Kernel:
        """This kernel with n-dependent hyper-parameters resolved for ``target``."""
        return self

    @abc.abstractmethod
    def step_size_at(self, step: jax.Array) -> jax.Array:
        """h_t from the kernel's step-size schedule."""

    def hyper(self, step: jax.Array, temperature: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(h_t, T_t) for step t given the target's temperature T(t)."""
        return self.step_size_at(step), temperature

    def is_sample(self, step: jax.Array) -> jax.Array:
        """Whether the state after step t is a sample (cyclical kernels skip exploration)."""
        return jnp.asarray(True)

    def recipe_at(self, state: Any) -> Any:
        """The recipe (g, D, Q) the next step discretises, given the current state.

        Kernels that adapt a preconditioner from the gradient history return a state-dependent
        recipe; the checker detects when a step changes it. ``None``: no recipe is declared
        (the checker then reports the kernel as unverifiable).
        """
        return None

    def augment_energy(self, energy_fn: Any) -> Any:
        """U over the recipe's θ group given U over the model's θ (identity; Entropy-MCMC
        returns the joint energy of θ and its guide)."""
        return energy_fn

    def position(self, state: Any) -> PyTree:
        return state.z["theta"]

    def collect(self, state: Any) -> dict[str, PyTree]:
        return {"position": self.position(state)}


def as_schedule(value: float | Schedule, name: str = "step_size") -> Schedule:
    """A constant or an Optax-style schedule ``step -> value``; constants must be > 0."""
    if callable(value):
        return value
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be a positive float or a schedule step -> value; "
            f"got {type(value).__name__}."
        ) from None
    if not v > 0:
        raise ValueError(f"{name} must be > 0; got {value}.")
    return lambda step: jnp.asarray(v)


def tree_norm(tree: PyTree) -> jax.Array:
    return jnp.sqrt(sum(jnp.sum(jnp.square(x)) for x in jax.tree.leaves(tree)))

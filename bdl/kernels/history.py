"""History transforms: kernel state built from past stochastic gradients, in the style of an Optax
``GradientTransformation``.

A transform keeps statistics of the gradients the kernel computes anyway (no extra backprop) and
conditions the recipe on them — a preconditioner sets the recipe's mass, L2E's gradient averages
set its learned field's inputs. Per step, with the step's own gradient g = ∇Ũ(θ_t):

    state = transform.prepare(state, g)    # before the move
    recipe = transform.condition(recipe, state)
    ... move with recipe ...
    state = transform.update(state, g)     # after the move: what the next step sees

The history is not part of the recipe state z. A recipe conditioned on it is exact for each step
(the conditioning never depends on the current θ); when it changes from one step to the next the
chain is no longer a time-homogeneous Markov chain in z, which the checker reports as
"depends on gradient history".
"""

from __future__ import annotations

import abc
from typing import Any

import equinox as eqx

from bdl.kernels.recipe import Recipe

PyTree = Any


class History(eqx.Module):
    """A transform of the gradient history that conditions the recipe (module docstring)."""

    @abc.abstractmethod
    def init(self, position: PyTree) -> PyTree:
        """The state before any gradient was seen.

        Args:
            position: θ₀, a position pytree (no chain axis).

        Returns:
            The transform's state (``()`` when it keeps none).
        """

    def prepare(self, state: PyTree, grad: PyTree) -> PyTree:
        """Fold in the step's gradient before the move (identity unless overridden).

        Args:
            state: the transform's state.
            grad: ∇Ũ(θ) of the step.

        Returns:
            The state :meth:`condition` conditions this step's recipe on.
        """
        return state

    def update(self, state: PyTree, grad: PyTree) -> PyTree:
        """Fold in the step's gradient after the move (identity unless overridden).

        Args:
            state: what :meth:`prepare` returned.
            grad: the same ∇Ũ(θ), taken at the step's start.

        Returns:
            The state the next step starts from.
        """
        return state

    @abc.abstractmethod
    def condition(self, recipe: Recipe, state: PyTree) -> Recipe:
        """The recipe the step discretises given the history ``state``.

        Args:
            recipe: the kernel's recipe.
            state: the transform's state.

        Returns:
            The recipe conditioned on it (e.g. with the preconditioner's mass).
        """

    def bind(self, target: Any) -> History:
        """This transform with target-dependent settings (n, epoch length) resolved.

        Args:
            target: the compiled target (its size n, its epoch length).

        Returns:
            The transform with those settings resolved.
        """
        return self

    @property
    def adaptive(self) -> bool:
        """Whether the conditioning may change after every step."""
        return False


class NoHistory(History):
    """No statistics: the recipe is used as declared."""

    def init(self, position: PyTree) -> tuple[()]:
        return ()

    def condition(self, recipe: Recipe, state: PyTree) -> Recipe:
        return recipe

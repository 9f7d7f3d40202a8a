"""The interface every compiled target offers to kernels, samplers and validators."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax

from bdl.compile.positions import check_position
from bdl.utils.arguments import shown, suggestion

PyTree = Any
Batch = Any


class Target(eqx.Module):
    """A compiled, tempered target π_T(θ) ∝ exp(−U(θ)/T(t)).

    Array data are pytree leaves, so a function that receives the target through
    ``eqx.filter_jit`` traces them as arguments rather than baking them in as constants.

    Attributes:
        n: the number of training examples (the scale of the minibatch gradient).
        name: the target's name, used in reports and caches.
        initial_position: the declared start, a position pytree without a chain axis.
    """

    n: eqx.AbstractVar[int]
    name: eqx.AbstractVar[str]
    initial_position: eqx.AbstractVar[PyTree]

    #: the named starts :meth:`init_positions` accepts
    INITS: ClassVar[tuple[str, ...]] = ()
    #: what a position belongs to, in messages
    OWNER: ClassVar[str] = "target"

    @abc.abstractmethod
    def energy(self, position: PyTree) -> jax.Array:
        """Full-data U(θ) = −Σ_i log p(y_i | x_i, θ) − log p(θ).

        Args:
            position: a position pytree (no chain axis).

        Returns:
            The scalar energy U(θ).
        """

    def energy_and_grad(self, position: PyTree) -> tuple[jax.Array, PyTree]:
        """U(θ) and ∇U(θ).

        Args:
            position: a position pytree (no chain axis).

        Returns:
            ``(U(θ), ∇U(θ))``, the gradient with the position's structure.
        """
        return jax.value_and_grad(self.energy)(position)

    @abc.abstractmethod
    def stochastic_energy_and_grad(
        self, position: PyTree, batch: Batch
    ) -> tuple[jax.Array, PyTree]:
        """Unbiased minibatch estimates Ũ(θ) and ∇Ũ(θ) at full-data scale.

        The convention is in [Design, *Energy*](../design.md#energy).

        Args:
            position: a position pytree (no chain axis).
            batch: the minibatch of :meth:`next_batch`.

        Returns:
            ``(Ũ(θ), ∇Ũ(θ))``, the gradient with the position's structure.
        """

    @abc.abstractmethod
    def init_batches(self, key: jax.Array) -> Any:
        """A fresh per-chain minibatch stream.

        Args:
            key: the chain's random key.

        Returns:
            The stream's state, advanced by :meth:`next_batch`.
        """

    @abc.abstractmethod
    def next_batch(self, stream: Any, step: jax.Array) -> tuple[Batch, Any]:
        """The minibatch for global step ``step`` and the advanced stream.

        Args:
            stream: the state :meth:`init_batches` made (or the last call returned).
            step: the global step, counted from the run's start.

        Returns:
            ``(batch, stream)``: the minibatch :meth:`stochastic_energy_and_grad` takes and the
                stream's next state.
        """

    @abc.abstractmethod
    def temperature(self, step: jax.Array) -> jax.Array:
        """T(t) at step t.

        Args:
            step: the global step.

        Returns:
            The scalar temperature at that step.
        """

    @abc.abstractmethod
    def init_positions(self, key: jax.Array, num_chains: int, init: Any = "auto") -> PyTree:
        """Initial positions with a leading chain axis.

        Args:
            key: a random key, split over the chains.
            num_chains: the size of the chain axis.
            init: a named start (``"auto"`` and the others of the target's ``INITS``) or a
                position pytree (shared, or with a leading chain axis).

        Returns:
            The positions, each leaf with a leading axis of size ``num_chains``.
        """

    def check_init(self, init: Any, num_chains: int | None) -> None:
        """Raise before anything is traced when :meth:`init_positions` could not start
        ``num_chains`` chains (``None``: any number) from ``init``: an unknown name, or a
        position of another structure or shape, not numeric, or not finite.

        Args:
            init: a named start or a position pytree, as :meth:`init_positions` takes it.
            num_chains: the number of chains to start, or ``None`` for any.

        Raises:
            ValueError: ``init`` names no start, or its positions do not fit the target.
            TypeError: ``init`` is neither a name nor a pytree of numbers.
        """
        if isinstance(init, str):
            if init not in self.INITS:
                names = ", ".join(repr(i) for i in self.INITS)
                raise ValueError(
                    f"init must be one of {names} or a position pytree; got "
                    f"{shown(init)}.{suggestion(init, self.INITS)}"
                )
            return
        check_position(init, self.initial_position, num_chains, self.OWNER)

    @abc.abstractmethod
    def constant_temperature(self) -> float | None:
        """T if it is constant, else ``None``.

        Returns:
            The constant temperature as a float, or ``None`` for a schedule.
        """

    def potential_fn(self, temperature: float | None = None) -> Callable[[PyTree], jax.Array]:
        """NumPyro ``potential_fn``: θ ↦ U(θ)/T at a constant T > 0 (the model's by default).

        Args:
            temperature: the constant T > 0 to divide by (default the target's own).

        Returns:
            The function θ ↦ U(θ)/T, for ``numpyro.infer.NUTS(potential_fn=...)``.

        Raises:
            ValueError: T is not a constant > 0 (a schedule, or T = 0, and no ``temperature``).
        """
        t = self.constant_temperature() if temperature is None else float(temperature)
        if t is None:
            raise ValueError(
                f"{self.name} has a temperature schedule: pass potential_fn(temperature=T) with "
                "the constant T > 0 at which to run NUTS."
            )
        if not t > 0:
            raise ValueError(
                f"potential_fn needs a temperature T > 0 (NUTS samples exp(−U/T)); got {t}."
            )
        return lambda position: self.energy(position) / t

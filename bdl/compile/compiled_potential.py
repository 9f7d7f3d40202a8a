"""The compiled form of a :class:`bdl.Potential`: exact or noise-injected gradients, no data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from bdl.compile.positions import broadcast_position
from bdl.compile.target import Target
from bdl.dsl.potential import Potential
from bdl.utils import dtypes
from bdl.utils.trees import tree_normal_like

PyTree = Any


class CompiledPotential(Target):
    """U(θ) = −log π(θ); the "minibatch" of step t is a key for the injected gradient noise.

    ∇Ũ(θ) = ∇U(θ) + s·ε with ε ~ N(0, I) (Gong et al. 2019, Sec. 5.1 use s = 1), which is
    unbiased; with s = 0 it is the exact gradient. Made by :func:`bdl.compile` from a
    :class:`bdl.Potential`.

    Attributes:
        n: 1 (a potential has no data).
        name: the potential's name.
        initial_position: the declared start (no chain axis).
        potential: the declaration compiled.
    """

    initial_position: PyTree
    n: int = eqx.field(static=True)
    name: str = eqx.field(static=True)
    potential: Potential = eqx.field(static=True)
    temperature_schedule: Callable[[jax.Array], jax.Array] = eqx.field(static=True)

    INITS: ClassVar[tuple[str, ...]] = ("auto", "fixed")
    OWNER: ClassVar[str] = "potential"

    @property
    def dim(self) -> int:
        return sum(int(jnp.size(x)) for x in jax.tree.leaves(self.initial_position))

    def energy(self, position: PyTree) -> jax.Array:
        return -self.potential.log_density(position)

    def stochastic_energy_and_grad(
        self, position: PyTree, batch: jax.Array
    ) -> tuple[jax.Array, PyTree]:
        energy, grad = jax.value_and_grad(self.energy)(position)
        s = self.potential.grad_noise
        if s == 0:
            return energy, grad
        noise = tree_normal_like(batch, grad)
        return energy, jax.tree.map(lambda g, e: g + s * e, grad, noise)

    def init_batches(self, key: jax.Array) -> jax.Array:
        return key

    def next_batch(self, stream: jax.Array, step: jax.Array) -> tuple[jax.Array, jax.Array]:
        return jax.random.fold_in(stream, step), stream

    def temperature(self, step: jax.Array) -> jax.Array:
        return jnp.asarray(self.temperature_schedule(step))

    def constant_temperature(self) -> float | None:
        t = self.potential.temperature
        return None if callable(t) else float(t)

    def init_positions(self, key: jax.Array, num_chains: int, init: Any = "auto") -> PyTree:
        """``"auto"``: the declared ``init(key)`` per chain, or the fixed start for every chain.

        Args:
            key: a random key, split over the chains.
            num_chains: the size of the chain axis.
            init: ``"auto"`` or a position pytree (shared, or with a leading chain axis).

        Returns:
            The positions, each leaf with a leading axis of size ``num_chains``.
        """
        keys = jax.random.split(key, num_chains)
        if isinstance(init, str):
            self.check_init(init, num_chains)
            if init == "auto" and callable(self.potential.init):
                return dtypes.like(jax.vmap(self.potential.init)(keys), self.initial_position)
            return jax.tree.map(
                lambda a: jnp.broadcast_to(a, (num_chains, *a.shape)), self.initial_position
            )
        return broadcast_position(init, self.initial_position, num_chains, self.OWNER)

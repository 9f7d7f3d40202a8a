"""Point estimates on a compiled target: :func:`minimise` runs an Optax optimiser on the mean
minibatch loss Ũ(θ)/n (MAP at T = 1).

The optimiser sees exactly what the samplers see: the target's on-device minibatches and its
unbiased minibatch gradient, divided by n so that learning rates mean what they mean in deep
learning. :meth:`CompiledModel.init_positions` starts chains from it (``init="map"``), and
:mod:`bdl.optimise` exports it with :func:`bdl.optimise.minimise_many`, its deep ensemble.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from bdl.compile.positions import check_position
from bdl.compile.target import Target
from bdl.utils import arguments
from bdl.utils.convolutions import canonical_convolutions, convolves_on_cpu

PyTree = Any


def minimise(
    compiled: Target,
    optimizer: optax.GradientTransformation,
    position: PyTree,
    key: jax.Array,
    num_steps: int,
) -> PyTree:
    """``num_steps`` optimiser steps from ``position``, in one ``lax.scan``; ``key`` draws the
    minibatch order. Pure: jit it, or ``vmap`` it over positions and keys for an ensemble.

    The arguments are checked first (structure and shapes only, so that it still traces under
    ``jit`` and ``vmap``): ``TypeError``/``ValueError`` naming the argument.

    Args:
        compiled: the compiled model (or potential) whose mean minibatch loss Ũ/n is minimised.
        optimizer: an Optax optimiser.
        position: the start, a position pytree (no chain axis).
        key: the key of the minibatch order.
        num_steps: the optimiser's steps.

    Returns:
        The position after ``num_steps`` steps.

    Raises:
        TypeError: an argument of the wrong kind.
        ValueError: a position of another structure or shape, or ``num_steps`` < 0.
    """
    check_arguments(compiled, optimizer, position, key, num_steps)
    n = compiled.n

    def step(carry: Any, t: jax.Array) -> tuple[Any, None]:
        params, opt_state, stream = carry
        batch, stream = compiled.next_batch(stream, t)
        _, grad = compiled.stochastic_energy_and_grad(params, batch)
        updates, opt_state = optimizer.update(jax.tree.map(lambda g: g / n, grad), opt_state)
        return (optax.apply_updates(params, updates), opt_state, stream), None

    init = (position, optimizer.init(position), compiled.init_batches(key))
    step = canonical_convolutions(step) if convolves_on_cpu(compiled) else step
    (params, _, _), _ = jax.lax.scan(step, init, jnp.arange(num_steps))
    return params


def check_arguments(
    compiled: Any, optimizer: Any, position: PyTree, key: Any, num_steps: Any
) -> None:
    """``TypeError``/``ValueError`` naming the argument of :func:`minimise` that is wrong."""
    if not isinstance(compiled, Target):
        raise TypeError(
            "minimise() needs a compiled target from bdl.compile(...); got "
            f"{arguments.shown(compiled)}."
        )
    if not isinstance(optimizer, optax.GradientTransformation):
        raise TypeError(
            "minimise(optimizer=...) must be an Optax optimiser, e.g. optax.adam(1e-3); got "
            f"{arguments.shown(optimizer)}."
        )
    typed = isinstance(key, jax.Array) and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    raw = isinstance(key, jax.Array) and key.dtype == jnp.uint32 and key.shape == (2,)
    if not ((typed and key.shape == ()) or raw):
        raise TypeError(
            f"minimise(key=...) must be one JAX key, e.g. jax.random.key(0); got "
            f"{arguments.shown(key)}."
        )
    arguments.integer(num_steps, "minimise(num_steps=...)", 0)
    check_position(
        position,
        compiled.initial_position,
        None,
        compiled.OWNER,
        name="minimise(position=...)",
        chain_axis=False,
    )

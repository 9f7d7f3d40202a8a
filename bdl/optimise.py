"""Point estimates: an Optax optimiser on the mean minibatch loss Ũ(θ)/n (MAP at T = 1).

The optimiser sees exactly what the samplers see: the compiled model's on-device minibatches and
its unbiased minibatch gradient, divided by n so that learning rates mean what they mean in deep
learning. Used for the SGD baseline of ``bdl demo`` and the deep-ensemble members of the
held-out evaluation (``benchmarks/heldout_eval.py``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from bdl.compile.compiled_model import CompiledModel
from bdl.compile.positions import check_position
from bdl.compile.target import Target
from bdl.sampling.chain import run_chain
from bdl.utils import arguments
from bdl.utils.convolutions import canonical_convolutions, convolves_on_cpu

PyTree = Any


def minimise(
    compiled: CompiledModel,
    optimizer: optax.GradientTransformation,
    position: PyTree,
    key: jax.Array,
    num_steps: int,
) -> PyTree:
    """``num_steps`` optimiser steps from ``position`` (:func:`bdl.sampling.chain.run_chain`);
    ``key`` draws the minibatch order. Pure: jit it, or ``vmap`` it over positions and keys for
    an ensemble.

    The arguments are checked first (structure and shapes only, so that it still traces under
    ``jit`` and ``vmap``): ``TypeError``/``ValueError`` naming the argument.
    """
    _check(compiled, optimizer, position, key, num_steps)
    n = compiled.n

    def step(carry: Any, t: jax.Array) -> tuple[Any, None]:
        params, opt_state, stream = carry
        batch, stream = compiled.next_batch(stream, t)
        _, grad = compiled.stochastic_energy_and_grad(params, batch)
        updates, opt_state = optimizer.update(jax.tree.map(lambda g: g / n, grad), opt_state)
        return (optax.apply_updates(params, updates), opt_state, stream), None

    init = (position, optimizer.init(position), compiled.init_batches(key))
    step = canonical_convolutions(step) if convolves_on_cpu(compiled) else step
    (params, _, _), _ = run_chain(step, init, 0, num_steps)
    return params


def minimise_many(
    compiled: CompiledModel,
    optimizer: optax.GradientTransformation,
    positions: PyTree,
    keys: jax.Array,
    num_steps: int,
) -> PyTree:
    """:func:`minimise` from each of ``positions`` (leading axis: members) with its own key:
    a deep ensemble. Members run under ``vmap``, except for a convolutional model on the CPU,
    where they run in turn (``lax.map``): XLA:CPU runs the grouped convolutions of the ``vmap``
    form several times slower (:mod:`bdl.utils.convolutions`)."""

    def one(position: PyTree, key: jax.Array) -> PyTree:
        return minimise(compiled, optimizer, position, key, num_steps)

    first = jax.tree.map(lambda a: a[0], (positions, keys))
    _check(compiled, optimizer, *first, num_steps)
    if convolves_on_cpu(compiled):
        return jax.lax.map(lambda pk: one(*pk), (positions, keys))
    return jax.vmap(one)(positions, keys)


def _check(compiled: Any, optimizer: Any, position: PyTree, key: Any, num_steps: Any) -> None:
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

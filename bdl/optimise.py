"""Point estimates: an Optax optimiser on the mean minibatch loss Ũ(θ)/n (MAP at T = 1).

The optimiser sees exactly what the samplers see: the compiled model's on-device minibatches and
its unbiased minibatch gradient, divided by n so that learning rates mean what they mean in deep
learning. :func:`minimise` is defined with the compiled model (:mod:`bdl.compile.minimise`),
whose ``init="map"`` starts from it; :func:`minimise_many` trains a deep ensemble. Used for the
SGD baseline of ``bdl demo`` and the deep-ensemble members of the held-out evaluation
(``benchmarks/heldout_eval.py``).
"""

from __future__ import annotations

from typing import Any

import jax
import optax

from bdl.compile.minimise import check_arguments, minimise
from bdl.compile.target import Target
from bdl.utils.convolutions import convolves_on_cpu

__all__ = ["minimise", "minimise_many"]

PyTree = Any


def minimise_many(
    compiled: Target,
    optimizer: optax.GradientTransformation,
    positions: PyTree,
    keys: jax.Array,
    num_steps: int,
) -> PyTree:
    """:func:`minimise` from each of ``positions`` (leading axis: members) with its own key:
    a deep ensemble. Members run under ``vmap``, except for a convolutional model on the CPU,
    where they run in turn (``lax.map``): XLA:CPU runs the grouped convolutions of the ``vmap``
    form several times slower (:mod:`bdl.utils.convolutions`).

    Args:
        compiled: the compiled model (or potential) whose mean minibatch loss Ũ/n is minimised.
        optimizer: an Optax optimiser.
        positions: the members' starts, with a leading member axis.
        keys: one key per member.
        num_steps: the optimiser's steps per member.

    Returns:
        The members' positions after ``num_steps`` steps, with the leading member axis.
    """

    def one(position: PyTree, key: jax.Array) -> PyTree:
        return minimise(compiled, optimizer, position, key, num_steps)

    first = jax.tree.map(lambda a: a[0], (positions, keys))
    check_arguments(compiled, optimizer, *first, num_steps)
    if convolves_on_cpu(compiled):
        return jax.lax.map(lambda pk: one(*pk), (positions, keys))
    return jax.vmap(one)(positions, keys)

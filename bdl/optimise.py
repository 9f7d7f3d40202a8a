"""Point estimates: an Optax optimiser on the mean minibatch loss Ũ(θ)/n (MAP at T = 1).

The optimiser sees exactly what the samplers see: the compiled model's on-device minibatches and
its unbiased minibatch gradient, divided by n so that learning rates mean what they mean in deep
learning. Used for the SGD baseline of ``bdl demo`` and the deep-ensemble members of the
held-out evaluation (``benchmarks/heldout_eval.py``).
"""

from __future__ import annotations

from typing import Any

import jax
import optax

from bdl.compile.compiled_model import CompiledModel
from bdl.sampling.chain import run_chain

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
    an ensemble."""
    n = compiled.n

    def step(carry: Any, t: jax.Array) -> tuple[Any, None]:
        params, opt_state, stream = carry
        batch, stream = compiled.next_batch(stream, t)
        _, grad = compiled.stochastic_energy_and_grad(params, batch)
        updates, opt_state = optimizer.update(jax.tree.map(lambda g: g / n, grad), opt_state)
        return (optax.apply_updates(params, updates), opt_state, stream), None

    init = (position, optimizer.init(position), compiled.init_batches(key))
    (params, _, _), _ = run_chain(step, init, 0, num_steps)
    return params

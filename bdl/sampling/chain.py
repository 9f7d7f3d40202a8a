"""The one chain-running loop, shared by ``bdl.sample``, the meta-trainers and ``optimise``.

A chain is a pure transition ``(carry, t) -> (carry, out)`` at global step t. :func:`run_chain`
runs ``num_draws × thin`` steps from step ``start`` and records ``observe(carry, out, t)`` after
every ``thin``-th step (``out`` of that step), in the style of BlackJAX's
``run_inference_algorithm``:

* with static lengths (Python ints), the loop is a nested ``lax.scan`` and the records are stacked;
  it is reverse-differentiable (the NNSGHMC meta-trainer back-propagates through it);
* with ``buffer_size``, the lengths may be traced arrays (every chunk of a long run shares one
  compilation) and the records go into a buffer of that many rows; rows past ``num_draws`` are
  left as zeros.

With ``skip``, the ``thin − 1`` steps of a draw that are not recorded run ``skip(carry, t) ->
carry`` instead: a transition that computes no diagnostics, so that only the recorded step pays
for them (the loop then carries no per-step output). ``settle(before, after)`` then sees each
draw's carry before and after its steps (e.g. to undo a draw that went wrong).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import jax
import jax.numpy as jnp

Carry = TypeVar("Carry")
Transition = Callable[[Any, jax.Array], tuple[Any, Any]]
Observe = Callable[[Any, Any, jax.Array], Any]


def run_chain(
    transition: Transition,
    carry: Carry,
    start: Any,
    num_draws: Any,
    thin: Any = 1,
    observe: Observe | None = None,
    buffer_size: int | None = None,
    skip: Callable[[Any, jax.Array], Any] | None = None,
    settle: Callable[[Any, Any], Any] | None = None,
) -> tuple[Carry, Any]:
    """Run ``num_draws × thin`` steps from step ``start``; returns the final carry and the
    records (``None`` without ``observe``)."""
    start = jnp.asarray(start, jnp.int32)
    # each trace of a transition traces the model's gradient: the loop below traces it once
    # more (with ``skip``, the bare step once too), and nothing else traces a whole draw
    out_shape = jax.eval_shape(lambda c: transition(c, start)[1], carry)
    empty_out = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), out_shape)

    def draw(carry: Any, d: jax.Array) -> tuple[Any, Any]:
        first = start + d * thin
        last = first + thin - 1
        if skip is None:

            def body(i: jax.Array, c: Any) -> Any:
                return transition(c[0], first + i)

            after, out = jax.lax.fori_loop(0, thin, body, (carry, empty_out))
        else:
            after = jax.lax.fori_loop(0, thin - 1, lambda i, c: skip(c, first + i), carry)
            after, out = transition(after, last)
        if settle is not None:
            after = settle(carry, after)
        return after, None if observe is None else observe(after, out, last)

    if buffer_size is None:
        return jax.lax.scan(draw, carry, jnp.arange(num_draws))
    if observe is None:
        carry = jax.lax.fori_loop(0, num_draws, lambda d, c: draw(c, d)[0], carry)
        return carry, None
    # a draw's carry keeps its shape (the loop requires it), so its record is observe's output
    # on the carry and the transition's output
    record_shape = jax.eval_shape(lambda c, o: observe(c, o, start), carry, out_shape)
    buffers = jax.tree.map(lambda s: jnp.zeros((buffer_size, *s.shape), s.dtype), record_shape)

    def fill(d: jax.Array, loop: Any) -> Any:
        carry, buffers = loop
        carry, record = draw(carry, d)
        return carry, jax.tree.map(lambda b, v: b.at[d].set(v), buffers, record)

    return jax.lax.fori_loop(0, num_draws, fill, (carry, buffers))

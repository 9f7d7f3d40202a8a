"""The one chain-running loop, shared by ``bdl.sample``, the meta-trainers and ``optimise``.

A chain is a pure transition ``(carry, t) -> (carry, out)`` at global step t. :func:`run_chain`
runs ``num_draws × thin`` steps from step ``start`` and records ``observe(carry, out, t)`` after
every ``thin``-th step (``out`` of that step), in the style of BlackJAX's
``run_inference_algorithm``:

* with static lengths (Python ints), the loop is a nested ``lax.scan`` and the records are stacked;
  it is reverse-differentiable (the NNSGHMC meta-trainer back-propagates through it);
* with ``buffer_size``, the lengths may be traced arrays (every chunk of a long run shares one
  compilation) and the records go into buffers of that many rows (given ones, e.g. donated by
  the caller, or zeros); rows past ``num_draws`` keep what they held.

With ``skip``, the ``thin − 1`` steps of a draw that are not recorded run ``skip(carry, t) ->
carry`` instead: a transition that computes no diagnostics, so that only the recorded step pays
for them (the loop then carries no per-step output). ``settle(before, after)`` then sees each
draw's carry before and after its steps (e.g. to undo a draw that went wrong).

With ``block`` > 1, every loop whose length is traced runs its steps ``block`` at a time, in an
inner loop of static length (:func:`fori_in_blocks`). On a GPU, XLA runs a ``while`` loop of
unknown trip count by copying its predicate to the host after every iteration, so the host
waits for the device to finish each step before it can launch the next; a loop of static
length needs no such round trip. On the CPU the loop runs in place and ``block`` is 1.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
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
    block: int = 1,
    buffers: Any = None,
    write: Callable[[Any, jax.Array, Any], Any] | None = None,
) -> tuple[Carry, Any]:
    """Run ``num_draws × thin`` steps from step ``start``; returns the final carry and the
    records (``None`` without ``observe``). With a ``buffer_size``, ``buffers`` are the buffers
    to write into (default: zeros of ``buffer_size`` rows; rows past ``num_draws`` keep what
    they held) and ``write(buffers, d, record)`` puts draw d's record in them (default: as row
    d of each buffer)."""
    loop = partial(fori_in_blocks, block=block)
    start = jnp.asarray(start, jnp.int32)
    # the transition is traced here for its output's shape, once more in the loop below (with
    # ``skip``, the bare step once too; with ``block`` > 1, twice each: block and remainder);
    # nothing else traces a whole draw. A model's gradient is a nested jit, traced once.
    out_shape = jax.eval_shape(lambda c: transition(c, start)[1], carry)
    empty_out = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), out_shape)

    def draw(carry: Any, d: jax.Array) -> tuple[Any, Any]:
        first = start + d * thin
        last = first + thin - 1
        if skip is None:

            def body(i: jax.Array, c: Any) -> Any:
                return transition(c[0], first + i)

            after, out = loop(0, thin, body, (carry, empty_out))
        else:
            after = loop(0, thin - 1, lambda i, c: skip(c, first + i), carry)
            after, out = transition(after, last)
        if settle is not None:
            after = settle(carry, after)
        return after, None if observe is None else observe(after, out, last)

    if buffer_size is None:
        return jax.lax.scan(draw, carry, jnp.arange(num_draws))
    # with a static ``thin``, short draws are grouped too: about ``block`` steps per group
    draws_loop = partial(
        fori_in_blocks, block=max(1, block // thin) if isinstance(thin, int) else 1
    )
    if observe is None:
        carry = draws_loop(0, num_draws, lambda d, c: draw(c, d)[0], carry)
        return carry, None
    # a draw's carry keeps its shape (the loop requires it), so its record is observe's output
    # on the carry and the transition's output
    if buffers is None:
        record_shape = jax.eval_shape(lambda c, o: observe(c, o, start), carry, out_shape)
        buffers = jax.tree.map(lambda s: jnp.zeros((buffer_size, *s.shape), s.dtype), record_shape)
    if write is None:
        write = _write_row

    def fill(d: jax.Array, loop: Any) -> Any:
        carry, buffers = loop
        carry, record = draw(carry, d)
        return carry, write(buffers, d, record)

    return draws_loop(0, num_draws, fill, (carry, buffers))


def _write_row(buffers: Any, d: jax.Array, record: Any) -> Any:
    return jax.tree.map(lambda b, v: b.at[d].set(v), buffers, record)


def fori_in_blocks(
    lower: Any, upper: Any, body: Callable[[Any, Any], Any], carry: Carry, block: int = 1
) -> Carry:
    """``lax.fori_loop(lower, upper, body, carry)`` with its iterations run ``block`` at a time
    in an inner loop of static length, then the remainder one at a time. The outer loop's trip
    count is traced, the inner one's is not (module docstring: why that matters on a GPU). The
    body is traced twice (block and remainder); with ``block`` ≤ 1 or static bounds this is
    ``lax.fori_loop`` itself."""
    if block <= 1 or (isinstance(lower, int) and isinstance(upper, int)):
        return jax.lax.fori_loop(lower, upper, body, carry)
    lower = jnp.asarray(lower, jnp.int32)
    full = (upper - lower) // block

    def one_block(j: jax.Array, c: Any) -> Any:
        base = lower + j * block
        return jax.lax.fori_loop(0, block, lambda i, c: body(base + i, c), c)

    carry = jax.lax.fori_loop(0, full, one_block, carry)
    return jax.lax.fori_loop(lower + full * block, upper, body, carry)

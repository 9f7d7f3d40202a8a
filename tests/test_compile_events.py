"""bdl.utils.compile_events: a count that moves exactly when something is traced or compiled."""

import jax
import jax.numpy as jnp

from bdl.utils import compile_events


def test_count_moves_on_a_cache_miss_only():
    f = jax.jit(lambda x: jnp.sin(x) * 3.0)
    a, b, c = (jax.block_until_ready(jnp.full(n, 0.5)) for n in (3, 3, 4))  # made beforehand:
    # creating an array may compile too
    before = compile_events.count()
    f(a).block_until_ready()  # traced, lowered and compiled
    after_first = compile_events.count()
    f(b).block_until_ready()  # same shapes: cached
    assert after_first > before
    assert compile_events.count() == after_first
    f(c).block_until_ready()  # a new shape: traced again
    assert compile_events.count() > after_first

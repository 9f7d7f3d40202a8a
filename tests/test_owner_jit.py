"""Compiled programs are let go once the objects they were compiled for are gone, so a process
that samples many targets in turn holds a bounded number of programs."""

import gc

import equinox as eqx
import jax.numpy as jnp

from bdl.utils.owner_jit import MAX_RELEASED, OwnerJit


class Scaled(eqx.Module):
    fn: object  # static: a closure, part of every program's cache key
    scale: jnp.ndarray


def _apply(owner: Scaled, x: jnp.ndarray) -> jnp.ndarray:
    return owner.fn(x) * owner.scale


def _owner(i: int) -> Scaled:
    return Scaled(lambda x, i=i: x + i, jnp.asarray(2.0))


def test_programs_of_released_owners_are_dropped():
    jitted = OwnerJit(_apply)
    for i in range(MAX_RELEASED):
        owner = _owner(i)
        assert float(jitted(owner, jnp.ones(()))) == 2.0 * (1 + i)
        del owner
    gc.collect()
    assert jitted.cache_size() == MAX_RELEASED  # nothing cleared yet
    kept = _owner(99)
    jitted(kept, jnp.ones(()))  # MAX_RELEASED owners are gone: this call clears the cache first
    assert jitted.cache_size() == 1


def test_a_live_owner_recompiles_after_a_clear_and_gives_the_same_value():
    """The clear waits for a new owner's call: a live owner's call finds its program (one
    compiled ahead of it, :meth:`OwnerJit.lower`, stays for it); after the clear, the live owner
    recompiles once and gets the same value."""
    jitted = OwnerJit(_apply, max_released=1)
    jitted.clear_cache()  # jax.jit's cache of _apply is shared with the test above
    kept = _owner(3)
    before = float(jitted(kept, jnp.ones(())))
    gone = _owner(4)
    jitted(gone, jnp.ones(()))
    del gone
    gc.collect()
    assert float(jitted(kept, jnp.ones(()))) == before
    assert jitted.cache_size() == 2  # not cleared by a live owner's call
    jitted(_owner(5), jnp.ones(()))  # a new owner: the cache is cleared first
    assert jitted.cache_size() == 1
    assert float(jitted(kept, jnp.ones(()))) == before
    assert jitted.cache_size() == 2

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
    jitted = OwnerJit(_apply, max_released=1)
    kept = _owner(3)
    before = float(jitted(kept, jnp.ones(())))
    gone = _owner(4)
    jitted(gone, jnp.ones(()))
    del gone
    gc.collect()
    assert float(jitted(kept, jnp.ones(()))) == before
    assert jitted.cache_size() == 1

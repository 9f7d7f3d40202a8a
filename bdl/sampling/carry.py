"""What the sampling loop carries per chain, and the divergence status in it."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


class Status(NamedTuple):
    """Per chain: whether it diverged, and at which step (−1: never)."""

    diverged: jax.Array
    step: jax.Array


class Chains(NamedTuple):
    """Everything the loop carries per chain (leading chain axis): kernel states, minibatch
    streams, divergence status and, while a kernel is adapted, its warm-up
    (:class:`bdl.sampling.warmup.AdaptationState`; ``()`` for a kernel with a step size)."""

    states: Any
    streams: Any
    status: Status
    warmup: Any = ()


def healthy_status(num_chains: int) -> Status:
    return Status(jnp.zeros((num_chains,), bool), jnp.full((num_chains,), -1, jnp.int32))


def mark(status: Status, failed: jax.Array, t: jax.Array) -> Status:
    """``status`` with a chain that ``failed`` at step ``t`` marked diverged (the first time)."""
    first = failed & ~status.diverged
    return Status(status.diverged | failed, jnp.where(first, t, status.step))


def all_finite(tree: Any) -> jax.Array:
    """Whether every floating leaf of ``tree`` is finite (one fused reduction per leaf)."""
    leaves = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(jnp.result_type(x), jnp.floating)]
    return jnp.all(jnp.stack([jnp.isfinite(jnp.sum(x)) for x in leaves])) if leaves else True

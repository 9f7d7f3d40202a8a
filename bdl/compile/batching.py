"""On-device minibatches: an epoch-wise random permutation, drawn without replacement.

Each chain owns a key; epoch e uses the permutation ``permutation(fold_in(key, e), n)`` and step t
reads slice ``t mod (n // B)`` of it. The step counter is shared by all chains, so the "new epoch"
branch is a real ``lax.cond`` even under ``vmap`` (the permutation is drawn once per epoch, not
every step). Each minibatch is a uniformly random subset, so ∇Ũ is unbiased; the n mod B examples
left out of an epoch change from epoch to epoch.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class BatchState(NamedTuple):
    """Per-chain minibatch stream: its key and the current epoch's permutation."""

    key: jax.Array
    perm: jax.Array


def epoch_permutation(key: jax.Array, epoch: jax.Array, n: int) -> jax.Array:
    """A uniformly random permutation of range(n) for ``epoch``: argsort of 32 random bits.

    One sort (ties, probability ≲ n²/2³³, break by index) compiles and runs faster than
    ``jax.random.permutation``'s repeated shuffles.
    """
    return jnp.argsort(jax.random.bits(jax.random.fold_in(key, epoch), (n,))).astype(jnp.int32)


def init_batch_state(key: jax.Array, n: int) -> BatchState:
    return BatchState(key, epoch_permutation(key, jnp.int32(0), n))


def next_indices(
    state: BatchState, step: jax.Array, n: int, batch_size: int
) -> tuple[jax.Array, BatchState]:
    """Indices of the minibatch for global step ``step`` (0-based) and the updated stream."""
    per_epoch = n // batch_size
    epoch, pos = step // per_epoch, step % per_epoch
    perm = jax.lax.cond(
        (pos == 0) & (step > 0),
        lambda: epoch_permutation(state.key, epoch, n),
        lambda: state.perm,
    )
    idx = jax.lax.dynamic_slice_in_dim(perm, pos * batch_size, batch_size)
    return idx, BatchState(state.key, perm)

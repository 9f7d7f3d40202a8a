"""On-device minibatches: an epoch-wise random permutation, drawn without replacement.

Each chain owns a key; epoch e uses the permutation ``permutation(fold_in(key, e), n)`` and step t
reads slice ``t mod (n // B)`` of it. The step counter is shared by all chains, so the "new epoch"
branch is a real ``lax.cond`` even under ``vmap`` (the permutation is drawn once per epoch, not
every step). Each minibatch is a uniformly random subset, so ∇Ũ is unbiased; the n mod B examples
left out of an epoch change from epoch to epoch.

Every epoch's permutation, the first included, is drawn by the step that starts the epoch: a new
stream holds a placeholder, so setting a stream up compiles and runs no draw and no sort (the
step's own branch draws it), and a full-batch stream, which never reads it, never pays for one.
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
    """A stream at the start of epoch 0: its permutation is drawn by step 0."""
    return BatchState(key, jnp.zeros((n,), jnp.int32))


def next_indices(
    state: BatchState, step: jax.Array, n: int, batch_size: int
) -> tuple[jax.Array, BatchState]:
    """Indices of the minibatch for global step ``step`` (0-based) and the updated stream."""
    per_epoch = n // batch_size
    epoch, pos = step // per_epoch, step % per_epoch
    perm = jax.lax.cond(
        pos == 0,
        lambda: epoch_permutation(state.key, epoch, n),
        lambda: state.perm,
    )
    idx = jax.lax.dynamic_slice_in_dim(perm, pos * batch_size, batch_size)
    return idx, BatchState(state.key, perm)

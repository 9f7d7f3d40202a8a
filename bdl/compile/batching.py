"""On-device minibatches drawn without replacement, one epoch at a time, with no state but a key.

Each chain owns a key. Epoch e orders the n examples by a keyed bijection π_e of {0, …, n−1},
and global step t reads positions (t mod E)·B, …, (t mod E)·B + B − 1 of that order
(E = n // B steps per epoch, e = t // E). Only the B indices a step needs are computed: no
permutation of the data set is stored, sorted or carried, and no step waits for an epoch's
draw.

π_e is a swap-or-not shuffle (Hoang, Morris & Rogaway 2012) followed by a random rotation:

    x ← K_r − x (mod n)  if  bit(F_r(max(x, K_r − x))) = 1,   r = 1, …, R
    π_e(i) = x + c (mod n)

with K_r and c uniform on {0, …, n−1} and F_r a keyed integer hash, all from one draw of 2R + 2
random 32-bit words under ``fold_in(key, e)`` (K_r = w_r mod n, F_r keyed by w_{R+r}, c from
the last two words as a 64-bit number mod n: uniform up to n/2⁶⁴). One call of the generator
per step, not one per quantity: on a GPU, where a step of a small network is a few dozen kernel
launches, each call is a launch of its own.
Each round swaps the pairs {x, K_r − x} or leaves them, the same choice for both members, so
π_e is a bijection: an epoch visits every example at most once (E·B of them; the n mod B left
out change from epoch to epoch). The rotation c makes every position's example uniform on the
data set, so each example is in a step's minibatch with probability B/n and ∇Ũ is unbiased
whatever the rounds' quality. The rounds only decorrelate examples: two examples stay
paired through a round with probability ½, so the excess co-occurrence of neighbours is about
(n/B)·2⁻ᴿ; with R = ⌈log₂ n⌉ + 10 it is below 2⁻¹⁰ for every B (measured on n = 1,797, B = 32:
pair co-occurrence within 1 % of sampling without replacement at distances 1 to 898, over
4,000 epochs).
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp


class BatchState(NamedTuple):
    """A chain's minibatch stream: its key (epochs and augmentations derive from it)."""

    key: jax.Array


def shuffle_rounds(n: int) -> int:
    """R = ⌈log₂ n⌉ + 10 swap-or-not rounds for a data set of n examples (module docstring)."""
    return max(1, math.ceil(math.log2(max(n, 2)))) + 10


def _mix(x: jax.Array) -> jax.Array:
    """A bijective 32-bit integer hash (MurmurHash3's finaliser)."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * jnp.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


def _below(high: jax.Array, low: jax.Array, n: int) -> jax.Array:
    """(high·2³² + low) mod n for a static n ≤ 2³¹: uniform on {0, …, n − 1} up to n/2⁶⁴ when
    the words are. Long division in base 2^k, k = 32 − bits(n − 1) (r·2^k + digit < 2³² never
    overflows): two digits for n ≤ 2¹⁶, 32 only for n > 2³⁰, so a program holds a few operations
    for it, not one round per bit."""
    size = jnp.uint32(n)
    width = 32 - max(1, (n - 1).bit_length())
    r = high % size
    done = 0
    while done < 32:
        k = min(width, 32 - done)
        digit = (low >> (32 - done - k)) & jnp.uint32((1 << k) - 1)
        r = (r * jnp.uint32(1 << k) + digit) % size
        done += k
    return r


@partial(jax.jit, static_argnames=("n", "in_loop"))
def epoch_order(
    key: jax.Array, epoch: jax.Array, positions: jax.Array, n: int, in_loop: bool | None = None
) -> jax.Array:
    """π_e(positions): the examples at ``positions`` of epoch ``epoch``'s order (module
    docstring), int32 in [0, n).

    Jitted so that the programs calling it trace its few hundred integer operations once per
    process, not once each (XLA inlines it). ``in_loop`` runs the rounds in a loop (default: on
    a CPU) or unrolled; the order is the same."""
    rounds = shuffle_rounds(n)
    words = jax.random.bits(jax.random.fold_in(key, epoch), (2 * rounds + 2,), jnp.uint32)
    size = jnp.uint32(n)
    pivots = words[:rounds] % size  # uniform up to n/2³², which only the rounds' quality sees
    salts = words[rounds : 2 * rounds]
    shift = _below(words[2 * rounds], words[2 * rounds + 1], n)

    def swap_or_not(r: jax.Array | int, x: jax.Array) -> jax.Array:
        partner = (pivots[r] + size - x) % size
        swap = (_mix(jnp.maximum(x, partner) ^ salts[r]) >> 31) == 1
        return jnp.where(swap, partner, x)

    if in_loop is None:
        # on a CPU a loop compiles faster (digits MLP: 0.3-0.4 s less per program holding a
        # step) at no cost per step; on an accelerator each iteration would be launches
        in_loop = jax.default_backend() == "cpu"
    x = positions.astype(jnp.uint32)
    if in_loop:
        x = jax.lax.fori_loop(0, rounds, swap_or_not, x)
    else:
        for r in range(rounds):
            x = swap_or_not(r, x)
    return ((x + shift) % size).astype(jnp.int32)


def init_batch_state(key: jax.Array, n: int) -> BatchState:
    """A stream at the start of epoch 0 (``n`` is kept for the signature of a data stream)."""
    del n
    return BatchState(key)


def next_indices(
    state: BatchState, step: jax.Array, n: int, batch_size: int
) -> tuple[jax.Array, BatchState]:
    """Indices of the minibatch for global step ``step`` (0-based) and the (unchanged) stream."""
    per_epoch = n // batch_size
    epoch, pos = step // per_epoch, step % per_epoch
    positions = pos * batch_size + jnp.arange(batch_size, dtype=jnp.int32)
    return epoch_order(state.key, epoch, positions, n), state

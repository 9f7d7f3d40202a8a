"""Minibatch streams (bdl.compile.batching): each epoch a bijection, each example in a step's
minibatch with probability B/n, and pairs of examples together as often as sampling without
replacement puts them (z-scores against the binomial sampling error, fixed keys)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bdl.compile.batching import epoch_order, init_batch_state, next_indices, shuffle_rounds


@pytest.mark.parametrize("n", [1, 2, 7, 1797, 60_000])
def test_each_epoch_orders_every_example_once(n):
    order = jax.jit(lambda e: epoch_order(jax.random.key(0), e, jnp.arange(n), n))
    for epoch in range(3):
        np.testing.assert_array_equal(np.sort(np.asarray(order(epoch))), np.arange(n))


def _membership(n, batch_size, epochs):
    """(epochs, n): the step of its epoch at which each example is drawn, −1 if left out."""
    per_epoch, key = n // batch_size, jax.random.key(5)

    def one(epoch):
        steps = epoch * per_epoch + jnp.arange(per_epoch)
        idx = jax.vmap(lambda t: next_indices(init_batch_state(key, n), t, n, batch_size)[0])(steps)
        return jnp.full((n,), -1).at[idx.ravel()].set(jnp.repeat(jnp.arange(per_epoch), batch_size))

    return np.asarray(jax.jit(jax.vmap(one))(jnp.arange(epochs)))


def test_each_example_is_in_a_minibatch_with_probability_b_over_n():
    n, batch_size, epochs = 50, 5, 4000
    first = (_membership(n, batch_size, epochs) == 0).sum(0)  # in each epoch's first minibatch
    expected = epochs * batch_size / n
    chi2 = float(np.sum((first - expected) ** 2 / expected))
    z = (chi2 - (n - 1)) / np.sqrt(2 * (n - 1))
    assert abs(z) < 4, (z, first.min(), first.max())


@pytest.mark.parametrize("distance", [1, 2, 37])
def test_pairs_meet_as_often_as_without_replacement(distance):
    """Neighbours in the data's order (the case a weak shuffle gets wrong: with 4 rounds instead
    of ⌈log₂ n⌉ + 10 neighbours meet ≈ 4× too often)."""
    n, batch_size, epochs = 400, 8, 2000
    member = _membership(n, batch_size, epochs)
    other = np.roll(member, -distance, axis=1)
    together = int(((member == other) & (member >= 0)).sum())
    per_epoch = n // batch_size
    p = per_epoch * batch_size * (batch_size - 1) / (n * (n - 1))
    trials = epochs * n
    z = (together - trials * p) / np.sqrt(trials * p * (1 - p))
    assert abs(z) < 4, (z, together, trials * p)


def test_rounds_grow_with_the_data_set():
    assert shuffle_rounds(2) == 11
    assert shuffle_rounds(1797) == 21
    assert shuffle_rounds(60_000) == 26


def _reference_order(key, epoch, positions, n):
    """π_e by the module docstring's formula in Python integers (no 32-bit arithmetic)."""
    rounds = shuffle_rounds(n)
    words = [
        int(w)
        for w in jax.random.bits(jax.random.fold_in(key, epoch), (2 * rounds + 2,), jnp.uint32)
    ]

    def mix(x):
        x ^= x >> 16
        x = (x * 0x85EBCA6B) % 2**32
        x ^= x >> 13
        x = (x * 0xC2B2AE35) % 2**32
        return x ^ (x >> 16)

    shift = (words[2 * rounds] * 2**32 + words[2 * rounds + 1]) % n
    out = []
    for x in positions:
        for r in range(rounds):
            partner = (words[r] % n - x) % n
            if mix(max(x, partner) ^ words[rounds + r]) >> 31:
                x = partner
        out.append((x + shift) % n)
    return out


@pytest.mark.parametrize("n", [1, 2, 3, 1797, 65_537, 2**30 + 7, 2**31 - 1])
@pytest.mark.parametrize("in_loop", [True, False])
def test_the_order_is_the_formula_whether_the_rounds_loop_or_not(n, in_loop):
    key, positions = jax.random.key(11), np.arange(min(n, 40))
    order = jax.jit(lambda e: epoch_order(key, e, jnp.asarray(positions), n, in_loop=in_loop))
    for epoch in (0, 1, 12345):
        expected = _reference_order(key, epoch, positions.tolist(), n)
        np.testing.assert_array_equal(np.asarray(order(epoch)), expected)

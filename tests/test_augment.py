"""Data augmentation: the transformations' laws, the key stream, and the unbiased gradient of the
Jensen-posterior energy −Σ_i E_z[log p(y_i | a_z(x_i), θ)] − log p(θ).

Frequency checks use binomial standard errors and 5σ bands; the gradient check uses per-coordinate
z-scores from independent draws with a Bonferroni bound. All seeds are fixed.
"""

from __future__ import annotations

import math

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import bdl
from bdl import augment

KEYS = jax.random.split(jax.random.key(0), 4000)


class Linear(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(10)(x.reshape(x.shape[0], -1))


@pytest.fixture(scope="module")
def signals():
    """200 MNIST-1D signals (160 train), generated without writing a cache."""
    return bdl.data.mnist1d(seed=0, num_samples=200, cache=False)


def _binomial_ok(count: int, total: int, p: float) -> bool:
    return abs(count - total * p) <= 5 * math.sqrt(total * p * (1 - p))


# ---------------------------------------------------------------------------------------------
# The transformations
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["circular", "zeros"])
def test_random_shift_is_a_uniform_shift(mode: str) -> None:
    m, x = 3, jnp.arange(1.0, 11.0)  # no zeros in x: a zero marks a vacated sample
    out = np.asarray(jax.jit(jax.vmap(augment.random_shift(m, mode), (0, None)))(KEYS, x))
    shifts = []
    for row in out:
        matches = [
            s
            for s in range(-m, m + 1)
            if np.array_equal(
                row,
                np.roll(x, s)
                if mode == "circular"
                else np.concatenate(
                    [
                        np.zeros(max(s, 0)),
                        np.asarray(x)[max(-s, 0) : 10 - max(s, 0)],
                        np.zeros(max(-s, 0)),
                    ]
                ),
            )
        ]
        assert len(matches) == 1
        shifts.append(matches[0])
    counts = np.bincount(np.asarray(shifts) + m, minlength=2 * m + 1)
    assert all(_binomial_ok(int(c), len(KEYS), 1 / (2 * m + 1)) for c in counts)


def test_random_shift_on_channels_shifts_the_length_axis() -> None:
    x = jnp.arange(20.0).reshape(10, 2)
    out = augment.random_shift(2)(jax.random.key(1), x)
    s = [s for s in range(-2, 3) if np.array_equal(out, np.roll(x, s, axis=0))]
    assert len(s) == 1


def test_random_crop_is_a_uniform_translation_with_zero_fill() -> None:
    p = 2
    image = jnp.arange(1.0, 1.0 + 5 * 6 * 3).reshape(5, 6, 3)
    padded = np.pad(np.asarray(image), ((p, p), (p, p), (0, 0)))
    out = np.asarray(jax.jit(jax.vmap(augment.random_crop(p), (0, None)))(KEYS, image))
    assert out.shape == (len(KEYS), 5, 6, 3)
    corners = []
    for row in out:
        hits = [
            (i, j)
            for i in range(2 * p + 1)
            for j in range(2 * p + 1)
            if np.array_equal(row, padded[i : i + 5, j : j + 6])
        ]
        assert len(hits) == 1
        corners.append(hits[0][0] * (2 * p + 1) + hits[0][1])
    counts = np.bincount(corners, minlength=(2 * p + 1) ** 2)
    assert all(_binomial_ok(int(c), len(KEYS), 1 / (2 * p + 1) ** 2) for c in counts)


@pytest.mark.parametrize("probability", [0.5, 0.2])
def test_horizontal_flip_mirrors_the_width_axis_with_its_probability(probability: float) -> None:
    image = jnp.arange(4 * 5 * 2.0).reshape(4, 5, 2)
    out = np.asarray(jax.vmap(augment.horizontal_flip(probability), (0, None))(KEYS, image))
    flipped = np.array([np.array_equal(o, np.asarray(image)[:, ::-1]) for o in out])
    kept = np.array([np.array_equal(o, np.asarray(image)) for o in out])
    assert np.all(flipped ^ kept)
    assert _binomial_ok(int(flipped.sum()), len(KEYS), probability)


def test_chain_uses_independent_keys_per_step() -> None:
    x = jnp.arange(1.0, 13.0)
    both = augment.chain(augment.random_shift(2), augment.random_shift(2))
    out = np.asarray(jax.vmap(both, (0, None))(KEYS[:2000], x))
    total = [next(s for s in range(-4, 5) if np.array_equal(o, np.roll(x, s))) for o in out]
    # the sum of two independent uniform shifts on {−2..2} is triangular on {−4..4}
    counts = np.bincount(np.asarray(total) + 4, minlength=9)
    expected = np.array([1, 2, 3, 4, 5, 4, 3, 2, 1]) / 25
    assert all(_binomial_ok(int(c), 2000, p) for c, p in zip(counts, expected, strict=True))


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: augment.random_crop(-1), ValueError, r"random_crop\(padding=...\)"),
        (lambda: augment.random_crop(2.5), TypeError, r"random_crop\(padding=...\)"),
        (lambda: augment.horizontal_flip(1.5), ValueError, r"\[0, 1\]"),
        (lambda: augment.random_shift(-2), ValueError, r"max_shift"),
        (lambda: augment.random_shift(2, "wrap"), ValueError, r"mode"),
        (lambda: augment.chain(), ValueError, "at least one"),
        (lambda: augment.chain(augment.random_shift(1), 3), TypeError, "augment"),
    ],
)
def test_bad_augmentation_arguments(build, error, match) -> None:
    with pytest.raises(error, match=match):
        build()


# ---------------------------------------------------------------------------------------------
# Declaration and compile-time checks
# ---------------------------------------------------------------------------------------------


def test_compile_checks_augmentations_against_the_example_shape(signals) -> None:
    def model(aug):
        return bdl.Model(Linear(), bdl.Categorical(), augment=aug)

    with pytest.raises(ValueError, match="random_crop augments images"):
        bdl.compile(model(augment.random_crop(4)), signals, batch_size=16)
    with pytest.raises(ValueError, match="smaller than the signal length 40"):
        bdl.compile(model(augment.random_shift(40)), signals, batch_size=16)
    with pytest.raises(ValueError, match="must return an example of the input's shape"):
        bdl.compile(model(lambda k, x: x[:-1]), signals, batch_size=16)
    with pytest.raises(ValueError, match="one example of shape"):
        bdl.compile(model(lambda k, x: x @ jnp.ones((3, 3))), signals, batch_size=16)
    with pytest.raises(TypeError, match=r"Model\(augment=...\)"):
        model("flip")
    with pytest.raises(ValueError, match="in one place only"):
        bdl.compile(model(augment.random_shift(2)), signals, augment=augment.random_shift(1))
    compiled = bdl.compile(
        bdl.Model(Linear(), bdl.Categorical()), signals, augment=augment.random_shift(1)
    )
    assert compiled.augment == augment.random_shift(1)


# ---------------------------------------------------------------------------------------------
# The key stream
# ---------------------------------------------------------------------------------------------


def test_every_step_and_chain_draws_afresh_and_the_same_seed_repeats(signals) -> None:
    compiled = bdl.compile(
        bdl.Model(Linear(), bdl.Categorical(), augment=augment.random_shift(5)), signals
    )  # full batch: the minibatch is always the whole data; only the augmentation varies
    batch = eqx.filter_jit(compiled.next_batch)
    stream = compiled.init_batches(jax.random.key(3))
    (x0, y0), _ = batch(stream, jnp.int32(0))
    (x1, _), _ = batch(stream, jnp.int32(1))
    (again, _), _ = batch(compiled.init_batches(jax.random.key(3)), jnp.int32(0))
    (other, _), _ = batch(compiled.init_batches(jax.random.key(4)), jnp.int32(0))
    assert x0.shape == signals.x_train.shape and x0.dtype == jnp.float32
    np.testing.assert_array_equal(y0, signals.y_train)
    np.testing.assert_array_equal(x0, again)  # bitwise
    same = lambda a, b: np.all(np.asarray(a) == np.asarray(b), axis=1)  # noqa: E731
    # a shift of 0 has probability 1/11 per example: far fewer repeats than 160 mean changes
    assert same(x0, x1).mean() < 0.25 and same(x0, other).mean() < 0.25
    assert same(x0, signals.x_train).mean() < 0.25
    assert _binomial_ok(int(same(x0, signals.x_train).sum()), len(x0), 1 / 11)


def test_augmentation_keys_leave_the_minibatch_stream_alone(signals) -> None:
    """The augmented model draws the same minibatches (indices) as the plain one, and the
    identity augmentation gives the plain minibatches bitwise."""

    def batches(aug):
        compiled = bdl.compile(
            bdl.Model(Linear(), bdl.Categorical(), augment=aug), signals, batch_size=16
        )
        stream = compiled.init_batches(jax.random.key(2))
        out = []
        for t in range(12):  # across an epoch boundary (10 batches per epoch)
            batch, stream = eqx.filter_jit(compiled.next_batch)(stream, jnp.int32(t))
            out.append(batch)
        return out

    plain, identity, shifted = (
        batches(None),
        batches(lambda k, x: x),
        batches(augment.random_shift(3)),
    )
    for (xp, yp), (xi, yi), (xs, ys) in zip(plain, identity, shifted, strict=True):
        np.testing.assert_array_equal(xp, xi)
        np.testing.assert_array_equal(yp, yi)
        np.testing.assert_array_equal(yp, ys)
        assert not np.array_equal(xp, xs)


def test_sampling_with_augmentation_repeats_bitwise_with_the_seed(signals) -> None:
    kernel = bdl.kernels.get("sghmc", learning_rate=0.01, momentum=0.9)

    def run(target, seed=5):
        samples = bdl.sample(target, kernel, num_steps=30, thin=10, num_chains=2, seed=seed)
        return jax.tree.leaves(samples.positions)

    def compiled(aug):
        model = bdl.Model(Linear(), bdl.Categorical(), augment=aug)
        return bdl.compile(model, signals, batch_size=16)

    shifted = compiled(augment.random_shift(3))
    meta = bdl.sample(shifted, kernel, num_steps=2, seed=5).meta
    assert meta["settings"]["augment"] == "random_shift(3, mode='circular')"
    first, again, other_seed = run(shifted), run(shifted), run(shifted, seed=6)
    plain = run(compiled(None))
    for a, b, c, d in zip(first, again, other_seed, plain, strict=True):
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c) and not np.array_equal(a, d)


def test_epoch_batches_are_augmented(signals) -> None:
    compiled = bdl.compile(
        bdl.Model(Linear(), bdl.Categorical(), augment=augment.random_shift(5)),
        signals,
        batch_size=40,
    )
    xb, yb = eqx.filter_jit(compiled.epoch_batches)(jax.random.key(0))
    assert xb.shape == (4, 40, 40) and yb.shape == (4, 40)
    # each example is a shift of a training example with its label; unshifted with prob. 1/11
    train = {row.tobytes(): int(y) for row, y in zip(signals.x_train, signals.y_train, strict=True)}
    rows, labels = np.asarray(xb).reshape(-1, 40), np.asarray(yb).ravel()
    unshifted = [train.get(r.tobytes()) for r in rows]
    assert all(u is None or u == y for u, y in zip(unshifted, labels, strict=True))
    assert _binomial_ok(sum(u is not None for u in unshifted), len(rows), 1 / 11)


# ---------------------------------------------------------------------------------------------
# Unbiasedness for the augmented-data (Jensen) energy
# ---------------------------------------------------------------------------------------------


def test_augmented_minibatch_gradient_is_unbiased_for_the_jensen_energy(signals) -> None:
    """E over minibatches and shifts of ∇Ũ equals ∇U_J, with U_J computed exactly by enumerating
    the 2m + 1 equally likely circular shifts; and it differs from the plain ∇U (the test can
    fail)."""
    m, batch_size, draws = 2, 16, 4000
    compiled = bdl.compile(
        bdl.Model(Linear(), bdl.Categorical(), augment=augment.random_shift(m)),
        signals,
        batch_size=batch_size,
    )
    position = jax.tree.map(
        lambda a: 0.3 * jax.random.normal(jax.random.key(7), a.shape), compiled.initial_position
    )

    def jensen_energy(p):
        ll = jnp.mean(
            jnp.stack(
                [
                    compiled.log_likelihood(
                        p, jnp.roll(compiled.x_train, s, axis=1), compiled.y_train
                    )
                    for s in range(-m, m + 1)
                ]
            ),
            axis=0,
        )
        return -(jnp.sum(ll) + compiled.log_prior(p))

    def draw(key):
        batch, _ = compiled.next_batch(compiled.init_batches(key), jnp.int32(0))
        return jax.flatten_util.ravel_pytree(
            compiled.stochastic_energy_and_grad(position, batch)[1]
        )[0]

    grads = np.asarray(
        jax.jit(jax.vmap(draw))(jax.random.split(jax.random.key(11), draws)), np.float64
    )
    exact = np.asarray(jax.flatten_util.ravel_pytree(jax.grad(jensen_energy)(position))[0])
    plain = np.asarray(jax.flatten_util.ravel_pytree(jax.grad(compiled.energy)(position))[0])
    se = grads.std(axis=0, ddof=1) / math.sqrt(draws)
    # Bonferroni over the coordinates: a false alarm has probability 1e-3 at most
    bound = stats.norm.isf(1e-3 / (2 * grads.shape[1]))
    z = (grads.mean(axis=0) - exact) / se
    assert np.max(np.abs(z)) < bound
    assert np.max(np.abs((grads.mean(axis=0) - plain) / se)) > 2 * bound


def test_validate_refuses_an_augmented_model(signals) -> None:
    compiled = bdl.compile(
        bdl.Model(Linear(), bdl.Categorical(), augment=augment.random_shift(2)),
        signals,
        batch_size=16,
    )
    kernel = bdl.kernels.get("sghmc", learning_rate=0.01, momentum=0.9)
    with pytest.raises(ValueError, match=r"Jensen posterior.*without augment="):
        bdl.validate(compiled, kernel, num_steps=10)

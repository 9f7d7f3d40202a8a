"""The default start's second chance (docs/compiler.md, *Initial positions*): a chain whose prior
draw cannot start (U or ∇U not finite) or starts far out starts from Stan's uniform(−2, 2) draw
instead, tried again until one can; every other chain keeps its prior draw, bit for bit."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import bdl
from bdl.compile.auto_start import FAR_START, redrawn_where_far
from bdl.compile.starts import prior_draws


def _location_model(prior_scale: float, network=None):
    """y_i ~ N(f(μ), 0.1²) for 200 zeros, μ ~ N(0, prior_scale²)."""
    x = np.zeros((200, 1), np.float32)
    y = np.zeros(200, np.float32)
    model = bdl.Model(
        network=network or (lambda p, x: p["mu"] + 0.0 * x[:, 0]),
        params={"mu": jnp.zeros(())},
        likelihood=bdl.Gaussian(0.1),
        prior=bdl.Normal(prior_scale),
    )
    return bdl.compile(model, (x, y), batch_size=200)


def _starts(target, chains=8, seed=0):
    key = jax.random.key(seed)
    drawn = prior_draws(target, key, jax.random.split(key, chains))
    moved, can_start = jax.jit(lambda p: redrawn_where_far(target, p, key))(drawn)
    return np.asarray(drawn["net"]["mu"]), np.asarray(moved["net"]["mu"]), np.asarray(can_start)


def test_far_out_prior_draws_start_from_stans_draw():
    """μ ~ N(0, 10⁴²) draws energies near 10¹², a million (d + 1)·T above Stan's start (at most
    4·10⁴): every such chain moves into (−2, 2), each to a draw of its own."""
    target = _location_model(1e4)
    drawn, moved, can_start = _starts(target)
    assert np.all(np.abs(drawn) > 2.0)  # every prior draw is far out here
    assert can_start.all()
    assert np.all(np.abs(moved) < 2.0)
    assert np.unique(moved).size == moved.size
    energies = np.array([float(target.energy({"net": {"mu": jnp.asarray(m)}})) for m in moved])
    assert energies.max() - energies.min() <= FAR_START * (target.dim + 1)


def test_starts_that_can_start_and_are_not_far_keep_their_prior_draw():
    """μ ~ N(0, 1): prior draws about 10⁴ above the mode (140 posterior sds from it, far from the
    posterior but not far out) are the start, bitwise."""
    drawn, moved, can_start = _starts(_location_model(1.0))
    assert can_start.all()
    np.testing.assert_array_equal(drawn, moved)


def test_a_draw_without_a_finite_gradient_is_drawn_again():
    """f(μ) = √max(μ² − 1, 0): for |μ| < 1 the value is finite and the gradient is not (the
    square root's derivative at 0). μ ~ N(0, 0.1²) draws there in every chain, and so does the
    declared μ = 0 plus noise; each chain moves to a uniform(−2, 2) draw with |μ| > 1 (half of
    them are), and the chains stay apart."""

    def network(p, x):
        return jnp.sqrt(jnp.maximum(p["mu"] ** 2 - 1, 0)) + 0 * x[:, 0]

    drawn, moved, can_start = _starts(_location_model(0.1, network=network))
    assert np.all(np.abs(drawn) < 1)
    assert can_start.all()
    assert np.all((np.abs(moved) > 1.0) & (np.abs(moved) < 2.0))
    assert np.unique(moved).size == moved.size and np.ptp(moved) > 1.0


def test_the_declared_parameters_plus_noise_come_before_stans_draw():
    """f(μ) = √max(1 − μ², 0): where μ ~ N(0, 10²) draws |μ| ≥ 1 (no finite gradient), the chain
    takes the declared μ = 0 plus noise, which can start (bdl's fallback so far)."""

    def network(p, x):
        return jnp.sqrt(jnp.maximum(1 - p["mu"] ** 2, 0)) + 0 * x[:, 0]

    drawn, moved, can_start = _starts(_location_model(10.0, network=network))
    bad = np.abs(drawn) >= 1
    assert bad.sum() >= 6 and can_start.all()
    assert np.all(np.abs(moved[bad]) < 0.1)
    np.testing.assert_array_equal(moved[~bad], drawn[~bad])

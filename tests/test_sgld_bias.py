"""SGLD's stationary bias is O(h): on N(0, 1) its variance is exactly 1/(1 − h/2)."""

import itertools

import jax.numpy as jnp
import numpy as np
from stat_utils import mean_and_mcse, z_threshold

import bdl


def test_sgld_variance_bias_shrinks_linearly_with_step_size():
    """Euler–Maruyama on U = θ²/2: θ' = (1 − h)θ + √(2h)ξ has variance 1/(1 − h/2), so the bias
    h/(2 − h) halves (to first order) when h halves. Each measured variance must match its exact
    value within Monte Carlo error, and the biases must be clearly ordered."""
    target = bdl.compile(bdl.Potential(lambda t: -0.5 * jnp.sum(t**2), init=jnp.zeros(1)))
    steps = [0.4, 0.2, 0.1]
    threshold = z_threshold(len(steps))
    biases = []
    for h in steps:
        samples = bdl.sample(
            target,
            bdl.kernels.get("sgld", step_size=h),
            num_steps=20_000,
            burn_in=500,
            thin=5,
            num_chains=32,
            seed=3,
        )
        x = np.asarray(samples.positions)[..., 0].astype(np.float64)
        var, se, _ = mean_and_mcse(x**2)
        exact = 1.0 / (1.0 - h / 2.0)
        assert abs(var - exact) < threshold * se, (h, var, exact, se)
        biases.append((var - 1.0, se))
    for (big, se_big), (small, se_small) in itertools.pairwise(biases):
        ratio = big / small
        assert 1.5 < ratio < 2.8, f"bias ratio {ratio:.2f} (expected ≈ 2 for linear shrinkage)"
        assert big - small > threshold * np.hypot(se_big, se_small)

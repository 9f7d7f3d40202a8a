"""Energy distance between two samples (Székely & Rizzo), for parameter-space comparisons.

For distributions F, G on ℝ^d with finite first moments, the (squared) energy distance is

    D²(F, G) = 2 E‖X − Y‖ − E‖X − X'‖ − E‖Y − Y'‖,     X, X' ~ F,  Y, Y' ~ G independent,

which is ≥ 0 and = 0 iff F = G (Euclidean norm). From samples x_1..x_m ~ F and y_1..y_n ~ G,
:func:`energy_distance` returns by default the **unbiased** estimator

    Ê = (2/(m n)) Σ_{i,j} ‖x_i − y_j‖ − 1/(m(m−1)) Σ_{i≠i'} ‖x_i − x_i'‖
        − 1/(n(n−1)) Σ_{j≠j'} ‖y_j − y_j'‖,

with U-statistics (distinct pairs) for the two within-sample terms; the cross term is already
unbiased. E[Ê] = D² for independent draws, so Ê is centred at **0** when F = G and then takes
either sign (its sd is O(1/m + 1/n): the U-statistic is degenerate under F = G). With
``unbiased=False`` the within terms are V-statistics (divide by m², n², keeping the zero
diagonal): Ê_V = Ê + W_x/m + W_y/n ≥ 0, where W_x, W_y are the within-sample U-statistics, so
Ê_V is biased upwards by E‖X − X'‖/m + E‖Y − Y'‖/n; in one dimension √Ê_V equals
``scipy.stats.energy_distance`` (√2 × the L2 distance between the empirical CDFs). Neither
version takes a square root.

For autocorrelated MCMC draws the within-sample terms are consistent but no longer exactly
unbiased; thinning (``max_samples``) also reduces the autocorrelation.

Cost is O((m + n)² d) time; memory is bounded by processing the rows in blocks. For large sets
pass ``max_samples``: each sample larger than that is subsampled to ``max_samples`` points —
at random without replacement when a ``key`` is given, otherwise by deterministic even
thinning (indices round(linspace(0, m − 1, max_samples)), natural for a Markov chain).

References:
    Székely & Rizzo (2004), "Testing for equal distributions in high dimension", InterStat 5.
    Székely & Rizzo (2013), "Energy statistics: A class of statistics based on distances",
    J. Statist. Plann. Inference 143(8), 1249–1272.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bdl.metrics._utils import as_float

__all__ = ["energy_distance"]

#: elements of the (block, n, d) difference array materialised at once by the row blocks
BLOCK_ELEMENTS = 1 << 22


def _norm(diff: jax.Array) -> jax.Array:
    """Euclidean norm over the last axis with a finite (zero) gradient at 0."""
    sq = jnp.sum(diff**2, axis=-1)
    positive = sq > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, sq, 1.0)), 0.0)


def distance_sum(a: jax.Array, b: jax.Array, block_elements: int = BLOCK_ELEMENTS) -> jax.Array:
    """Σ_{i,j} ‖a_i − b_j‖ for a (m, d), b (n, d), in row blocks of at most ``block_elements``
    differences materialised at once."""
    m, (n, d) = a.shape[0], b.shape
    batch = max(1, block_elements // max(1, n * d))
    if batch >= m:  # small enough to materialise (m, n, d) at once
        return jnp.sum(_norm(a[:, None, :] - b[None, :, :]))
    rows = jax.lax.map(lambda a_i: jnp.sum(_norm(a_i - b)), a, batch_size=batch)
    return jnp.sum(rows)


def _as_points(x: jax.typing.ArrayLike, name: str) -> jax.Array:
    x = as_float(x)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ValueError(f"{name} must be (num_points, d) or (num_points,), got {x.shape}.")
    if x.shape[0] < 2:
        raise ValueError(f"{name} needs at least 2 points, got {x.shape[0]}.")
    return x


def _subsample(x: jax.Array, max_samples: int | None, key: jax.Array | None) -> jax.Array:
    m = x.shape[0]
    if max_samples is None or m <= max_samples:
        return x
    if key is None:
        idx = np.round(np.linspace(0, m - 1, max_samples)).astype(np.int64)
        return x[idx]
    # A uniformly random subset without replacement: the first max_samples of a random order
    # (one sort; cheaper to compile than jax.random.choice(..., replace=False)).
    order = jnp.argsort(jax.random.uniform(key, (m,)))
    return x[order[:max_samples]]


@partial(jax.jit, static_argnames=("max_samples", "unbiased"))
def energy_distance(
    x: jax.typing.ArrayLike,
    y: jax.typing.ArrayLike,
    *,
    max_samples: int | None = None,
    key: jax.Array | None = None,
    unbiased: bool = True,
) -> jax.Array:
    """Energy distance 2E‖X−Y‖ − E‖X−X'‖ − E‖Y−Y'‖ from two samples (module docstring).

    Args:
        x: sample from F, ``(m, d)`` (or ``(m,)`` for d = 1); m ≥ 2.
        y: sample from G, ``(n, d)`` (or ``(n,)``), same d; n ≥ 2.
        max_samples: if given, a sample with more points is subsampled to ``max_samples``
            (≥ 2) points before computing (cost O(max_samples² d)).
        key: PRNG key for random subsampling without replacement (x and y get independent
            subkeys); without it subsampling is deterministic even thinning.
        unbiased: U-statistics for the within-sample terms (default; centred at 0 when F = G,
            may be negative) or V-statistics (≥ 0, biased upwards).

    Returns:
        Scalar estimate of D²(F, G) (not square-rooted), in the units of x.
    """
    x, y = _as_points(x, "x"), _as_points(y, "y")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y differ in dimension: {x.shape[1]} and {y.shape[1]}.")
    if max_samples is not None and max_samples < 2:
        raise ValueError(f"max_samples must be at least 2, got {max_samples}.")
    dtype = jnp.promote_types(x.dtype, y.dtype)
    x, y = x.astype(dtype), y.astype(dtype)
    key_x, key_y = (None, None) if key is None else jax.random.split(key)
    x, y = _subsample(x, max_samples, key_x), _subsample(y, max_samples, key_y)
    m, n = x.shape[0], y.shape[0]
    cross = distance_sum(x, y) / (m * n)
    within_x, within_y = distance_sum(x, x), distance_sum(y, y)
    if unbiased:
        within_x, within_y = within_x / (m * (m - 1)), within_y / (n * (n - 1))
    else:
        within_x, within_y = within_x / (m * m), within_y / (n * n)
    return 2.0 * cross - within_x - within_y

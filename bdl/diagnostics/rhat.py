"""Potential scale reduction R̂: split R̂ and rank-normalised split R̂.

All functions take draws shaped ``(chains, draws, *event)`` and return one R̂ per event entry.
They are pure ``jax.numpy`` and jittable.

**R̂** (Gelman & Rubin 1992; Gelman et al. 2013, BDA3 §11.4). For M chains of N draws with chain
means x̄_m, chain variances s_m² (ddof 1), W = (1/M) Σ_m s_m² and B = N/(M−1) Σ_m (x̄_m − x̄)²,

    var̂⁺ = (N − 1)/N · W + B/N,        R̂ = sqrt(var̂⁺ / W).

* :func:`split_rhat` — R̂ on split chains (each chain cut into halves; ``(M, N) → (2M, ⌊N/2⌋)``),
  equal to NumPyro's ``split_gelman_rubin`` and ArviZ's ``rhat(method="split")``.
* :func:`bulk_rhat` — split R̂ of rank-normalised draws (Vehtari et al. 2021):
  sensitive to differences in location, valid without finite moments.
* :func:`tail_rhat` — split R̂ of rank-normalised *folded* draws ζ = |x − median x|:
  sensitive to differences in scale, which bulk R̂ misses.
* :func:`rank_rhat` — max(bulk R̂, tail R̂), the R̂ recommended by Vehtari, Gelman, Simpson,
  Carpenter & Bürkner (2021), "Rank-normalization, folding, and localization: an improved R̂ for
  assessing convergence of MCMC", Bayesian Analysis 16(2); equal to ArviZ's
  ``rhat(method="rank")``. They suggest trusting draws only when it is below 1.01.

A parameter whose draws are all equal gives 0/0 = NaN.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bdl.diagnostics.autocorrelation import _as_float
from bdl.diagnostics.transforms import (
    _chains_last,
    _check_chains,
    _fold_last,
    _rank_normalize_last,
    _split_last,
)

__all__ = ["bulk_rhat", "rank_rhat", "split_rhat", "tail_rhat"]


def _rhat_last(x: jax.Array) -> jax.Array:
    """R̂ of (..., M, N) draws over the last two axes (module docstring)."""
    n = x.shape[-1]
    within = jnp.mean(jnp.var(x, axis=-1, ddof=1), axis=-1)  # W
    between = n * jnp.var(jnp.mean(x, axis=-1), axis=-1, ddof=1)  # B
    return jnp.sqrt((between / within + n - 1.0) / n)


def _split(x: jax.typing.ArrayLike) -> jax.Array:
    x = _as_float(x)
    _check_chains(x, min_draws=4)
    return _split_last(_chains_last(x))


@jax.jit
def split_rhat(x: jax.typing.ArrayLike) -> jax.Array:
    """Split R̂ = sqrt(var̂⁺/W) on split chains (Gelman et al. 2013), one per event entry."""
    return _rhat_last(_split(x))


@jax.jit
def _rank_rhats(x: jax.typing.ArrayLike) -> tuple[jax.Array, jax.Array]:
    """(bulk R̂, tail R̂): one compiled function serves the three public rank-based R̂s."""
    split = _split(x)
    bulk = _rhat_last(_rank_normalize_last(split))
    tail = _rhat_last(_rank_normalize_last(_fold_last(split)))
    return bulk, tail


def bulk_rhat(x: jax.typing.ArrayLike) -> jax.Array:
    """Split R̂ of rank-normalised draws (Vehtari et al. 2021, bulk R̂)."""
    return _rank_rhats(x)[0]


def tail_rhat(x: jax.typing.ArrayLike) -> jax.Array:
    """Split R̂ of rank-normalised folded draws |x − median x| (Vehtari et al. 2021, tail R̂).

    The median is taken over the split draws (the middle draw of odd-length chains excluded),
    as in ArviZ.
    """
    return _rank_rhats(x)[1]


def rank_rhat(x: jax.typing.ArrayLike) -> jax.Array:
    """Rank-normalised split R̂ = max(bulk R̂, tail R̂) (Vehtari et al. 2021)."""
    bulk, tail = _rank_rhats(x)
    return jnp.maximum(bulk, tail)

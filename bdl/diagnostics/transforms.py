"""Transforms of ``(chains, draws, ...)`` draws used by the rank-based diagnostics.

Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021), "Rank-normalization, folding, and
localization: an improved R̂ for assessing convergence of MCMC", Bayesian Analysis 16(2):

* **splitting** (after Gelman et al. 2013, BDA3): each chain is cut into its first and last
  ⌊N/2⌋ draws (the middle draw of an odd-length chain is dropped), so that a trend within a chain
  shows up as disagreement between chains;
* **rank normalisation**: with r the average rank of a draw among all S = C·N draws
  (ties get the mean of their ranks),  z = Φ⁻¹((r − 3/8) / (S + 1/4))  (Blom's offset);
* **folding**: ζ = |x − median(x)|, which turns a difference in scale into a difference
  in location.

Every function treats axes 0 and 1 as (chains, draws) and maps over any trailing axes
(one diagnostic per parameter entry). All are pure ``jax.numpy`` and jittable.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtri

from bdl.diagnostics.autocorrelation import _as_float

__all__ = ["fold", "rank_normalize", "split_chains"]


def _check_chains(x: jax.Array, min_draws: int = 1) -> None:
    if x.ndim < 2:
        raise ValueError(
            f"expected draws shaped (chains, draws, ...); got an array of shape {x.shape}. "
            "Add a chain axis with x[None] for a single chain."
        )
    if x.shape[1] < min_draws:
        raise ValueError(f"need at least {min_draws} draws per chain; got {x.shape[1]}.")


def _chains_last(x: jax.Array) -> jax.Array:
    """(chains, draws, *event) → (*event, chains, draws)."""
    return jnp.moveaxis(x, (0, 1), (-2, -1))


def _chains_first(x: jax.Array) -> jax.Array:
    """(*event, chains, draws) → (chains, draws, *event)."""
    return jnp.moveaxis(x, (-2, -1), (0, 1))


def _split_last(x: jax.Array) -> jax.Array:
    """(..., C, N) → (..., 2C, ⌊N/2⌋): first halves, then last halves."""
    half = x.shape[-1] // 2
    return jnp.concatenate([x[..., :half], x[..., x.shape[-1] - half :]], axis=-2)


def _order_key(x: jax.Array) -> jax.Array:
    """Integers ordered as the floats ``x`` (XLA sorts integers several times faster on CPU).

    The IEEE-754 bit pattern read as a signed integer is monotone for x ≥ 0 and reversed for
    x < 0; flipping the non-sign bits of negative values makes it monotone everywhere. −0.0 is
    mapped to +0.0 first so that the two compare equal.
    """
    bits = {2: jnp.int16, 4: jnp.int32, 8: jnp.int64}[x.dtype.itemsize]
    x = jnp.where(x == 0, jnp.zeros((), x.dtype), x)
    key = jax.lax.bitcast_convert_type(x, bits)
    return jnp.where(key < 0, key ^ jnp.array(jnp.iinfo(bits).max, bits), key)


def _average_ranks(flat: jax.Array) -> jax.Array:
    """1-based average ranks along the last axis (scipy ``rankdata(method="average")``).

    With integer keys, #{< x} and #{≤ x} = #{< x + 1} come from one ``searchsorted``; the
    average of the tied ranks #{< x} + 1, …, #{≤ x} is their midpoint.
    """
    keys = _order_key(flat)
    batch, size = flat.shape[:-1], flat.shape[-1]
    keys = keys.reshape(-1, size)
    sorted_keys = jnp.sort(keys, axis=-1)
    queries = jnp.concatenate([keys, keys + 1], axis=-1)  # finite floats never reach the max key
    counts = jax.vmap(jnp.searchsorted)(sorted_keys, queries)
    ranks = (counts[:, :size] + 1 + counts[:, size:]).astype(flat.dtype) / 2
    return ranks.reshape(*batch, size)


def _rank_normalize_last(x: jax.Array) -> jax.Array:
    """Rank-normalise (..., C, N) jointly over the last two axes (NaN rows stay NaN)."""
    shape = x.shape
    flat = x.reshape(*shape[:-2], shape[-2] * shape[-1])
    size = flat.shape[-1]
    z = ndtri((_average_ranks(flat) - 0.375) / (size + 0.25))
    has_nan = jnp.any(jnp.isnan(flat), axis=-1, keepdims=True)
    return jnp.where(has_nan, jnp.nan, z).reshape(shape)


def _fold_last(x: jax.Array) -> jax.Array:
    """|x − median| with the median over the last two axes."""
    med = jnp.median(x, axis=(-2, -1), keepdims=True)
    return jnp.abs(x - med)


@jax.jit
def split_chains(x: jax.typing.ArrayLike) -> jax.Array:
    """Split each chain in two halves: ``(C, N, ...) → (2C, ⌊N/2⌋, ...)``.

    The first C output chains are the first halves, the next C the last halves; for odd N the
    middle draw is dropped (as in Stan, ArviZ and NumPyro).
    """
    x = _as_float(x)
    _check_chains(x, min_draws=2)
    return _chains_first(_split_last(_chains_last(x)))


@jax.jit
def rank_normalize(x: jax.typing.ArrayLike) -> jax.Array:
    """Rank-normalised draws  z = Φ⁻¹((r − 3/8)/(S + 1/4))  (Vehtari et al. 2021).

    Ranks r are taken jointly over all S = chains·draws values of each parameter entry, ties
    averaged. The output has the shape of ``x``.
    """
    x = _as_float(x)
    _check_chains(x)
    return _chains_first(_rank_normalize_last(_chains_last(x)))


@jax.jit
def fold(x: jax.typing.ArrayLike) -> jax.Array:
    """Folded draws ζ = |x − median(x)| (Vehtari et al. 2021), median over chains·draws."""
    x = _as_float(x)
    _check_chains(x)
    return _chains_first(_fold_last(_chains_last(x)))

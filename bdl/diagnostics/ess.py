"""Effective sample size (ESS) of MCMC draws: plain, bulk (rank-normalised) and tail.

All functions take draws shaped ``(chains, draws, *event)`` and return one ESS per event entry
(shape ``event``; a scalar for ``(chains, draws)``). They are pure ``jax.numpy`` and jittable.

**Estimator** (Geyer 1992, "Practical Markov chain Monte Carlo"; Stan Reference Manual;
Vehtari et al. 2021). For M chains of N draws, with per-chain autocovariances γ̂_{t,m} (by
FFT, :mod:`bdl.diagnostics.autocorrelation`),
within-chain variance W = (1/M) Σ_m s_m², between-chain variance B/N = Var_m(x̄_m) and the
pooled variance  var̂⁺ = (N−1)/N·W + B/N,  the combined autocorrelation at lag t is

    ρ̂_t = 1 − (W − (1/M) Σ_m γ̂_{t,m}) / var̂⁺ ,      ρ̂_0 = 1.

The sum of autocorrelations is truncated by **Geyer's initial positive sequence**: with pair sums
P̂_k = ρ̂_{2k} + ρ̂_{2k+1}, keep k < K where K is the first k with P̂_k ≤ 0 (or the last pair
that fits in the chain); then **Geyer's initial monotone sequence** replaces P̂_k by
min_{j≤k} P̂_j. With the first element of the stopping pair kept when positive,

    τ̂ = −1 + 2 Σ_{k<K} min_{j≤k} P̂_j + ρ̂_{2K}·1[ρ̂_{2K} > 0 or P̂_K ≥ 0],
    τ̂ ← max(τ̂, 1/log₁₀(MN)),      ESS = M·N / τ̂.

(The ρ̂_{2K} term is Stan's "improved estimation" of the truncated tail.) This matches ArviZ's
``_ess`` step for step. NumPyro's ``effective_sample_size`` uses the same ρ̂_t but sums all
monotone-clipped pairs without the ρ̂_{2K} term or the 1/log₁₀ floor, so τ̂ differs by
O(1/√(MN)): a few per cent at most in ESS, most for antithetic chains (τ̂ < 1).

* :func:`effective_sample_size` — on the draws as given (``split=False``, "plain" ESS, as NumPyro)
  or on split chains (``split=True``, ArviZ ``method="mean"``).
* :func:`ess_bulk` — on split, rank-normalised draws (Vehtari et al. 2021): ESS of the
  bulk of the distribution, defined even for infinite-variance targets.
* :func:`ess_tail` — min over q ∈ {0.05, 0.95} of the ESS of the split indicator I(x ≤ x̂_q)
  (Vehtari et al. 2021, quantile ESS), x̂_q the type-7 quantile of all draws.

A parameter whose draws are all equal gets ESS = number of draws used (M·N, or 2M·⌊N/2⌋ on
split chains; ArviZ convention); any NaN draw gives NaN.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp

from bdl.diagnostics.autocorrelation import _as_float, autocovariance
from bdl.diagnostics.transforms import (
    _chains_last,
    _check_chains,
    _rank_normalize_last,
    _split_last,
)

__all__ = ["effective_sample_size", "ess_bulk", "ess_tail"]


def _geyer_tau(rho: jax.Array) -> jax.Array:
    """τ̂ from autocorrelations ρ̂ (..., N): initial positive + monotone sequences (see above).

    A ``while_loop`` over the pairs P̂_k, vectorised over the leading axes, stops once every
    series has met its first non-positive pair, so its cost is O(K) and it compiles quickly.
    """
    n = rho.shape[-1]
    last_pair = max((n - 3) // 2, 0)  # the last pair Stan's loop may evaluate
    batch = rho.shape[:-1]

    def cond(carry: tuple) -> jax.Array:
        k, active = carry[0], carry[1]
        return (k <= last_pair) & jnp.any(active)

    def body(carry: tuple) -> tuple:
        k, active, running_min, kept, extra = carry
        even = jax.lax.dynamic_index_in_dim(rho, 2 * k, axis=-1, keepdims=False)
        odd = jax.lax.dynamic_index_in_dim(rho, 2 * k + 1, axis=-1, keepdims=False)
        pair = even + odd
        stop = active & (jnp.logical_not(pair > 0) | (k >= last_pair))
        go = active & jnp.logical_not(stop)
        running_min = jnp.where(go, jnp.minimum(running_min, pair), running_min)
        kept = jnp.where(go, kept + running_min, kept)
        extra = jnp.where(stop & ((even > 0) | (pair >= 0)), even, extra)
        return k + 1, active & jnp.logical_not(stop), running_min, kept, extra

    zeros = jnp.zeros(batch, rho.dtype)
    init = (jnp.asarray(0), jnp.ones(batch, bool), zeros + jnp.inf, zeros, zeros)
    _, _, _, kept, extra = jax.lax.while_loop(cond, body, init)
    return -1.0 + 2.0 * kept + extra


def _geyer_ess_last(x: jax.Array) -> jax.Array:
    """ESS of (..., M, N) draws over the last two axes (see module docstring)."""
    num_chains, n = x.shape[-2], x.shape[-1]
    total = num_chains * n
    acov = autocovariance(x, axis=-1)  # (..., M, N)
    mean_var = jnp.mean(acov[..., 0], axis=-1) * n / (n - 1.0)  # W
    var_plus = mean_var * (n - 1.0) / n
    if num_chains > 1:
        var_plus = var_plus + jnp.var(jnp.mean(x, axis=-1), axis=-1, ddof=1)
    rho = 1.0 - (mean_var[..., None] - jnp.mean(acov, axis=-2)) / var_plus[..., None]
    rho = rho.at[..., 0].set(1.0)
    tau = jnp.maximum(_geyer_tau(rho), 1.0 / jnp.log10(float(total)))
    ess = total / tau

    flat_shape = (*x.shape[:-2], total)
    constant = jnp.ptp(x.reshape(flat_shape), axis=-1) == 0
    ess = jnp.where(constant, float(total), ess)
    has_nan = jnp.any(jnp.isnan(x.reshape(flat_shape)), axis=-1)
    return jnp.where(has_nan, jnp.nan, ess)


@partial(jax.jit, static_argnames=("split",))
def effective_sample_size(x: jax.typing.ArrayLike, *, split: bool = False) -> jax.Array:
    """Plain effective sample size  ESS = M·N/τ̂  of ``(chains, draws, *event)`` draws.

    Args:
        x: draws shaped ``(chains, draws, *event)``.
        split: compute on split chains (ArviZ ``ess(method="mean")``; detects trends) instead of
            the chains as given (NumPyro ``effective_sample_size``).

    Returns:
        ESS per event entry, shape ``event``.
    """
    x = _as_float(x)
    _check_chains(x, min_draws=4)
    z = _chains_last(x)
    if split:
        z = _split_last(z)
    return _geyer_ess_last(z)


@jax.jit
def ess_bulk(x: jax.typing.ArrayLike) -> jax.Array:
    """Bulk ESS: the ESS of split, rank-normalised draws (Vehtari et al. 2021).

    Matches ``arviz.ess(..., method="bulk")``. Returns one value per event entry.
    """
    x = _as_float(x)
    _check_chains(x, min_draws=4)
    return _geyer_ess_last(_rank_normalize_last(_split_last(_chains_last(x))))


def ess_tail(x: jax.typing.ArrayLike, prob: float | Sequence[float] = (0.05, 0.95)) -> jax.Array:
    """Tail ESS: min over q of the split ESS of the indicator I(x ≤ x̂_q) (Vehtari et al. 2021).

    Args:
        x: draws shaped ``(chains, draws, *event)``.
        prob: the quantile levels (default 5 % and 95 %); a single float p means (p, 1 − p).

    Returns:
        One value per event entry; matches ``arviz.ess(..., method="tail")``.
    """
    x = _as_float(x)
    _check_chains(x, min_draws=4)
    if isinstance(prob, int | float):
        probs = (float(prob), 1.0 - float(prob))
    else:
        probs = tuple(float(q) for q in prob)
    if not probs or not all(0.0 < q < 1.0 for q in probs):
        raise ValueError(f"ess_tail: quantile levels must lie in (0, 1); got {prob!r}.")
    return _ess_tail(x, probs)


@partial(jax.jit, static_argnames=("probs",))
def _ess_tail(x: jax.Array, probs: tuple[float, ...]) -> jax.Array:
    z = _chains_last(x)
    flat = z.reshape(*z.shape[:-2], -1)
    ess = []
    for q in probs:
        quantile = jnp.quantile(flat, q, axis=-1)  # type 7 (linear), as ArviZ
        indicator = (z <= quantile[..., None, None]).astype(x.dtype)
        ess.append(_geyer_ess_last(_split_last(indicator)))
    out = jnp.min(jnp.stack(ess), axis=0)
    has_nan = jnp.any(jnp.isnan(flat), axis=-1)
    return jnp.where(has_nan, jnp.nan, out)

"""Autocovariance and autocorrelation of Markov chains by the fast Fourier transform.

For a chain x_1..x_N with mean x̄ the (biased, Stan/ArviZ/NumPyro convention) autocovariance at
lag t is

    γ̂_t = (1/N) Σ_{n=1}^{N−t} (x_n − x̄)(x_{n+t} − x̄),

computed for every lag at once in O(N log N) by the Wiener–Khinchin theorem: zero-pad the centred
chain to length L ≥ 2N − 1 (so the circular correlation equals the linear one), take
|FFT|², transform back and keep the first N lags (Geyer 1992; Stan Reference Manual, "Effective
sample size"). The autocorrelation is ρ̂_t = γ̂_t / γ̂_0.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["autocorrelation", "autocovariance"]


def _fast_fft_length(target: int) -> int:
    """The smallest 2^a·3^b·5^c ≥ ``target`` (a fast FFT size)."""
    n = max(int(target), 1)
    while True:
        m = n
        for p in (2, 3, 5):
            while m % p == 0:
                m //= p
        if m == 1:
            return n
        n += 1


def _as_float(x: jax.typing.ArrayLike) -> jax.Array:
    """``x`` as a floating JAX array (integers and booleans become the default float)."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    return x


def autocovariance(x: jax.typing.ArrayLike, axis: int = 1) -> jax.Array:
    """Biased autocovariance γ̂_t = (1/N) Σ_{n ≤ N−t} (x_n − x̄)(x_{n+t} − x̄) for t = 0..N−1.

    Args:
        x: draws; ``axis`` indexes time (the draws axis of a ``(chains, draws, ...)`` array).
        axis: the time axis.

    Returns:
        An array shaped like ``x`` whose entry t along ``axis`` is γ̂_t of that series.
    """
    x = _as_float(x)
    x = jnp.moveaxis(x, axis, -1)
    n = x.shape[-1]
    length = _fast_fft_length(2 * n)
    centred = x - jnp.mean(x, axis=-1, keepdims=True)
    spectrum = jnp.fft.rfft(centred, n=length, axis=-1)
    acov = jnp.fft.irfft(spectrum * jnp.conj(spectrum), n=length, axis=-1)[..., :n] / n
    return jnp.moveaxis(acov.astype(x.dtype), -1, axis)


def autocorrelation(x: jax.typing.ArrayLike, axis: int = 1) -> jax.Array:
    """Autocorrelation ρ̂_t = γ̂_t / γ̂_0 for every lag t along ``axis`` (NaN for a constant chain)."""
    acov = autocovariance(x, axis=axis)
    return acov / jnp.take(acov, jnp.array([0]), axis=axis)

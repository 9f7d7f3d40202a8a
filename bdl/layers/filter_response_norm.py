"""Filter response normalisation with a thresholded linear unit (FRN + TLU).

Singh & Krishnan (2020), "Filter Response Normalization Layer: Eliminating Batch Dependence in
the Training of Deep Neural Networks", CVPR, Eq. 1–3. For one example's activation
x ∈ R^{S × C} (S spatial positions — an image's H·W pixels or a signal's L samples — and C
channels), per channel c:

    ν²_c = (1/S) Σ_s x_{s,c}²,     x̂_{s,c} = x_{s,c} / sqrt(ν²_c + ε),
    y_{s,c} = γ_c x̂_{s,c} + β_c,   z_{s,c} = max(y_{s,c}, τ_c)        (TLU),

with learned γ, β, τ ∈ R^C. Nothing is averaged over the batch, so the network's output for
x_i depends on θ and x_i alone, and the likelihood Π_i p(y_i | x_i, θ) is a proper function of θ.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


class FilterResponseNorm(nn.Module):
    """FRN followed by TLU (``use_tlu=False``: FRN and the affine map only) on channel-last input.

    Input shape ``(batch, *spatial, channels)`` with at least one spatial axis: ``(B, H, W, C)``
    for images, ``(B, L, C)`` for signals. The mean of x² is over the spatial axes of each
    example. Parameters: ``scale`` γ (initialised to 1), ``bias`` β and ``threshold`` τ
    (initialised to 0), each of shape ``(C,)``.

    Attributes:
        epsilon: ε > 0 in sqrt(ν² + ε); the paper's 1e-6.
        use_tlu: apply the thresholded linear unit max(y, τ) (the paper's pairing; it stands in
            for the following ReLU).
    """

    epsilon: float = 1e-6
    use_tlu: bool = True

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        if x.ndim < 3:
            raise ValueError(
                "FilterResponseNorm needs inputs (batch, *spatial, channels) with at least one "
                f"spatial axis; got shape {x.shape}. For features without positions use "
                "flax.linen.LayerNorm."
            )
        channels = x.shape[-1]
        scale = self.param("scale", nn.initializers.ones, (channels,))
        bias = self.param("bias", nn.initializers.zeros, (channels,))
        nu2 = jnp.mean(jnp.square(x), axis=tuple(range(1, x.ndim - 1)), keepdims=True)
        y = scale * x * jax.lax.rsqrt(nu2 + self.epsilon) + bias
        if not self.use_tlu:
            return y
        threshold = self.param("threshold", nn.initializers.zeros, (channels,))
        return jnp.maximum(y, threshold)

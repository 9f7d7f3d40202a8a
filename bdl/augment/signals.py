"""Augmentation of 1-D signals laid out ``(length,)`` or ``(length, channels)``: random shift.

MNIST-1D's generator translates every template circularly before it resamples it to 40 points
(Greydanus 2020), so a random circular shift of the final signal is an invariance the data
already have: ``random_shift(max_shift, mode="circular")``.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from bdl.augment.base import Augmentation
from bdl.utils import arguments

_MODES = ("circular", "zeros")


@dataclasses.dataclass(frozen=True)
class RandomShift(Augmentation):
    """Shift the signal by s samples along its first axis, s uniform on {−m, …, m}.

    ``mode="circular"`` rolls the signal (what falls off one end comes back at the other);
    ``mode="zeros"`` fills the vacated samples with zeros.
    """

    max_shift: int
    mode: str = "circular"

    def __post_init__(self) -> None:
        arguments.integer(self.max_shift, "random_shift(max_shift=...)", minimum=0)
        if self.mode not in _MODES:
            raise ValueError(
                f"random_shift(mode=...) must be one of {_MODES}; got {arguments.shown(self.mode)}."
            )

    def __call__(self, key: jax.Array, x: jax.Array) -> jax.Array:
        m = self.max_shift
        shift = jax.random.randint(key, (), -m, m + 1)
        if self.mode == "circular":
            return jnp.roll(x, shift, axis=0)
        pad = [(m, m)] + [(0, 0)] * (x.ndim - 1)
        padded = jnp.pad(x, pad)
        start = (m - shift,) + (0,) * (x.ndim - 1)
        return jax.lax.dynamic_slice(padded, start, x.shape)

    def check(self, shape: tuple[int, ...]) -> None:
        if len(shape) not in (1, 2):
            raise ValueError(
                f"random_shift augments 1-D signals of shape (length,) or (length, channels); "
                f"one example here has shape {shape}. Use random_crop for images."
            )
        if self.max_shift >= shape[0]:
            raise ValueError(
                f"random_shift(max_shift={self.max_shift}) must be smaller than the signal "
                f"length {shape[0]}."
            )

    def __repr__(self) -> str:
        return f"random_shift({self.max_shift}, mode={self.mode!r})"


def random_shift(max_shift: int, mode: str = "circular") -> RandomShift:
    """Random shift of a 1-D signal by up to ``max_shift`` samples either way.

    ``mode="circular"`` rolls the signal (what falls off one end comes back at the other);
    ``mode="zeros"`` fills the vacated samples with zeros.

    Args:
        max_shift: the largest shift, in samples, ≥ 0.
        mode: ``"circular"`` or ``"zeros"``.

    Returns:
        The augmentation, for signals ``(length,)`` or ``(length, channels)``.

    Raises:
        ValueError: an unknown ``mode`` or a negative ``max_shift`` (``TypeError``: not an
            integer).
    """
    return RandomShift(max_shift, mode)

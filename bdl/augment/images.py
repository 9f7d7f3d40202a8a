"""Augmentations of images laid out ``(height, width, channels)``: random crop, horizontal flip.

The CIFAR-10 augmentation of Wenzel et al. (2020, App. A.1), after He et al. (2016): pad four
zero pixels on every side, crop back to the original size at a uniformly random offset, and flip
left/right with probability ½: ``chain(random_crop(4), horizontal_flip())``.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from bdl.augment.base import Augmentation
from bdl.utils import arguments


def _check_image(name: str, shape: tuple[int, ...]) -> None:
    if len(shape) != 3:
        raise ValueError(
            f"{name} augments images of shape (height, width, channels); one example here has "
            f"shape {shape}. Reshape the inputs (e.g. digits(flatten=False)), or use "
            "random_shift for 1-D signals."
        )


@dataclasses.dataclass(frozen=True)
class RandomCrop(Augmentation):
    """Pad ``padding`` pixels of ``fill`` on every side, then crop to the original size.

    The crop's top-left corner is uniform on {0, …, 2p}², so each of the (2p + 1)² translations
    by (−p…p, −p…p) pixels has probability 1/(2p + 1)².
    """

    padding: int
    fill: float = 0.0

    def __post_init__(self) -> None:
        arguments.integer(self.padding, "random_crop(padding=...)", minimum=0)
        arguments.number(self.fill, "random_crop(fill=...)")

    def __call__(self, key: jax.Array, x: jax.Array) -> jax.Array:
        p = self.padding
        height, width, channels = x.shape
        padded = jnp.pad(x, ((p, p), (p, p), (0, 0)), constant_values=self.fill)
        corner = jax.random.randint(key, (2,), 0, 2 * p + 1)
        return jax.lax.dynamic_slice(padded, (corner[0], corner[1], 0), (height, width, channels))

    def check(self, shape: tuple[int, ...]) -> None:
        _check_image("random_crop", shape)

    def __repr__(self) -> str:
        return f"random_crop({self.padding})"


@dataclasses.dataclass(frozen=True)
class HorizontalFlip(Augmentation):
    """Mirror the image left/right (the width axis) with probability ``probability``."""

    probability: float = 0.5

    def __post_init__(self) -> None:
        p = arguments.number(self.probability, "horizontal_flip(probability=...)", at_least=0.0)
        if p > 1:
            raise ValueError(f"horizontal_flip(probability=...) must be in [0, 1]; got {p:g}.")

    def __call__(self, key: jax.Array, x: jax.Array) -> jax.Array:
        flip = jax.random.bernoulli(key, self.probability)
        return jnp.where(flip, x[:, ::-1, :], x)

    def check(self, shape: tuple[int, ...]) -> None:
        _check_image("horizontal_flip", shape)

    def __repr__(self) -> str:
        return f"horizontal_flip({self.probability:g})"


def random_crop(padding: int = 4, fill: float = 0.0) -> RandomCrop:
    """Random crop with padding: pad ``padding`` pixels of ``fill``, crop back to the size.

    Args:
        padding: the pixels added on each side before cropping, ≥ 0.
        fill: the value of the padding.

    Returns:
        The augmentation, for images ``(height, width, channels)``.
    """
    return RandomCrop(padding, fill)


def horizontal_flip(probability: float = 0.5) -> HorizontalFlip:
    """Left/right mirror with probability ``probability``.

    Args:
        probability: the probability of flipping an example, in [0, 1].

    Returns:
        The augmentation, for images ``(height, width, channels)``.
    """
    return HorizontalFlip(probability)

"""The augmentation interface, composition, the per-example key stream and the shape check."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from bdl.utils.arguments import shown

#: data of the ``fold_in`` that separates a chain's augmentation keys from its minibatch keys
#: (those fold in the epoch, a count that never reaches 2**32 − 1)
AUGMENT_STREAM = 0xFFFFFFFF


class Augmentation:
    """A random transformation of one example: ``augment(key, x) -> x``, same shape and dtype.

    Subclasses implement :meth:`__call__` and may refine :meth:`check` (the shapes they accept).
    Plain functions with the same signature are accepted wherever an augmentation is
    (:func:`as_augmentation` wraps them).
    """

    def __call__(self, key: jax.Array, x: jax.Array) -> jax.Array:
        raise NotImplementedError

    def check(self, shape: tuple[int, ...]) -> None:
        """Raise ``ValueError`` if examples of ``shape`` cannot be augmented.

        Args:
            shape: the shape of one example.

        Raises:
            ValueError: examples of that shape cannot be augmented (e.g. a crop of a vector).
        """


@dataclasses.dataclass(frozen=True)
class _Function(Augmentation):
    fn: Callable[[jax.Array, jax.Array], jax.Array]

    def __call__(self, key: jax.Array, x: jax.Array) -> jax.Array:
        return self.fn(key, x)

    def __repr__(self) -> str:
        return getattr(self.fn, "__name__", repr(self.fn))


@dataclasses.dataclass(frozen=True)
class Chain(Augmentation):
    """Augmentations applied in order, each with its own key (``fold_in(key, position)``)."""

    steps: tuple[Augmentation, ...]

    def __call__(self, key: jax.Array, x: jax.Array) -> jax.Array:
        for i, step in enumerate(self.steps):
            x = step(jax.random.fold_in(key, i), x)
        return x

    def check(self, shape: tuple[int, ...]) -> None:
        for step in self.steps:
            step.check(shape)

    def __repr__(self) -> str:
        return f"chain({', '.join(map(repr, self.steps))})"


def as_augmentation(value: Any, name: str = "augment") -> Augmentation | None:
    """``None``, an :class:`Augmentation`, or a function ``(key, x) -> x`` wrapped as one.

    Args:
        value: ``None``, an :class:`Augmentation` or a function ``(key, x) -> x``.
        name: the argument's name in the error message.

    Returns:
        ``None`` or the augmentation.

    Raises:
        TypeError: ``value`` is none of these.
    """
    if value is None or isinstance(value, Augmentation):
        return value
    if callable(value):
        return _Function(value)
    raise TypeError(
        f"{name} must be a function augment(key, x) -> x on one example, e.g. "
        f"bdl.augment.random_crop(4), or None; got {shown(value)}."
    )


def chain(*augmentations: Augmentation | Callable[[jax.Array, jax.Array], jax.Array]) -> Chain:
    """Compose augmentations: ``chain(random_crop(4), horizontal_flip())`` crops, then flips.

    Args:
        *augmentations: augmentations or functions ``(key, x) -> x``, applied in order.

    Returns:
        The composed augmentation.

    Raises:
        ValueError: no augmentation given.
        TypeError: an argument that is not an augmentation (``None`` included).
    """
    if not augmentations:
        raise ValueError("chain() needs at least one augmentation.")
    steps = tuple(as_augmentation(a, f"chain() argument {i}") for i, a in enumerate(augmentations))
    if any(s is None for s in steps):
        raise TypeError("chain() takes augmentations, not None.")
    return Chain(steps)


def check_augmentation(augment: Augmentation, example: Any, name: str = "augment") -> None:
    """Raise ``ValueError`` (before anything is compiled) unless ``augment`` maps one example of
    ``example``'s shape and dtype to an array of the same shape and dtype.

    Args:
        augment: the augmentation.
        example: the data whose first example is tried (``(n, ...)``).
        name: the argument's name in the error message.

    Raises:
        ValueError: the augmentation fails on one example or changes its shape or dtype.
    """
    shape = tuple(np.shape(example))
    augment.check(shape)
    spec = jax.ShapeDtypeStruct(shape, np.asarray(example).dtype)
    try:
        out = jax.eval_shape(augment, jax.random.key(0), spec)
    except Exception as err:
        raise ValueError(
            f"{name}={augment!r} cannot be applied to one example of shape {shape}: "
            f"{type(err).__name__}: {err}. An augmentation takes (key, x) for a single example, "
            "without the batch axis."
        ) from None
    if not isinstance(out, jax.ShapeDtypeStruct) or (out.shape, out.dtype) != (shape, spec.dtype):
        got = f"{out.shape} {out.dtype}" if isinstance(out, jax.ShapeDtypeStruct) else shown(out)
        raise ValueError(
            f"{name}={augment!r} must return an example of the input's shape and dtype "
            f"({shape} {spec.dtype}); it returned {got}."
        )


def augment_batch(
    augment: Augmentation, key: jax.Array, step: jax.Array, x: jax.Array
) -> jax.Array:
    """Augment every example of the minibatch ``x`` drawn at ``step``.

    Example i of the batch gets the key ``split(fold_in(fold_in(key, AUGMENT_STREAM), step))[i]``
    where ``key`` is the chain's minibatch key: the draws are a pure function of the run's seed,
    the chain and the step (bitwise reproducible, independent across chains and steps), and are
    never the keys of the minibatch's order or of the kernel's noise.

    Args:
        augment: the augmentation.
        key: the chain's minibatch key.
        step: the global step the minibatch was drawn at.
        x: the minibatch's inputs, example axis first.

    Returns:
        The augmented inputs, shaped like ``x``.
    """
    k = jax.random.fold_in(jax.random.fold_in(key, AUGMENT_STREAM), step)
    return jax.vmap(augment)(jax.random.split(k, x.shape[0]), x)

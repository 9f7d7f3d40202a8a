"""The floating-point type bdl computes in: float32 by default, float64 when JAX's 64-bit mode
is on (``JAX_ENABLE_X64=1``, or ``jax.config.update("jax_enable_x64", True)`` before
``bdl.compile``). The mode is JAX's own, and global: ``bdl.compile`` reads it once and stores
the data and the initial position in that type, and everything traced from them follows
(docs/precision.md).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

PyTree = Any


def float_dtype() -> np.dtype:
    """The floating-point type of new arrays: float64 with JAX's 64-bit mode on, else float32.

    Returns:
        ``np.dtype("float64")`` or ``np.dtype("float32")``.
    """
    return np.dtype(jax.dtypes.canonicalize_dtype(jnp.float64))


def as_float(tree: PyTree, dtype: Any = None) -> PyTree:
    """Every floating-point leaf of ``tree`` as ``dtype`` (default :func:`float_dtype`); other
    leaves (integers, booleans, keys) unchanged.

    Args:
        tree: a pytree of arrays.
        dtype: the floating-point type.

    Returns:
        The tree with its floating-point leaves cast.
    """
    dtype = float_dtype() if dtype is None else dtype

    def cast(a: Any) -> Any:
        kind = getattr(a, "dtype", None)
        if kind is None or not jnp.issubdtype(kind, jnp.floating) or kind == dtype:
            return a
        return jnp.asarray(a, dtype)

    return jax.tree.map(cast, tree)


def like(tree: PyTree, template: PyTree) -> PyTree:
    """``tree`` with each floating-point leaf cast to the type of the template's leaf in the
    same place (the two trees have one structure).

    Args:
        tree: a pytree of arrays, e.g. starting positions with a leading chain axis.
        template: a pytree of the same structure, e.g. a compiled model's initial position.

    Returns:
        The cast tree.
    """

    def cast(a: Any, t: Any) -> Any:
        want = jnp.result_type(t)
        kind = getattr(a, "dtype", None)
        if kind is None or not jnp.issubdtype(kind, jnp.floating) or kind == want:
            return a
        if not jnp.issubdtype(want, jnp.floating):
            return a
        return jnp.asarray(a, want)

    return jax.tree.map(cast, tree, template)

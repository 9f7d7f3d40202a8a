"""Pytree helpers: readable paths, flat views and per-leaf maps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from bdl.utils.arguments import shown

PyTree = Any
_SHOWN_LEAVES = 6  # leaves listed by describe()


def path_to_str(path: tuple) -> str:
    """Render a pytree key path as ``a/b/0/c`` (used by path-pattern priors and reports)."""
    parts = []
    for key in path:
        if isinstance(key, jax.tree_util.DictKey):
            parts.append(str(key.key))
        elif isinstance(key, jax.tree_util.GetAttrKey):
            parts.append(str(key.name))
        elif isinstance(key, jax.tree_util.SequenceKey):
            parts.append(str(key.idx))
        elif isinstance(key, jax.tree_util.FlattenedIndexKey):
            parts.append(str(key.key))
        else:
            parts.append(str(key))
    return "/".join(parts)


def describe(tree: PyTree) -> str:
    """``{net/w: (5,), net/b: ()}``: every leaf's path and shape (the first few of a large tree);
    a bare leaf as :func:`bdl.utils.arguments.shown` shows it."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    if len(flat) == 1 and not flat[0][0]:
        return shown(flat[0][1])
    items = [f"{path_to_str(p)}: {tuple(np.shape(x))}" for p, x in flat[:_SHOWN_LEAVES]]
    more = len(flat) - _SHOWN_LEAVES
    if more > 0:
        items.append(f"… {more} more")
    return "{" + ", ".join(items) + "}"


def leaf_paths(tree: PyTree) -> list[str]:
    """The ``a/b/c`` path of every leaf, in flattening order."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [path_to_str(p) for p, _ in flat]


def map_with_path(fn: Callable[[str, Any], Any], tree: PyTree) -> PyTree:
    """``jax.tree.map`` whose function also receives the leaf's ``a/b/c`` path."""
    return jax.tree_util.tree_map_with_path(lambda p, x: fn(path_to_str(p), x), tree)


def tree_size(tree: PyTree) -> int:
    """Total number of scalar entries in a pytree."""
    return sum(int(jnp.size(x)) for x in jax.tree.leaves(tree))


def tree_dot(a: PyTree, b: PyTree) -> jax.Array:
    """Σ_i a_i b_i over all leaves."""
    return sum(jnp.vdot(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))


def tree_sum(tree: PyTree) -> jax.Array:
    """Σ of every entry over all leaves."""
    return sum(jnp.sum(x) for x in jax.tree.leaves(tree))


def tree_normal_like(key: jax.Array, tree: PyTree) -> PyTree:
    """Standard-normal noise shaped like ``tree`` from a single Gaussian draw.

    One ``random.normal`` call over the concatenated size (cheaper than a key split and a draw per
    leaf), then split and reshaped into the leaves.
    """
    flat, unravel = ravel_pytree(tree)
    return unravel(jax.random.normal(key, flat.shape, flat.dtype))


def tree_where(cond: jax.Array, a: PyTree, b: PyTree) -> PyTree:
    """Leafwise ``jnp.where(cond, a, b)`` with a scalar condition."""
    return jax.tree.map(lambda x, y: jnp.where(cond, x, y), a, b)

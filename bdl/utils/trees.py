"""Pytree helpers: readable paths, flat views and per-leaf maps."""

from __future__ import annotations

import itertools
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


def tree_rademacher_like(key: jax.Array, tree: PyTree) -> PyTree:
    """Rademacher (±1) noise shaped like ``tree`` from a single draw, as
    :func:`tree_normal_like`: one random-bits program for the whole tree, where a draw per leaf
    compiles one per leaf."""
    flat, unravel = ravel_pytree(tree)
    return unravel(jax.random.rademacher(key, flat.shape, flat.dtype))


def tree_where(cond: jax.Array, a: PyTree, b: PyTree) -> PyTree:
    """Leafwise ``jnp.where(cond, a, b)`` with a scalar condition."""
    return jax.tree.map(lambda x, y: jnp.where(cond, x, y), a, b)


def parameter_names(
    tree: PyTree,
    *,
    batch_dims: int = 0,
    labels: dict[str, Any] | None = None,
) -> list[str]:
    """One readable name per scalar coordinate of ``tree``, in flattening order.

    A coordinate is named by its leaf's path and its index, ``net/Dense_0/kernel[3,1]``
    (``net/w[3]`` in one dimension, the bare path for a scalar leaf), in the order of
    ``jax.tree.leaves`` with each leaf flattened in C order — the order of
    :func:`bdl.validation.reference.parameter_summaries` and of ``ravel_pytree``. Every table,
    message and plot that names a parameter uses these names, so the same coordinate has the same
    name everywhere.

    Args:
        tree: a position, or draws of one with ``batch_dims`` leading axes (e.g. 2 for
            ``(chain, draw)``), which are not part of the name. A position that is a bare array
            has the path ``theta``.
        labels: names for the entries along the first axis of some leaves, by path, e.g.
            ``{"net/w": data.feature_names}``: coordinate 3 of ``net/w`` is then
            ``net/w[mean radius]``. A label list must match the leaf's first axis.
    """
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    paths = [path_to_str(p) or "theta" for p, _ in flat]  # a bare array position is θ
    labels = dict(labels or {})
    unknown = sorted(set(labels) - set(paths))
    if unknown:
        raise ValueError(
            f"parameter labels for {unknown}, which are not leaves of the position; its leaves "
            f"are {paths}."
        )
    names: list[str] = []
    for path, (_, leaf) in zip(paths, flat, strict=True):
        shape = tuple(jnp.shape(leaf))[batch_dims:]
        if not shape:
            names.append(path)
            continue
        first = labels.get(path)
        if first is not None:
            first = [str(x) for x in first]
            if len(first) != shape[0]:
                raise ValueError(
                    f"parameter labels for {path!r}: {len(first)} names for a first axis of "
                    f"length {shape[0]} (shape {shape}); give one name per entry."
                )
        for index in itertools.product(*(range(n) for n in shape)):
            parts = [str(i) for i in index]
            if first is not None:
                parts[0] = first[index[0]]
            names.append(f"{path}[{','.join(parts)}]")
    return names


def coordinate_name(path: str, shape: tuple[int, ...], index: int) -> str:
    """The name :func:`parameter_names` gives coordinate ``index`` (C order) of a leaf at
    ``path`` shaped ``shape`` (without labels), for naming a few coordinates of a large tree
    without naming them all: ``net/w[3,1]``, the bare path for a scalar leaf."""
    if not shape:
        return path or "theta"
    parts = (str(int(i)) for i in np.unravel_index(index, shape))
    return f"{path or 'theta'}[{','.join(parts)}]"

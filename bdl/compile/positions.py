"""Checks of a user-given position (``init=`` of ``bdl.sample``) against a target's positions.

One function serves both the up-front check, on host values before anything is traced, and
``init_positions`` inside the traced start-up (where only structure and shapes are known). The
messages show the target's structure as ``path: shape`` so that the fix can be read off them.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bdl.utils.trees import describe, path_to_str

PyTree = Any


def check_position(
    init: PyTree,
    template: PyTree,
    num_chains: int | None,
    owner: str,
    *,
    name: str = "init",
    chain_axis: bool = True,
) -> None:
    """Raise naming the leaf when ``init`` cannot start ``num_chains`` chains of ``owner`` (its
    positions shaped like ``template``): another structure, a leaf of another shape (each leaf
    is shaped like the template's, or, with ``chain_axis``, all have a leading ``num_chains``
    axis; ``None``: any), a non-numeric leaf, or a NaN or infinite entry (checked where values
    are concrete). ``name`` is the argument named in messages."""
    given, expected = jax.tree.structure(init), jax.tree.structure(template)
    if given != expected:
        raise ValueError(
            f"{name} must be a position like the {owner}'s, {describe(template)}; got "
            f"{describe(init)}. Build it from "
            "compiled.initial_position, e.g. jax.tree.map(jnp.zeros_like, "
            "compiled.initial_position)."
        )
    flat, _ = jax.tree_util.tree_flatten_with_path(init)
    # how messages name each leaf: "init leaf net/w", or "init" for a bare array
    paths = [f"{name} leaf {path_to_str(p)}" if p else name for p, _ in flat]
    leaves = [x for _, x in flat]
    for path, leaf in zip(paths, leaves, strict=True):
        dtype = leaf.dtype if hasattr(leaf, "dtype") else np.asarray(leaf).dtype
        if not (jnp.issubdtype(dtype, np.number) or jnp.issubdtype(dtype, np.bool_)):
            raise TypeError(f"{path} must be a numeric array; got dtype {dtype}.")
    shapes = [np.shape(x) for x in leaves]
    _check_shapes(paths, shapes, template, num_chains if chain_axis else 0, owner, name)
    for path, leaf in zip(paths, leaves, strict=True):
        if isinstance(leaf, jax.core.Tracer):
            continue
        values = np.asarray(leaf)
        if np.issubdtype(values.dtype, np.inexact) and not np.all(np.isfinite(values)):
            bad = int(values.size - np.count_nonzero(np.isfinite(values)))
            raise ValueError(
                f"{path} has {bad} NaN or infinite "
                f"entr{'y' if bad == 1 else 'ies'}; nothing can start there."
            )


def _check_shapes(
    paths: list[str],
    shapes: list[tuple[int, ...]],
    template: PyTree,
    num_chains: int | None,
    owner: str,
    name: str,
) -> None:
    """Every leaf shaped like the template's, or every leaf with one leading chain axis
    (``num_chains`` = 0: none allowed)."""
    wanted = [np.shape(x) for x in jax.tree.leaves(template)]
    rows = list(zip(paths, shapes, wanted, strict=True))
    if all(s == w for _, s, w in rows):
        return

    def chained(s: tuple[int, ...], w: tuple[int, ...]) -> bool:
        return len(s) == len(w) + 1 and s[1:] == w and (num_chains is None or s[0] == num_chains)

    leading = {s[0] for _, s, w in rows if chained(s, w)}
    if num_chains != 0 and all(chained(s, w) for _, s, w in rows) and len(leading) == 1:
        return
    axis = "num_chains" if num_chains is None else str(num_chains)
    for path, shape, want in rows:
        if shape != want and (num_chains == 0 or not chained(shape, want)):
            with_axis = f"({', '.join([axis, *map(str, want)])}{',' if not want else ''})"
            alternative = "" if num_chains == 0 else f" (or {with_axis} with a leading chain axis)"
            raise ValueError(
                f"{path} has shape {shape}; the {owner}'s is {want}{alternative}. "
                f"The {owner}'s positions are {describe(template)}."
            )
    raise ValueError(
        f"{name}: give every leaf the {owner}'s shape, or every leaf the same leading chain axis "
        f"(num_chains); got leaf shapes {shapes} for {describe(template)}."
    )


def broadcast_position(init: PyTree, template: PyTree, num_chains: int, owner: str) -> PyTree:
    """``init`` with a leading chain axis of ``num_chains`` and the template's dtypes."""
    check_position(init, template, num_chains, owner)
    init = jax.tree.map(lambda a, t: jnp.asarray(a, jnp.result_type(t)), init, template)
    shared = all(
        a.shape == np.shape(t)
        for a, t in zip(jax.tree.leaves(init), jax.tree.leaves(template), strict=True)
    )
    if shared:  # one start for every chain
        return jax.tree.map(lambda a: jnp.broadcast_to(a, (num_chains, *a.shape)), init)
    return init

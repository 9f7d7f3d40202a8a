"""Readable names for the leaves of a pytree of draws, valid in NetCDF and reversible.

A leaf's path is the list of its keys from the root (dict keys, attribute names, sequence
indices), each rendered with ``str``. A name joins the escaped keys with a separator: ``.`` for
ArviZ and NetCDF variables (``net.Dense_0.kernel``), ``/`` for the keys of an ``.npz`` file
(``position/net/Dense_0/kernel``). Escaping replaces, in each key, ``%`` by ``%25``, ``.`` by
``%2E`` and ``/`` by ``%2F`` (percent-encoding, as in URLs), so that a key holding a separator
cannot be confused with two keys and :func:`split_name` inverts :func:`join_name`. Underscores and
every other character are kept: ``Dense_0`` stays ``Dense_0``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import jax

_ESCAPES = (("%", "%25"), (".", "%2E"), ("/", "%2F"))  # "%" first: it starts every code
_CODES = re.compile("|".join(code for _, code in _ESCAPES))
_DECODE = {code: raw for raw, code in _ESCAPES}


def escape(key: str) -> str:
    """``key`` with ``%``, ``.`` and ``/`` percent-encoded."""
    for raw, code in _ESCAPES:
        key = key.replace(raw, code)
    return key


def unescape(key: str) -> str:
    """The inverse of :func:`escape`."""
    return _CODES.sub(lambda m: _DECODE[m.group(0)], key)


def join_name(keys: Sequence[str], sep: str = ".") -> str:
    """The name of the path ``keys``: escaped keys joined by ``sep`` (``"."`` or ``"/"``)."""
    return sep.join(escape(str(k)) for k in keys)


def split_name(name: str, sep: str = ".") -> list[str]:
    """The path ``keys`` of a name made by :func:`join_name` (``[]`` for ``""``)."""
    return [unescape(k) for k in name.split(sep)] if name else []


def key_name(key: Any) -> str:
    """One entry of a JAX key path as a string: a dict key, an attribute name or an index."""
    for attr in ("key", "name", "idx"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def leaf_keys(tree: Any) -> list[list[str]]:
    """The path of every leaf of ``tree``, in flattening order, as lists of keys."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [[key_name(k) for k in path] for path, _ in flat]


def posterior_name(what: str, keys: Sequence[str]) -> str:
    """The ArviZ variable of a leaf: a position's keys (``net.Dense_0.kernel``; a bare-array
    position is ``position``), an ``extra`` entry's name then its keys (``guide.net.…``)."""
    prefix = [] if what == "position" and keys else [what]
    return join_name([*prefix, *keys])

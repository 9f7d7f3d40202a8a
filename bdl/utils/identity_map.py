"""Values remembered per object identity, each forgotten when its object is garbage-collected.

Targets and accumulators are equinox modules, which hash by their fields (arrays, so not at
all); a ``weakref.WeakKeyDictionary`` cannot hold them. :class:`WeakIdentityMap` keys by
``id`` and checks identity through a weak reference, so it never keeps an object alive.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import jax

V = TypeVar("V")


class WeakIdentityMap(Generic[V]):
    """``object → value`` by identity; ``on_release()`` runs when a remembered object is
    collected."""

    def __init__(self, on_release: Callable[[], None] | None = None) -> None:
        self._entries: dict[int, tuple[weakref.ref, V]] = {}
        self._on_release = on_release

    def get(self, obj: Any, default: V | None = None) -> V | None:
        hit = self._entries.get(id(obj))
        return hit[1] if hit is not None and hit[0]() is obj else default

    def __contains__(self, obj: Any) -> bool:
        hit = self._entries.get(id(obj))
        return hit is not None and hit[0]() is obj

    def remember(self, obj: Any, value: V) -> None:
        """Remember ``value`` for ``obj``. An object that holds tracers (built inside a trace,
        it lives one trace) or takes no weak reference is not remembered."""
        if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(obj)):
            return
        key = id(obj)
        try:
            ref = weakref.ref(obj, functools.partial(self._forget, key))
        except TypeError:
            return
        self._entries[key] = (ref, value)

    def _forget(self, key: int, ref: weakref.ref) -> None:
        hit = self._entries.get(key)
        if hit is not None and hit[0] is ref:
            del self._entries[key]
            if self._on_release is not None:
                self._on_release()


class PairMemo(Generic[V]):
    """``(a, b) → value`` remembered by the identity of both objects, forgotten when either is
    garbage-collected. For results that are pure functions of two immutable objects (a target
    and a kernel) and cost a trace to compute; a value must not refer to ``a`` or ``b``."""

    def __init__(self) -> None:
        self._outer: WeakIdentityMap[WeakIdentityMap[V]] = WeakIdentityMap()

    def get_or_compute(self, a: Any, b: Any, compute: Callable[[], V]) -> V:
        inner = self._outer.get(a)
        if inner is not None and b in inner:
            return inner.get(b)  # type: ignore[return-value]
        value = compute()
        if inner is None:
            inner = WeakIdentityMap()
            self._outer.remember(a, inner)
        inner.remember(b, value)
        return value

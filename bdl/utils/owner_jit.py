"""``eqx.filter_jit`` that lets go of the programs compiled for objects that no longer exist.

A module-level ``eqx.filter_jit`` keeps every program it has compiled, and each program keeps
the static part of its arguments alive: a target's energy, gradient and predictive closures. A
process that samples many targets in turn (a sweep over models, an experiment over seeds and
temperatures, a test suite) therefore keeps every program it ever compiled. On the CPU each
program is JIT-compiled machine code in its own memory mappings (≈ 200 mappings per sampled
target), and once a process holds Linux's ``vm.max_map_count`` of them (65,530 by default) the
next compilation crashes inside XLA.

:func:`owner_jit` watches the first argument of each call (the *owner*: a target, an
accumulator) through a weak reference. When ``max_released`` owners that it compiled for
have been garbage-collected, the next call clears the function's compilation cache, so what
a process holds is bounded by the owners still alive (each recompiles once after a clear).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar

import equinox as eqx

from bdl.utils.identity_map import WeakIdentityMap

P = ParamSpec("P")
R = TypeVar("R")

#: owners released before a function's compilation cache is cleared
MAX_RELEASED = 8


class OwnerJit(Generic[P, R]):
    """``eqx.filter_jit(fn)`` whose cache is cleared after ``max_released`` owners (first
    arguments) it compiled for have been garbage-collected. With ``donate``, the name of a
    keyword argument of ``fn``, that argument's arrays are donated to the call (XLA reuses their
    memory for the outputs; the caller must not use them again)."""

    def __init__(
        self, fn: Callable[P, R], max_released: int = MAX_RELEASED, donate: str | None = None
    ) -> None:
        self._donate = donate
        if donate is None:
            self._jitted = eqx.filter_jit(fn)
        else:

            def split(kept: tuple, donated: Any) -> Any:
                args, kwargs = kept
                return fn(*args, **kwargs, **{donate: donated})

            # the program is logged and counted under the function's own name
            split.__name__ = split.__qualname__ = getattr(fn, "__name__", "split")
            self._jitted = eqx.filter_jit(split, donate="all-except-first")
        self.max_released = max_released
        self._owners: WeakIdentityMap[None] = WeakIdentityMap(on_release=self._count_release)
        self._released = 0
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if self._released >= self.max_released:
            self.clear_cache()
        if args and args[0] not in self._owners:
            # an owner built inside an outer trace, or one that takes no weak reference, is not
            # watched: its programs stay until the next clear
            self._owners.remember(args[0], None)
        if self._donate is None:
            return self._jitted(*args, **kwargs)
        donated = kwargs.pop(self._donate)
        return self._jitted((args, kwargs), donated)

    def lower(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        """The program a call with these arguments runs, lowered (nothing is compiled)."""
        if self._donate is None:
            return self._jitted.lower(*args, **kwargs)
        donated = kwargs.pop(self._donate)
        return self._jitted.lower((args, kwargs), donated)

    def _count_release(self) -> None:
        self._released += 1

    def cache_size(self) -> int:
        """How many compiled programs this function holds."""
        cached = getattr(self._jitted, "_cached", None)
        return cached._cache_size() if cached is not None else 0

    def clear_cache(self) -> None:
        """Drop every compiled program of this function (live owners recompile once)."""
        cached = getattr(self._jitted, "_cached", None)  # the jax.jit under eqx.filter_jit
        if cached is not None:
            cached.clear_cache()
        self._released = 0

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        return self if instance is None else functools.partial(self, instance)


def owner_jit(fn: Callable[P, R] | None = None, *, donate: str | None = None) -> Any:
    """Decorator: :class:`OwnerJit` with the default ``max_released`` (``@owner_jit``, or
    ``@owner_jit(donate="buffers")`` to donate a keyword argument's arrays)."""
    if fn is None:
        return functools.partial(OwnerJit, donate=donate)
    return OwnerJit(fn)

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

A program that runs once per run, or a few times (a run's start, the checks after it), is
declared with ``once=True``: on a CPU, XLA compiles it with :data:`ONCE_OPTIONS`, LLVM's ``-O1``
and the loop emitters instead of the fusion emitters. That halves the compilation of a
network's start program (its random draws) and computes the same values bitwise (checked by
``benchmarks/once_options.py`` on every shipped model); its own run time, which only these
programs pay, is not what a run waits for.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar

import equinox as eqx
import jax

from bdl.utils.identity_map import WeakIdentityMap

P = ParamSpec("P")
R = TypeVar("R")

#: owners released before a function's compilation cache is cleared
MAX_RELEASED = 8
#: XLA's options for a program declared ``once`` on a CPU (module docstring)
ONCE_OPTIONS = {"xla_backend_optimization_level": 1, "xla_cpu_use_fusion_emitters": False}


def once_options() -> dict[str, Any] | None:
    """The ``compiler_options`` of ``jax.jit`` for a program that runs once or a few times per
    run (module docstring): :data:`ONCE_OPTIONS` on a CPU, else ``None``."""
    return dict(ONCE_OPTIONS) if jax.default_backend() == "cpu" else None


class OwnerJit(Generic[P, R]):
    """``eqx.filter_jit(fn)`` whose cache is cleared after ``max_released`` owners (first
    arguments) it compiled for have been garbage-collected. With ``donate``, the name of a
    keyword argument of ``fn``, that argument's arrays are donated to the call (XLA reuses their
    memory for the outputs; the caller must not use them again). With ``once``, a program that
    runs once or a few times per run, compiled on a CPU with :data:`ONCE_OPTIONS`."""

    def __init__(
        self,
        fn: Callable[P, R],
        max_released: int = MAX_RELEASED,
        donate: str | None = None,
        once: bool = False,
    ) -> None:
        self._donate = donate
        self._jitted = self._jit(fn, {})
        # on a CPU, the program compiled with fewer optimisations (made when first called)
        self._once = (lambda: self._jit(fn, {"compiler_options": ONCE_OPTIONS})) if once else None
        self._jitted_once: Any = None
        self.max_released = max_released
        self._owners: WeakIdentityMap[None] = WeakIdentityMap(on_release=self._count_release)
        self._released = 0
        functools.update_wrapper(self, fn)

    def _jit(self, fn: Callable[P, R], options: dict[str, Any]) -> Any:
        donate = self._donate
        if donate is None:
            return eqx.filter_jit(fn, **options)

        def split(kept: tuple, donated: Any) -> Any:
            args, kwargs = kept
            return fn(*args, **kwargs, **{donate: donated})

        # the program is logged and counted under the function's own name
        split.__name__ = split.__qualname__ = getattr(fn, "__name__", "split")
        return eqx.filter_jit(split, donate="all-except-first", **options)

    def _current(self) -> Any:
        """The jitted function this call uses: with ``once`` on a CPU, the one compiled with
        :data:`ONCE_OPTIONS`."""
        if self._once is None or jax.default_backend() != "cpu":
            return self._jitted
        if self._jitted_once is None:
            self._jitted_once = self._once()
        return self._jitted_once

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if self._released >= self.max_released:
            self.clear_cache()
        if args and args[0] not in self._owners:
            # an owner built inside an outer trace, or one that takes no weak reference, is not
            # watched: its programs stay until the next clear
            self._owners.remember(args[0], None)
        jitted = self._current()
        if self._donate is None:
            return jitted(*args, **kwargs)
        donated = kwargs.pop(self._donate)
        return jitted((args, kwargs), donated)

    def lower(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        """The program a call with these arguments runs, lowered (nothing is compiled)."""
        jitted = self._current()
        if self._donate is None:
            return jitted.lower(*args, **kwargs)
        donated = kwargs.pop(self._donate)
        return jitted.lower((args, kwargs), donated)

    def _count_release(self) -> None:
        self._released += 1

    def cache_size(self) -> int:
        """How many compiled programs this function holds."""
        cached = [getattr(j, "_cached", None) for j in (self._jitted, self._jitted_once)]
        return sum(c._cache_size() for c in cached if c is not None)

    def clear_cache(self) -> None:
        """Drop every compiled program of this function (live owners recompile once)."""
        for jitted in (self._jitted, self._jitted_once):
            cached = getattr(jitted, "_cached", None)  # the jax.jit under eqx.filter_jit
            if cached is not None:
                cached.clear_cache()
        self._released = 0

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        return self if instance is None else functools.partial(self, instance)


def owner_jit(
    fn: Callable[P, R] | None = None, *, donate: str | None = None, once: bool = False
) -> Any:
    """Decorator: :class:`OwnerJit` with the default ``max_released`` (``@owner_jit``,
    ``@owner_jit(donate="buffers")`` to donate a keyword argument's arrays, or
    ``@owner_jit(once=True)`` for a program that runs once or a few times per run)."""
    if fn is None:
        return functools.partial(OwnerJit, donate=donate, once=once)
    return OwnerJit(fn, once=once)

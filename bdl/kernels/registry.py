"""Kernels by name: ``bdl.kernels.get("sghmc", step_size=1e-3)``, ``bdl.kernels.names()``."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

from bdl.kernels.base import Kernel

#: hyper-parameters that choose between parameterisations: giving one of a group drops the
#: registry defaults of the others (a user's ``learning_rate`` replaces the default ``step_size``)
ALTERNATIVES: tuple[frozenset[str], ...] = (
    frozenset({"step_size", "friction", "alpha"}),
    frozenset({"learning_rate", "momentum"}),
)
CYCLE_ALTERNATIVES: tuple[frozenset[str], ...] = (
    frozenset({"cycle_length"}),
    frozenset({"num_cycles", "num_steps"}),
)


class Entry(NamedTuple):
    factory: Callable[..., Kernel]
    summary: str
    defaults: dict[str, Any]


_REGISTRY: dict[str, Entry] = {}


def register(
    name: str, factory: Callable[..., Kernel], summary: str, defaults: dict[str, Any] | None = None
) -> None:
    """Register ``factory(**hyper) -> Kernel`` under ``name`` with a one-line summary.

    ``defaults`` are the hyper-parameters a user's own are merged over (:func:`get`).
    """
    _REGISTRY[name] = Entry(factory, summary, dict(defaults or {}))


def names() -> list[str]:
    """Every registered kernel name, sorted."""
    return sorted(_REGISTRY)


def summary(name: str) -> str:
    return _entry(name).summary


def defaults(name: str) -> dict[str, Any]:
    return dict(_entry(name).defaults)


def get(name: str, **hyper: Any) -> Kernel:
    """Build the kernel registered as ``name`` with ``hyper`` merged over its defaults.

    A hyper-parameter of one parameterisation drops the defaults of the others (``learning_rate``
    and ``momentum`` replace the default ``step_size`` and ``friction``). An unknown name or
    hyper-parameter raises ``ValueError`` listing the valid ones.
    """
    entry = _entry(name)
    _check_names(name, entry.factory, hyper)
    merged = {**_compatible_defaults(entry.defaults, hyper), **hyper}
    return entry.factory(**merged)


def _compatible_defaults(default: dict[str, Any], hyper: dict[str, Any]) -> dict[str, Any]:
    dropped: set[str] = set()
    for groups in (ALTERNATIVES, CYCLE_ALTERNATIVES):
        for group in groups:
            if group & set(hyper):
                dropped |= set().union(*(g for g in groups if g is not group)) - set(hyper)
    return {k: v for k, v in default.items() if k not in dropped}


def _check_names(name: str, factory: Callable[..., Kernel], hyper: dict[str, Any]) -> None:
    params = inspect.signature(factory).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return  # wrappers pass the rest to their base kernel, which checks them
    valid = sorted(k for k, p in params.items() if p.kind is not inspect.Parameter.VAR_POSITIONAL)
    unknown = sorted(set(hyper) - set(valid))
    if unknown:
        hints = [
            f"{u!r} (did you mean {close[0]!r}?)"
            if (close := difflib.get_close_matches(u, valid, 1))
            else repr(u)
            for u in unknown
        ]
        raise ValueError(
            f"{name}: unknown hyper-parameter {', '.join(hints)}. Valid: {', '.join(valid)}."
        )


def _entry(name: str) -> Entry:
    if not isinstance(name, str) or name not in _REGISTRY:
        close = difflib.get_close_matches(str(name), names(), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"unknown kernel name {name!r}.{hint} Registered kernels: {', '.join(names())}."
        )
    return _REGISTRY[name]

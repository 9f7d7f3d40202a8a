"""Kernels by name: ``bdl.kernels.get("sghmc", step_size=1e-3)``, ``bdl.kernels.names()``."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from bdl.kernels.base import Kernel

_REGISTRY: dict[str, tuple[Callable[..., Kernel], str, dict[str, Any]]] = {}


def register(
    name: str, factory: Callable[..., Kernel], summary: str, defaults: dict[str, Any] | None = None
) -> None:
    """Register ``factory(**hyper) -> Kernel`` under ``name`` with a one-line summary.

    ``defaults`` are the hyper-parameters used when the kernel is requested without any (by
    ``bdl kernels``, the checker and the test battery).
    """
    _REGISTRY[name] = (factory, summary, dict(defaults or {}))


def names() -> list[str]:
    """Every registered kernel name, sorted."""
    return sorted(_REGISTRY)


def summary(name: str) -> str:
    return _entry(name)[1]


def defaults(name: str) -> dict[str, Any]:
    return dict(_entry(name)[2])


def get(name: str, **hyper: Any) -> Kernel:
    """Build the kernel registered as ``name``; with no hyper-parameters, its defaults."""
    factory, _, default = _entry(name)
    return factory(**(hyper if hyper else default))


def _entry(name: str) -> tuple[Callable[..., Kernel], str, dict[str, Any]]:
    if not isinstance(name, str) or name not in _REGISTRY:
        close = difflib.get_close_matches(str(name), names(), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"unknown kernel name {name!r}.{hint} Registered kernels: {', '.join(names())}."
        )
    return _REGISTRY[name]

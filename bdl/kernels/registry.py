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

    Args:
        name: the kernel's name (``bdl.kernels.get(name)``, ``bdl sample --kernel name``).
        factory: builds the kernel from its hyper-parameters.
        summary: one line for ``bdl kernels``.
        defaults: the hyper-parameters used when the user gives none of them.

    Raises:
        TypeError: a name, factory or summary of the wrong kind.
        ValueError: defaults the factory does not take.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"register: name must be a non-empty string; got {name!r}.")
    if not callable(factory):
        raise TypeError(
            f"register({name!r}): factory must be a function hyper -> kernel; got "
            f"{type(factory).__name__}."
        )
    if not isinstance(summary, str):
        raise TypeError(f"register({name!r}): summary must be a string; got {summary!r}.")
    if defaults is not None and not isinstance(defaults, dict):
        raise TypeError(
            f"register({name!r}): defaults must be a dict of hyper-parameters; got "
            f"{type(defaults).__name__}."
        )
    own = _own_names(factory)
    if own is not None:
        _raise_unknown(f"register({name!r}) defaults", sorted(set(defaults or {}) - own), own)
    _REGISTRY[name] = Entry(factory, summary, dict(defaults or {}))


def names() -> list[str]:
    """Every registered kernel name, sorted.

    Returns:
        The names.
    """
    return sorted(_REGISTRY)


def summary(name: str) -> str:
    return _entry(name).summary


def defaults(name: str) -> dict[str, Any]:
    return dict(_entry(name).defaults)


def get(name: str, **hyper: Any) -> Kernel:
    """Build the kernel registered as ``name`` with ``hyper`` merged over its defaults.

    A hyper-parameter of one parameterisation drops the defaults of the others (``learning_rate``
    and ``momentum`` replace the default ``step_size`` and ``friction``).

    Args:
        name: a registered kernel (:func:`names` lists them; ``bdl kernels`` describes them).
        **hyper: the kernel's hyper-parameters, as its factory takes them (``step_size``,
            ``friction``, ``learning_rate``, ``momentum``, ``base`` for a wrapper, …); those not
            given are the registered defaults.

    Returns:
        The kernel, ready for :func:`bdl.sample`.

    Raises:
        ValueError: an unknown name or hyper-parameter (the message lists the valid ones), or
            a hyper-parameter the factory rejects.

    Examples:
        >>> import bdl
        >>> kernel = bdl.kernels.get("sghmc", learning_rate=0.01, momentum=0.9)
        >>> kernel.name
        'sghmc'
        >>> bdl.kernels.get("cyclical", base="sgld", step_size=1e-3, cycle_length=50).name
        'cyclical(sgld)'
        >>> bdl.kernels.get("sgld", stepsize=1e-3)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: sgld: unknown hyper-parameter ...
    """
    entry = _entry(name)
    _check_names(name, entry.factory, hyper)
    return entry.factory(**merge(entry.defaults, hyper))


def merge(defaults: dict[str, Any], hyper: dict[str, Any]) -> dict[str, Any]:
    """``hyper`` over ``defaults``, where a value of one parameterisation drops the defaults of
    the others (``learning_rate`` and ``momentum`` replace a default ``step_size`` and
    ``friction``): the registry's defaults, or a model file's suggestion."""
    return {**_compatible_defaults(defaults, hyper), **hyper}


def _compatible_defaults(default: dict[str, Any], hyper: dict[str, Any]) -> dict[str, Any]:
    dropped: set[str] = set()
    for groups in (ALTERNATIVES, CYCLE_ALTERNATIVES):
        for group in groups:
            if group & set(hyper):
                dropped |= set().union(*(g for g in groups if g is not group)) - set(hyper)
    return {k: v for k, v in default.items() if k not in dropped}


def _check_names(name: str, factory: Callable[..., Kernel], hyper: dict[str, Any]) -> None:
    """Every key of ``hyper`` is a hyper-parameter of ``name``: of its factory, or, for a wrapper
    (a factory taking ``**base_hyper``), of the wrapper or of its base kernel."""
    own = _own_names(factory)
    if own is not None:
        _raise_unknown(name, sorted(set(hyper) - own), own)
        return
    wrapper = _named_parameters(factory)
    base = hyper.get("base", _REGISTRY[name].defaults.get("base") if name in _REGISTRY else None)
    if not isinstance(base, str) or base not in _REGISTRY:
        return  # a kernel object (it takes no hyper-parameters) or a bad base: the factory says
    base_hyper = {k: v for k, v in hyper.items() if k not in wrapper}
    unknown = sorted(set(base_hyper) - _accepted(base, base_hyper))
    if unknown:
        _raise_unknown(name, unknown, wrapper, (base, _accepted(base, base_hyper)))


def _accepted(name: str, hyper: dict[str, Any]) -> set[str]:
    """The hyper-parameter names kernel ``name`` takes, its base's included."""
    factory = _REGISTRY[name].factory
    own = _own_names(factory)
    if own is not None:
        return own
    base = hyper.get("base", _REGISTRY[name].defaults.get("base"))
    wrapper = _named_parameters(factory)
    if isinstance(base, str) and base in _REGISTRY:
        return wrapper | _accepted(base, {k: v for k, v in hyper.items() if k not in wrapper})
    return wrapper


def _named_parameters(factory: Callable[..., Any]) -> set[str]:
    params = inspect.signature(factory).parameters.values()
    return {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def _own_names(factory: Callable[..., Any]) -> set[str] | None:
    """The factory's keyword names, or ``None`` when it passes ``**base_hyper`` on."""
    params = inspect.signature(factory).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return _named_parameters(factory)


def _raise_unknown(
    where: str, unknown: list[str], valid: set[str], base: tuple[str, set[str]] | None = None
) -> None:
    """``ValueError``: each unknown name with the closest valid one, then the valid names."""
    if not unknown:
        return
    every = valid | (base[1] if base else set())
    hints = [
        f"{u!r} (did you mean {close[0]!r}?)"
        if (close := difflib.get_close_matches(u, sorted(every), 1))
        else repr(u)
        for u in unknown
    ]
    listed = f"Valid: {', '.join(sorted(valid))}"
    if base:
        listed += f"; for base {base[0]!r}: {', '.join(sorted(base[1] - valid))}"
    plural = "s" if len(unknown) > 1 else ""
    raise ValueError(f"{where}: unknown hyper-parameter{plural} {', '.join(hints)}. {listed}.")


def _entry(name: str) -> Entry:
    if not isinstance(name, str) or name not in _REGISTRY:
        close = difflib.get_close_matches(str(name), names(), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"unknown kernel name {name!r}.{hint} Registered kernels: {', '.join(names())}."
        )
    return _REGISTRY[name]

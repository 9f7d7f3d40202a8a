"""Meta-training configurations: TOML files parsed into frozen dataclasses.

A config file is a TOML table; ``kernel`` names the learned kernel and the other keys are the
trainer's settings. The shipped configurations live in ``bdl/meta/configs/<kernel>.toml``;
``bdl meta-train KERNEL`` uses the shipped one unless ``--config FILE`` is given.

Each trainer declares its settings as a frozen dataclass whose typed fields are the keys, with
their defaults; :func:`parse_config` turns a table into one, rejecting unknown keys and values of
the wrong type, and the dataclass's ``__post_init__`` checks ranges (:func:`require`). Fields
declared with ``compare=False`` (run length, checkpoint and log intervals) do not change the
computation: they may differ when a run is resumed, and configs that differ only in them are
equal, so they share compiled functions.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
import types
import typing
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal, TypeVar

from bdl.utils.arguments import suggestion

C = TypeVar("C")


def shipped_config_path(kernel: str) -> Path:
    """The package's configuration file for ``kernel``."""
    return Path(str(resources.files("bdl.meta").joinpath("configs", f"{kernel}.toml")))


def load_config(path: str | os.PathLike | None, kernel: str) -> dict[str, Any]:
    """Read a TOML config (the shipped one for ``kernel`` if ``path`` is None)."""
    path = shipped_config_path(kernel) if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config: no file at {path}.")
    with open(path, "rb") as f:
        config = tomllib.load(f)
    named = config.get("kernel", kernel)
    if named != kernel:
        raise ValueError(f"config: {path} is for kernel {named!r}, not {kernel!r}.")
    config["kernel"] = kernel
    return config


def parse_config(cls: type[C], table: C | Mapping[str, Any], where: str) -> C:
    """``cls`` (a dataclass) from ``table``: unknown or missing keys and values of the wrong type
    (by the field annotations) raise ``ValueError`` naming the key, prefixed by ``where``; an
    instance of ``cls`` is returned as it is."""
    if isinstance(table, cls):
        return table
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(table) - set(fields))
    if unknown:
        known = sorted(fields)
        hint = "".join(suggestion(u, known) for u in unknown)
        raise ValueError(f"{where}: unknown config keys {unknown}.{hint} Known keys are {known}.")
    missing = sorted(
        name
        for name, f in fields.items()
        if name not in table
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    )
    if missing:
        raise ValueError(f"{where}: missing config keys {missing}.")
    hints = typing.get_type_hints(cls)
    values = {key: _coerce(hints[key], value) for key, value in table.items()}
    for key, value in values.items():
        if value is _BAD:
            what = _describe(hints[key])
            raise ValueError(f"{where}: config key {key!r} must be {what}; got {table[key]!r}.")
    try:
        return cls(**values)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def check_types(config: Any) -> None:
    """For ``__post_init__``, first: every field has its annotated type, as :func:`parse_config`
    demands of a TOML table (a config built directly gets the same ``ValueError``); ints given
    for floats become floats and lists tuples."""
    hints = typing.get_type_hints(type(config))
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        coerced = _coerce(hints[f.name], value)
        if coerced is _BAD:
            what = _describe(hints[f.name])
            raise ValueError(f"config key {f.name!r} must be {what}; got {value!r}.")
        object.__setattr__(config, f.name, coerced)


def require(config: Any, key: str, ok: bool, what: str) -> None:
    """For ``__post_init__``: raise ``ValueError`` naming ``key`` unless ``ok``."""
    if not ok:
        raise ValueError(f"config key {key!r} must be {what}; got {getattr(config, key)!r}.")


def at_least(config: Any, bound: float, *keys: str, strict: bool = False) -> None:
    """For ``__post_init__``: each of ``keys`` must be >= ``bound`` (> with ``strict``)."""
    for key in keys:
        value = getattr(config, key)
        ok, what = (value > bound, ">") if strict else (value >= bound, ">=")
        require(config, key, ok, f"{what} {bound}")


_BAD = object()


def _coerce(tp: Any, value: Any) -> Any:
    """``value`` checked against the annotation ``tp`` (ints become floats where a float is
    wanted, lists become tuples), or ``_BAD``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        (tp,) = (a for a in args if a is not type(None))
        return None if value is None else _coerce(tp, value)
    if origin is tuple:
        if not isinstance(value, list | tuple):
            return _BAD
        types_ = [args[0]] * len(value) if args[1:] == (Ellipsis,) else args
        if len(types_) != len(value):
            return _BAD
        out = tuple(_coerce(t, v) for t, v in zip(types_, value, strict=True))
        return _BAD if any(v is _BAD for v in out) else out
    if origin is Literal:
        return value if value in args else _BAD
    if isinstance(value, bool) and tp is not bool:
        return _BAD
    if tp is float and isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return value if tp in (int, str, bool) and isinstance(value, tp) else _BAD


_NOUNS = {int: "integer", float: "finite number", str: "string", bool: "boolean"}


def _describe(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return f"one of {list(args)}"
    if origin in (typing.Union, types.UnionType):
        return _describe(next(a for a in args if a is not type(None)))
    if origin is tuple:
        count = "" if args[1:] == (Ellipsis,) else f"{len(args)} "
        return f"a list of {count}{_NOUNS[args[0]]}s"
    return f"{'an' if tp is int else 'a'} {_NOUNS[tp]}"

"""Parsing ``key=value`` options given on the command line."""

from __future__ import annotations

import ast
from typing import Any


def parse_options(items: list[str] | None, flag: str) -> dict[str, Any]:
    """``["step_size=1e-3", "friction=2"]`` -> ``{"step_size": 0.001, "friction": 2}``."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag} expects key=value, got {item!r}.")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out

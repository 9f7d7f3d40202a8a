"""The compiler: declarations lowered to pure, jittable JAX functions.

Its names are imported on first use (PEP 562): ``bdl`` imports this package when it is itself
imported, and the compiler's dependencies (NumPyro, Flax) are loaded only when needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "CompiledModel": "bdl.compile.compiled_model",
    "CompiledPotential": "bdl.compile.compiled_potential",
    "Target": "bdl.compile.target",
    "compile": "bdl.compile.compiler",
}

__all__ = ["CompiledModel", "CompiledPotential", "Target", "compile"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'bdl.compile' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from bdl.compile.compiled_model import CompiledModel
    from bdl.compile.compiled_potential import CompiledPotential
    from bdl.compile.compiler import compile
    from bdl.compile.target import Target

"""A kernel's hyper-parameters as a JSON-able dict, for the record of where draws came from.

:func:`describe` walks the kernel object — an Equinox module whose fields are its hyper-parameters,
with nested modules for the recipe, integrator, history transform and blocks, and ``inner`` for
the kernel a wrapper holds — and keeps what can be written down: Python scalars and strings as
they are, 0-d arrays as numbers, larger arrays by dtype and shape (``"float32[32,4]"``),
functions (schedules) by their qualified name and other objects by ``repr``. It knows no kernel
by name, so a new kernel or wrapper is described without changes here.
"""

from __future__ import annotations

import dataclasses
import math
import types
from typing import Any

import equinox as eqx
import jax
import numpy as np

from bdl.kernels.base import Kernel

JSON = None | bool | int | float | str | list["JSON"] | dict[str, "JSON"]


def describe(kernel: Kernel) -> dict[str, JSON]:
    """``{"type": class name, "name": kernel.name, field: value, …}``, nested for the modules a
    kernel holds (``recipe``, ``integrator``, ``history``, a wrapper's ``inner``).

    The result survives ``json.dumps``/``json.loads`` unchanged (lists, not tuples; non-finite
    floats as the strings ``"inf"``, ``"-inf"``, ``"nan"``), so a saved record compares equal to
    the one in memory.

    Args:
        kernel: any kernel.

    Returns:
        The description, a JSON-serialisable dict.
    """
    if not isinstance(kernel, eqx.Module):
        raise TypeError(f"describe(kernel=...) must be a bdl kernel; got {type(kernel).__name__}.")
    return _module(kernel)


def _module(module: eqx.Module) -> dict[str, JSON]:
    out: dict[str, JSON] = {"type": type(module).__name__}
    if isinstance(module, Kernel):
        out["name"] = str(module.name)  # a property on wrappers, a field on RecipeKernel
    for field in dataclasses.fields(module):
        if field.name not in out:
            out[field.name] = _value(getattr(module, field.name, None))
    return out


def _number(x: float) -> JSON:
    return x if math.isfinite(x) else repr(x)


def _value(value: Any) -> JSON:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _number(float(value))
    if isinstance(value, np.generic | np.ndarray | jax.Array):
        array = np.asarray(value)
        if array.ndim == 0 and array.dtype.kind in "biuf":
            item = array.item()
            return _number(item) if isinstance(item, float) else item
        return f"{array.dtype}[{','.join(map(str, array.shape))}]"
    if isinstance(value, eqx.Module):
        return _module(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple, e.g. (ℓ, β)
        return {
            "type": type(value).__name__,
            **{k: _value(v) for k, v in zip(value._fields, value, strict=True)},
        }
    if isinstance(value, list | tuple):
        return [_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _value(v) for k, v in value.items()}
    if isinstance(value, types.FunctionType | types.BuiltinFunctionType | types.MethodType):
        # a schedule: its qualified name, not a repr carrying a memory address
        return f"{getattr(value, '__module__', None) or ''}.{value.__qualname__}".lstrip(".")
    text = repr(value)
    return type(value).__name__ if " at 0x" in text else text

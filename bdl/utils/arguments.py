"""Checks of user arguments shared by every layer, so that bad input fails early and alike.

Each check names the argument, shows what was given and says what is allowed; a wrong type is a
``TypeError``, a value out of range a ``ValueError``. Nothing here touches JAX's tracing or
compilation: the checks run on host values before anything is traced.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from typing import Any

import jax
import numpy as np

#: seeds are reduced to 32 bits by JAX (with 64-bit types off): -1 and 2**32 - 1 give one key
SEED_LIMIT = 2**32


def shown(value: Any) -> str:
    """``value`` as a message shows it: the repr of a short value, the type of anything else."""
    if isinstance(value, bool | int | float | str | np.number | type(None)):
        text = repr(value.item() if isinstance(value, np.number) else value)
        return text if len(text) <= 40 else f"{text[:37]}..."
    if isinstance(value, np.ndarray | jax.Array | jax.ShapeDtypeStruct):
        return f"an array of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


def suggestion(word: Any, options: Iterable[str]) -> str:
    """`` Did you mean 'x'?`` for the closest of ``options`` (difflib), or ``""``."""
    close = difflib.get_close_matches(str(word), list(options), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def is_integer(value: Any) -> bool:
    """A Python or NumPy integer, not a bool."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def integer(value: Any, name: str, minimum: int | None = None) -> int:
    """``value`` as an ``int`` ≥ ``minimum``; ``TypeError``/``ValueError`` naming ``name``."""
    bound = "" if minimum is None else f" >= {minimum}"
    if not is_integer(value):
        raise TypeError(f"{name} must be an integer{bound}; got {shown(value)}.")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be{bound}; got {int(value)}.")
    return int(value)


def number(
    value: Any,
    name: str,
    *,
    above: float | None = None,
    at_least: float | None = None,
    below: float | None = None,
) -> float:
    """``value`` as a finite ``float`` (> ``above``, ≥ ``at_least``, < ``below`` where given);
    ``TypeError`` for a non-number (a string, a bool, an array with axes), ``ValueError``
    naming ``name`` for NaN, an infinity or a value out of range."""
    low = above if above is not None else at_least
    if low is not None and below is not None:
        what = f"in {'(' if above is not None else '['}{low:g}, {below:g})"
    else:
        what = " and ".join(
            f"{op} {b:g}"
            for op, b in ((">", above), (">=", at_least), ("<", below))
            if b is not None
        )
    if isinstance(value, np.ndarray | jax.Array) and np.ndim(value) == 0:
        if isinstance(value, jax.core.Tracer):
            raise TypeError(f"{name} must be a Python number; got a traced array.")
        value = value.item()
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        raise TypeError(f"{name} must be a number{' ' + what if what else ''}; got {shown(value)}.")
    v = float(value)
    ok = math.isfinite(v)
    ok = ok and (above is None or v > above) and (at_least is None or v >= at_least)
    ok = ok and (below is None or v < below)
    if not ok:
        allowed = what if what.startswith("in ") else f"{what + ' and ' if what else ''}finite"
        raise ValueError(f"{name} must be {allowed}; got {v:g}.")
    return v


def instance(value: Any, kind: Any, message: str) -> None:
    """Raises unless ``value`` is an instance of ``kind``.

    Args:
        value: the argument.
        kind: a class, a tuple of classes or a union, as ``isinstance`` takes.
        message: what the argument must be; the error adds ``"; got <its type>."``.

    Raises:
        TypeError: ``value`` is not an instance of ``kind``.
    """
    if not isinstance(value, kind):
        raise TypeError(f"{message}; got {type(value).__name__}.")


def finite_array(value: Any, not_numeric: str, not_finite: str) -> np.ndarray:
    """``value`` as a float64 array of finite entries.

    Args:
        value: a number or array.
        not_numeric: the ``TypeError``'s message where ``value`` is no number or array.
        not_finite: the ``ValueError``'s message where an entry is NaN or infinite.

    Returns:
        The array.

    Raises:
        TypeError: ``value`` is no number or array.
        ValueError: an entry is NaN or infinite.
    """
    try:
        array = np.asarray(value, np.float64)
    except (TypeError, ValueError):
        raise TypeError(not_numeric) from None
    if not np.all(np.isfinite(array)):
        raise ValueError(not_finite)
    return array


def seed(value: Any, name: str = "seed") -> int:
    """An integer seed in [0, 2**32): JAX keeps 32 bits of it, so a negative seed or one of
    2**32 or more would silently give the draws of another seed."""
    if _is_key(value):
        raise TypeError(
            f"{name} must be an integer in [0, 2**32), not a JAX key: bdl derives its keys "
            f"from the seed (and records it); pass e.g. {name}=0."
        )
    if not is_integer(value):
        raise TypeError(f"{name} must be an integer in [0, 2**32); got {shown(value)}.")
    if not 0 <= value < SEED_LIMIT:
        raise ValueError(
            f"{name} must be in [0, 2**32); got {int(value)}, which JAX would reduce to "
            f"{int(value) % SEED_LIMIT} (another seed's draws)."
        )
    return int(value)


def flag(value: Any, name: str) -> bool:
    """A ``bool`` (a string such as ``"no"`` would be true)."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False; got {shown(value)}.")
    return bool(value)


def _is_key(value: Any) -> bool:
    """A typed JAX key, or the uint32 pair of ``jax.random.PRNGKey``."""
    if not isinstance(value, np.ndarray | jax.Array):
        return False
    if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
        return True
    return value.dtype == np.uint32 and np.shape(value)[-1:] == (2,)

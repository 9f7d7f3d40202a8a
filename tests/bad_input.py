"""The runner shared by the bad-input corpus (``tests/test_bad_input_*.py``).

A case is one row: an id, a call (a function of the module's shared objects), the exception it
must raise and a fragment its message must contain. The runner also counts XLA compilations
while the call runs: a bad input must be refused before anything is compiled, so a case that
compiles fails even when the error is right. Build inputs of the calls with NumPy, not jax.numpy
(``jnp.asarray`` compiles a small program the first time it sees a shape).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import pytest

_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_compilations = [0]


def _count(event: str, duration: float, **_: Any) -> None:
    if event == _COMPILE_EVENT:
        _compilations[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count)


def case(id: str, call: Callable[[Any], Any], error: type[Exception], fragment: str) -> Any:
    """One row of a corpus: ``call(shared)`` must raise ``error`` whose message contains
    ``fragment`` (a plain substring)."""
    return pytest.param(call, error, fragment, id=id)


def check(call: Callable[[Any], Any], error: type[Exception], fragment: str, shared: Any) -> None:
    """Run one case: the error, its message and no compilation before it."""
    before = _compilations[0]
    with pytest.raises(error) as info:
        call(shared)
    message = str(info.value)
    assert fragment in message, f"{fragment!r} not in the message: {message}"
    compiled = _compilations[0] - before
    assert compiled == 0, f"{compiled} XLA compilation(s) before the error: {message}"

"""A count of JAX's tracing, lowering and compilation events in this process.

A timed call that traced, lowered or compiled a program says little about how long the
program runs: the sampling loop uses :func:`count` to tell such calls apart, so that
:class:`bdl.sampling.run.chunking.TimedChunks` does not take them for the steps' cost. The count
comes from ``jax.monitoring``'s duration events under ``/jax/core/compile/`` (one per trace,
lowering and XLA compilation: a jit cache miss, whether or not the persistent cache then
supplies the executable); the listener is registered on the first call of :func:`count`, and
costs nothing between compilations.
"""

from __future__ import annotations

from typing import Any

import jax

_PREFIX = "/jax/core/compile/"
_events = 0
_listening = False


def _listen(event: str, duration: float, **_: Any) -> None:
    global _events
    if event.startswith(_PREFIX):
        _events += 1


def count() -> int:
    """Tracing, lowering and compilation events so far (counted from this function's first
    call): two counts differ exactly when something was traced or compiled in between."""
    global _listening
    if not _listening:
        jax.monitoring.register_event_duration_secs_listener(_listen)
        _listening = True
    return _events

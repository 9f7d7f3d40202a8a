"""One run at a time in a checkpoint directory: an advisory lock on ``DIR/lock``.

A run that checkpoints into a directory, or resumes one, holds an exclusive ``flock`` on the
file ``lock`` there from before it reads the checkpoint until it returns (normally, with an
error, or after Ctrl-C). A second process that tries to run in the same directory meanwhile is
refused with :class:`CheckpointInUseError` (a ``ValueError``: the command line exits 2), which names
the holder. The lock belongs to the open file, not to the file's existence: the operating
system drops it when the holding process ends, however it ends (SIGKILL included), so a stale
lock never blocks a directory; the file itself stays and means nothing by itself.

Within one process the lock is re-entrant for the thread that holds it (the command line holds
it while it records its command and while ``bdl.sample`` runs), and refused to other threads.
On a platform without ``fcntl`` nothing is locked.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = "lock"

F = TypeVar("F", bound=Callable[..., Any])


class CheckpointInUseError(ValueError):
    """Another run (another process, or another thread) holds the checkpoint directory."""


class _Held:
    def __init__(self, file: IO[str] | None) -> None:
        self.file, self.thread, self.count = file, threading.get_ident(), 1


_held: dict[str, _Held] = {}
_guard = threading.Lock()
#: the locks taken inside the current call of a function wrapped by :func:`released_on_return`
_scope: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "bdl_checkpoint_locks", default=None
)


def acquire(directory: str | os.PathLike) -> None:
    """Lock ``directory`` (created if missing) for this thread, or raise
    :class:`CheckpointInUseError`. Inside a function wrapped by :func:`released_on_return` the
    lock is released when it returns; otherwise call :func:`release`."""
    directory = Path(directory)
    key = str(directory.resolve())
    with _guard:
        held = _held.get(key)
        if held is not None:
            if held.thread != threading.get_ident():
                raise CheckpointInUseError(
                    f"the checkpoint directory {directory} is in use by another run in this "
                    "process; wait for it to end."
                )
            held.count += 1
        else:
            _held[key] = _Held(_lock(directory))
    scope = _scope.get()
    if scope is not None:
        scope.append(key)


def release(directory: str | os.PathLike) -> None:
    """Undo one :func:`acquire` of ``directory`` by this thread."""
    _release(str(Path(directory).resolve()))


def _release(key: str) -> None:
    with _guard:
        held = _held.get(key)
        if held is None:
            return
        held.count -= 1
        if held.count > 0:
            return
        del _held[key]
    if held.file is not None:
        held.file.truncate(0)
        fcntl.flock(held.file, fcntl.LOCK_UN)
        held.file.close()


@contextlib.contextmanager
def hold(directory: str | os.PathLike) -> Iterator[None]:
    """``with hold(DIR):`` the directory is locked for the block (see :func:`acquire`)."""
    acquire(directory)
    try:
        yield
    finally:
        release(directory)


def check_free(directory: str | os.PathLike) -> None:
    """Raise :class:`CheckpointInUseError` now when another process holds ``directory`` (a missing
    directory is free); holds nothing afterwards."""
    if Path(directory).is_dir():
        with hold(directory):
            pass


def released_on_return(fn: F) -> F:
    """``fn`` releasing, when it returns or raises (Ctrl-C included), every lock it acquired."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        token = _scope.set([])
        try:
            return fn(*args, **kwargs)
        finally:
            for key in reversed(_scope.get() or []):
                _release(key)
            _scope.reset(token)

    return wrapper  # type: ignore[return-value]


def _lock(directory: Path) -> IO[str] | None:
    if fcntl is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    file = open(directory / LOCK_FILE, "a+")  # noqa: SIM115 - held until released
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        file.seek(0)
        holder = file.read().strip() or "another process"
        file.close()
        raise CheckpointInUseError(
            f"the checkpoint directory {directory} is in use by another run ({holder}); wait "
            "for it to end, or stop it (its checkpoint is kept), then resume."
        ) from None
    file.seek(0)
    file.truncate(0)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    file.write(f"process {os.getpid()} on {socket.gethostname()}, since {started}")
    file.flush()
    return file

"""Writing files so that a reader never sees half of one; checking the directories they go to."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bdl.utils.arguments import instance


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary file beside ``path``, flushed to disk and renamed over it (``os.replace`` is
    atomic) when the block succeeds, removed when it fails: a crash or Ctrl-C at any moment
    leaves the previous ``path``, if any, intact. The file gets ``path``'s permissions, or the
    umask's for a new one."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def can_create_in(directory: Path) -> bool:
    """Whether a file can be created in ``directory``: tried, since permission bits do not tell
    (root passes ``os.access`` on a read-only mount or ``/proc``)."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            return True
    except OSError:
        return False


def _umask() -> int:
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


def directory_argument(directory: Any, name: str, holds: str) -> Path:
    """``directory`` as a Path, checked to be a path and not a file (it may not exist yet).

    Args:
        directory: the argument as given.
        name: the argument's name, for the messages.
        holds: what the directory is for, e.g. ``"the draws"``, for the messages.

    Returns:
        The directory's path.

    Raises:
        TypeError: ``directory`` is not a path.
        ValueError: ``directory`` is a file.
    """
    instance(directory, str | os.PathLike, f"{name} must be a directory path")
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name}={str(path)!r} is a file; give a directory for {holds}.")
    return path


def check_writable(path: Path, name: str) -> None:
    """Raises unless ``path``'s nearest existing directory (itself, or the closest parent) is
    writable, so that ``path`` can be created or written in.

    Args:
        path: the directory to write in.
        name: the argument's name, for the message.

    Raises:
        ValueError: the nearest existing directory is not writable.
    """
    parent = path if path.exists() else path.parent
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK):
        raise ValueError(f"{name}={str(path)!r}: {parent} is not writable.")

"""Writing files so that a reader never sees half of one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


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

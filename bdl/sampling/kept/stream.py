"""Draws written to disk part by part while sampling: ``bdl.sample(..., stream_to=DIR)``.

A stream directory holds

* ``draws-000001.npz``, …: the draws in the order they were taken, one part per write, each a
  samples file in the format of :meth:`bdl.Samples.save` (readable alone with
  :func:`bdl.load_samples`) holding the draws of its steps and the run's fields as they were
  when it was written;
* ``run.npz``: the run as a samples file with no draws (``steps_done``, ``interrupted``,
  ``diverged``, ``divergence_step``, ``adapted``, ``meta``, the test-set ``evaluation``) whose
  header also lists how many parts belong to the run. It is rewritten after every part and at
  the end, and is the stream's commit point.

Every file is written under a temporary name and renamed into place, each part before the index
that lists it, so a crash leaves the stream as it was at its last index: a part newer than the
index is not read, and the resumed run writes it again. :func:`load_stream` (also
``bdl.load_samples(DIR)``) joins the parts into one :class:`Samples`, bit for bit the draws an
in-memory run returns; :func:`iter_parts` yields them one at a time, so a run of any length can
be read in the memory of one part.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np

from bdl.sampling.kept.reading import read_samples
from bdl.sampling.kept.writing import SamplesFileError, save_npz
from bdl.sampling.samples import Samples
from bdl.utils.files import check_writable, directory_argument

INDEX = "run.npz"
FORMAT = "bdl.SampleStream"
#: a part is written when the draws waiting for it reach this size (or ``every`` seconds pass)
PART_BYTES = 64 * 2**20


def part_path(directory: Path, k: int) -> Path:
    return Path(directory) / f"draws-{k:06d}.npz"


def is_stream(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a directory a streamed run wrote."""
    return Path(path).is_dir() and (Path(path) / INDEX).is_file()


def check_directory(directory: Any, *, resuming: bool = False) -> Path:
    """``directory`` as a Path that can hold a stream, checked before anything is compiled."""
    path = directory_argument(directory, "stream_to", "the draws")
    if path.is_dir() and any(path.iterdir()) and not resuming:
        raise ValueError(
            f"stream_to={str(path)!r} is not empty; give a new or empty directory (a resumed "
            "run goes on streaming into the directory it streamed to)."
        )
    check_writable(path, "stream_to")
    return path


class StreamWriter:
    """Writes the draws the sampling loop collects as the parts of a stream directory, ``parts``
    of them already there (a resumed run's). A write that is cut (Ctrl-C) is done again with the
    same draws under the same part number, so it can be interrupted at any point. A part is due
    when the draws waiting for it reach :data:`PART_BYTES` or ``every`` seconds passed."""

    def __init__(self, directory: Path, every: float = 60.0, parts: int = 0):
        self.directory, self.every = Path(directory), every
        self.parts = parts
        self.last = time.perf_counter()

    def overdue(self) -> bool:
        return time.perf_counter() - self.last >= self.every

    def write(self, part: Samples | None, index: Samples) -> None:
        """Write ``part`` as the next part, then the ``index`` (the run's fields) listing it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        parts = self.parts
        if part is not None and part.num_draws:
            parts += 1
            save_part(part, part_path(self.directory, parts))
        write_index(self.directory, index, parts)
        self.parts = parts
        self.last = time.perf_counter()


def save_part(samples: Samples, path: Path) -> None:
    save_npz(dataclasses.replace(samples, evaluation=None), path)


def write_index(directory: Path, run: Samples, parts: int) -> None:
    """The run's fields (no draws) and the number of parts that belong to it, atomically."""
    save_npz(run, Path(directory) / INDEX, stream={"format": FORMAT, "parts": int(parts)})


def _index(directory: Path) -> tuple[Samples, int]:
    path = Path(directory) / INDEX
    run = read_samples(path)
    with np.load(path, allow_pickle=False) as f:
        header = json.loads(str(f["bdl_header"]))
    stream = header.get("stream") or {}
    if stream.get("format") != FORMAT or not isinstance(stream.get("parts"), int):
        raise SamplesFileError(
            f"{str(path)!r} is a samples file but not a stream's index (no part count); the "
            "directory was not written by bdl.sample(..., stream_to=...)."
        )
    return run, stream["parts"]


def load_run(directory: str | os.PathLike) -> Samples:
    """The streamed run's fields without its draws (``steps_done``, ``diverged``, ``adapted``,
    ``evaluation``, …; read in constant memory)."""
    return _index(Path(directory))[0]


def num_parts(directory: str | os.PathLike) -> int:
    return _index(Path(directory))[1]


def iter_parts(directory: str | os.PathLike, *, like: Any = None) -> Iterator[Samples]:
    """The stream's parts in order, one :class:`Samples` at a time (read when reached)."""
    directory = Path(directory)
    _, parts = _index(directory)
    for k in range(1, parts + 1):
        path = part_path(directory, k)
        if not path.is_file():
            raise SamplesFileError(
                f"{str(path)!r} is missing; the stream in {str(directory)!r} lists {parts} parts."
            )
        yield read_samples(path, like=like)


def load_stream(directory: str | os.PathLike, *, like: Any = None) -> Samples:
    """The whole streamed run as one :class:`Samples`: the parts' draws joined along the draw
    axis, the run's fields from the index."""
    run, _ = _index(Path(directory))
    parts = list(iter_parts(directory, like=like))
    if not parts:  # a run stopped before its first draw
        run = run if like is None else read_samples(Path(directory) / INDEX, like=like)
        return dataclasses.replace(run, kept_draws=True)

    def join(*a: np.ndarray) -> np.ndarray:
        return np.concatenate(a, axis=1)

    first = parts[0]
    return dataclasses.replace(
        run,
        positions=jax.tree.map(join, *(p.positions for p in parts)),
        extra=jax.tree.map(join, *(p.extra for p in parts)) if first.extra else {},
        info={k: join(*(p.info[k] for p in parts)) for k in first.info},
        steps=np.concatenate([np.asarray(p.steps) for p in parts]),
        kept_draws=True,
    )

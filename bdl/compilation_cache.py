"""A persistent XLA compilation cache, so a new process reuses the programs of earlier ones.

Compiling a sampling loop for a network dominates the first call of :func:`bdl.sample`
(about 5 s for the digits MLP on one CPU core, most of it in XLA). JAX can keep compiled
programs on disk, keyed by the program and the backend; with it, a later process that runs
the same model and kernel spends about 1.6 s on its first call instead (docs/benchmarks.md).
The cache holds compiled code only, never results, so it cannot change what a run computes.

The ``bdl`` command line enables it for every command (``BDL_XLA_CACHE=0`` turns it off).
Python users opt in with :func:`enable_compilation_cache`, because it sets a process-wide
JAX option.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

from bdl.utils.cache import cache_dir


def enable_compilation_cache(
    directory: str | os.PathLike[str] | None = None, *, min_compile_seconds: float = 0.1
) -> Path:
    """Keep XLA programs that took at least ``min_compile_seconds`` to compile in ``directory``.

    Args:
        directory: where to keep them; default ``<bdl cache>/xla`` (``$BDL_CACHE_DIR`` or
            ``~/.cache/bdl``).
        min_compile_seconds: programs that compile faster are not worth a disk read. The
            default, 0.1 s, keeps the checks' and the evaluation's programs (0.2–0.4 s each on a
            CPU, more on a GPU), which a threshold of 0.5 s compiled again in every process: the
            warm ``bdl sample mlp_digits`` command of [Benchmarks](../benchmarks.md) takes 0.8 s
            less.

    Returns:
        The directory in use. Call it before the first compilation of the process: JAX reads
            the option when it first compiles.
    """
    if not (isinstance(min_compile_seconds, int | float) and min_compile_seconds >= 0):
        raise ValueError(f"min_compile_seconds must be a number >= 0; got {min_compile_seconds!r}.")
    path = Path(directory) if directory is not None else cache_dir() / "xla"
    path.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    return path

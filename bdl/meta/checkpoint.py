"""Checkpoints of a meta-training run: meta-parameters, optimiser state and the loss history.

A run directory holds

* ``checkpoint.npz`` — the flattened pytree of everything needed to resume (meta-parameters,
  optimiser state, RNG key, replay buffers, …) written atomically (temp file + rename), so an
  interrupted write never corrupts the last good checkpoint;
* ``history.json`` — the config, the iteration reached, the wall time so far and one record per
  iteration (loss and whatever the trainer logs);
* ``<kernel>.npz`` — the final meta-parameters in the format of
  :func:`bdl.kernels.save_meta_params`, loadable with ``bdl.kernels.get(kernel, meta_params=path)``.

Resuming rebuilds the pytree from a template with the same structure (the trainer's freshly
initialised state), so no pickles are written or read.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np

PyTree = Any
CHECKPOINT = "checkpoint.npz"
HISTORY = "history.json"


@dataclass
class TrainingRun:
    """What a trainer returns: where it wrote, its loss history and timing."""

    kernel: str
    out_dir: Path
    meta_params_path: Path
    history: list[dict[str, float]] = field(default_factory=list)
    wall_time_s: float = 0.0
    iterations: int = 0


def save_checkpoint(
    out_dir: str | os.PathLike,
    state: PyTree,
    *,
    iteration: int,
    history: list[dict[str, float]],
    config: dict[str, Any],
    wall_time_s: float,
) -> Path:
    """Write ``state`` and the history to ``out_dir`` atomically; return the checkpoint path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    leaves = jax.tree.leaves(state)
    arrays = {f"leaf_{i:05d}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
    _atomic_write(out_dir / CHECKPOINT, lambda f: np.savez(f, **arrays), binary=True)
    record = {
        "iteration": int(iteration),
        "wall_time_s": float(wall_time_s),
        "config": config,
        "history": history,
    }
    _atomic_write(out_dir / HISTORY, lambda f: f.write(json.dumps(record, indent=1)), binary=False)
    return out_dir / CHECKPOINT


def load_checkpoint(
    out_dir: str | os.PathLike, template: PyTree
) -> tuple[PyTree, int, list[dict[str, float]], float] | None:
    """``(state, iteration, history, wall_time_s)`` from ``out_dir``, or ``None`` if there is none.

    ``template`` is a pytree with the structure, shapes and dtypes of the saved state; a mismatch
    (e.g. a changed config) raises ``ValueError`` naming the fix.
    """
    out_dir = Path(out_dir)
    if not (out_dir / CHECKPOINT).is_file() or not (out_dir / HISTORY).is_file():
        return None
    leaves, treedef = jax.tree.flatten(template)
    with np.load(out_dir / CHECKPOINT, allow_pickle=False) as data:
        saved = [data[f"leaf_{i:05d}"] for i in range(len(data.files))]
    if len(saved) != len(leaves) or any(
        np.shape(s) != np.shape(t) for s, t in zip(saved, leaves, strict=True)
    ):
        raise ValueError(
            f"the checkpoint in {out_dir} does not match this configuration; "
            "use a new --out directory or drop --resume."
        )
    state = jax.tree.unflatten(
        treedef,
        [np.asarray(s).astype(np.asarray(t).dtype) for s, t in zip(saved, leaves, strict=True)],
    )
    record = json.loads((out_dir / HISTORY).read_text())
    return state, int(record["iteration"]), list(record["history"]), float(record["wall_time_s"])


def _atomic_write(path: Path, write, *, binary: bool) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if binary else "w") as f:
            write(f)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)

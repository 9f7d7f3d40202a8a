"""The outer loop of every meta-trainer: checkpoints, resume, interrupts, history and outputs.

A trainer gives :func:`run` its config (a frozen dataclass, :mod:`bdl.meta.config`) and a
:class:`Loop`: the freshly initialised training state and the function taking it through one
iteration. A run directory then holds

* ``checkpoint.eqx`` — the training state (meta-parameters, optimiser state and whatever else the
  trainer carries), written with ``eqx.tree_serialise_leaves`` and read back against the fresh
  state as template, so no pickles are written or read;
* ``history.json`` — the config, the iteration reached, the wall time so far and one record per
  iteration (what the trainer logs, plus ``time_s``, the wall time at its end);
* ``<kernel>.npz`` — the final meta-parameters in the format of
  :func:`bdl.kernels.save_meta_params`, loadable with ``bdl.kernels.get(kernel, meta_params=path)``;
* ``loss.png`` — the loss curve.

Both checkpoint files are written atomically (temp file + rename) every ``checkpoint_every``
iterations, at the end and on Ctrl-C or SIGTERM, so an interrupted write never corrupts the last
good checkpoint. Resuming refuses a config that differs from the checkpointed one in a field that
changes the computation (every field but those declared ``compare=False``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import numpy as np

from bdl.kernels.elementwise_mlp import MetaParams, save_meta_params
from bdl.sampling.run.progress import Progress
from bdl.utils.figures import pyplot, save_figure

PyTree = Any
Record = dict[str, Any]
CHECKPOINT = "checkpoint.eqx"
HISTORY = "history.json"


@dataclass
class TrainingRun:
    """What a trainer returns: where it wrote, its loss history and timing."""

    kernel: str
    out_dir: Path
    meta_params_path: Path
    history: list[Record] = field(default_factory=list)
    wall_time_s: float = 0.0
    iterations: int = 0


@dataclass(frozen=True)
class Loop:
    """What is specific to a trainer.

    ``state`` is the freshly initialised training state (also the template checkpoints are read
    against); ``step(state, i)`` runs iteration ``i`` (0-based) and returns the new state and the
    iteration's record; ``meta_params(state)`` the meta-parameters to write; ``describe(history)``
    the progress line's text, shown every ``log_every`` iterations; ``stop(history)`` a message
    when training must stop (it is raised as ``FloatingPointError`` after a checkpoint);
    ``plot`` the keyword arguments of :func:`plot_history`; ``metadata`` what the
    meta-parameter file's header carries beside the networks (:func:`save_meta_params`).
    """

    state: PyTree
    step: Callable[[PyTree, int], tuple[PyTree, Record]]
    meta_params: Callable[[PyTree], MetaParams]
    describe: Callable[[list[Record]], str]
    plot: dict[str, Any]
    log_every: int = 1
    stop: Callable[[list[Record]], str | None] = lambda history: None
    metadata: dict[str, Any] = field(default_factory=dict)


def run(
    config: Any, loop: Loop, out_dir: str | os.PathLike, *, resume: bool, progress: bool
) -> tuple[TrainingRun, PyTree]:
    """Train from ``loop.state`` (or the checkpoint in ``out_dir`` with ``resume``) up to
    ``config.iterations``; write the run directory; return the run and the final state.

    A fresh run refuses a directory that holds a checkpoint; ``resume`` without one starts
    afresh. ``KeyboardInterrupt`` (Ctrl-C, and SIGTERM in the main thread) saves a checkpoint of
    the last finished iteration and propagates.
    """
    kernel, out = config.kernel, Path(out_dir)
    config_record = json.loads(json.dumps(dataclasses.asdict(config)))  # as history.json has it
    state, start, history, wall_before = loop.state, 0, [], 0.0
    if resume and (out / CHECKPOINT).is_file():
        state, saved = load_checkpoint(out, loop.state, config)
        start, history, wall_before = saved["iteration"], saved["history"], saved["wall_time_s"]
    elif (out / CHECKPOINT).is_file() or (out / "checkpoint.npz").is_file():
        raise ValueError(
            f"{out} holds a checkpoint of an older bdl (checkpoint.npz) that cannot be resumed; "
            "choose another --out directory."
            if resume
            else f"{out} already holds a meta-training checkpoint; pass --resume to continue it "
            "or choose another --out directory."
        )
    elif resume and progress:
        print(f"meta-train {kernel}: no checkpoint in {out}; starting afresh.", file=sys.stderr)

    meter = Progress(
        config.iterations,
        progress,
        f"meta-train {kernel}",
        unit="it",
        start=start,
        newline=not sys.stderr.isatty(),
    )
    t0 = time.perf_counter()

    def elapsed() -> float:
        return wall_before + time.perf_counter() - t0

    def checkpoint() -> None:
        record = {"iteration": it, "wall_time_s": elapsed(), "config": config_record}
        save_checkpoint(out, state, {**record, "history": history})

    it = start
    previous_handler = _sigterm_as_interrupt()
    try:
        while it < config.iterations:
            new_state, record = loop.step(state, it)
            history.append({"iteration": it + 1, **record, "time_s": elapsed()})
            state, it = new_state, it + 1  # (an interrupt before this line drops the record)
            if it % loop.log_every == 0 or it == config.iterations:
                meter.update(it, force=True, suffix=loop.describe(history))
            message = loop.stop(history)
            if message is not None or it % config.checkpoint_every == 0:
                checkpoint()
            if message is not None:
                raise FloatingPointError(f"meta-train {kernel}: {message} (checkpoint saved).")
    except KeyboardInterrupt:
        del history[it:]  # the records of finished iterations only
        meter.close(it)
        checkpoint()
        print(
            f"meta-train {kernel}: interrupted at iteration {it}; checkpoint saved in {out} "
            "(continue with --resume).",
            file=sys.stderr,
        )
        raise
    finally:
        if previous_handler is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, previous_handler)
    meter.close(it)
    checkpoint()
    name = getattr(config, "meta_params_name", kernel)  # e.g. a kernel variant's own file
    path = save_meta_params(
        out / f"{name}.npz", jax.device_get(loop.meta_params(state)), metadata=loop.metadata
    )
    plot_history(history, out / "loss.png", **loop.plot)
    result = TrainingRun(kernel, out, path, history, elapsed(), it)
    return result, state


# ---------------------------------------------------------------------------- checkpoints
def save_checkpoint(out_dir: Path, state: PyTree, record: dict[str, Any]) -> None:
    """Write ``state`` and ``record`` (the contents of ``history.json``) atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _atomic_write(out_dir / CHECKPOINT, "wb", lambda f: eqx.tree_serialise_leaves(f, state))
    _atomic_write(out_dir / HISTORY, "w", lambda f: f.write(json.dumps(record, indent=1)))


def load_checkpoint(out_dir: Path, template: PyTree, config: Any) -> tuple[PyTree, dict[str, Any]]:
    """``(state, history.json's record)`` from ``out_dir``. ``template`` has the structure, shapes
    and dtypes of the saved state; a ``config`` that differs from the saved one in a field that
    changes the computation, or a state that does not match, raises ``ValueError``."""
    record = json.loads((out_dir / HISTORY).read_text())
    current = json.loads(json.dumps(dataclasses.asdict(config)))
    fields = dataclasses.fields(config)
    changed = sorted(
        f.name for f in fields if f.compare and record["config"].get(f.name) != current[f.name]
    )
    if changed:
        free = sorted(f.name for f in fields if not f.compare)
        raise ValueError(
            f"cannot resume the run in {out_dir}: config keys {changed} differ from the "
            f"checkpointed run (only {free} may change); use a new --out directory or drop "
            "--resume."
        )
    try:
        return eqx.tree_deserialise_leaves(out_dir / CHECKPOINT, template), record
    except (RuntimeError, ValueError, EOFError) as err:
        raise ValueError(
            f"the checkpoint in {out_dir} does not match this configuration ({err}); "
            "use a new --out directory or drop --resume."
        ) from None


def _atomic_write(path: Path, mode: str, write: Callable[[Any], Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _sigterm_as_interrupt() -> Any:
    """Treat SIGTERM like Ctrl-C (checkpoint, then stop); only possible in the main thread."""
    try:
        return signal.signal(signal.SIGTERM, signal.default_int_handler)
    except ValueError:  # not the main thread
        return None


# ---------------------------------------------------------------------------- the loss curve
def plot_history(
    history: list[Record],
    path: Path,
    *,
    series: dict[str, str],
    ylabel: str,
    title: str,
    log: bool = False,
    difference: tuple[str, str, str] | None = None,
) -> Path:
    """The loss curve as a PNG: each ``series`` (record key → label) per iteration with its
    running median; with ``difference = (a, b, ylabel)`` a second panel shows a − b per iteration
    (points outside its 2–98 % range clipped to the axis, marked)."""
    plt = pyplot()

    fig, axes = plt.subplots(1, 2 if difference else 1, figsize=(11 if difference else 7, 4))
    axes = np.atleast_1d(axes)
    its = np.array([h["iteration"] for h in history])
    w = max(1, min(25, len(its) // 5))

    def running_median(x: np.ndarray) -> np.ndarray:
        return np.array([np.median(x[max(0, i - w + 1) : i + 1]) for i in range(len(x))])

    for i, (key, label) in enumerate(series.items()):
        y = np.array([h[key] for h in history])
        axes[0].plot(its, y, ".", alpha=0.35, color=f"C{i}")
        axes[0].plot(its, running_median(y), color=f"C{i}", label=f"{label}, median of {w}")
    axes[0].set(xlabel="meta-iteration", ylabel=ylabel, yscale="log" if log else "linear")
    if difference and len(its):
        a, b, label = difference
        d = np.array([h[a] - h[b] for h in history])
        lo, hi = np.quantile(d, [0.02, 0.98]) if len(d) > 10 else (d.min(), d.max())
        pad = 0.15 * max(hi - lo, 1e-3)
        lo, hi = min(lo - pad, -pad), max(hi + pad, pad)
        out = (d < lo) | (d > hi)
        axes[1].plot(its[~out], d[~out], ".", alpha=0.4, color="C2")
        if out.any():
            axes[1].plot(its[out], np.clip(d[out], lo, hi), "^", color="C3", label="clipped")
        axes[1].plot(its, running_median(d), color="C2", label=f"median of {w}")
        axes[1].axhline(0.0, color="k", lw=0.8)
        axes[1].set(xlabel="meta-iteration", ylabel=label, ylim=(lo, hi))
    for ax in axes:
        ax.grid(alpha=0.3, which="both")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    return save_figure(fig, path, title, dpi=110)

"""A run's checkpoints: where they go, what a resumed run must match, and when they are written.

The file format is :mod:`bdl.sampling.checkpoint`'s. Here: the directory a process checkpoints
into (:func:`open_directory`), the settings a resumed run takes from its checkpoint
(:func:`resumed_settings`) and what it must share with the run that wrote it
(:func:`check_same_run`), and :class:`Checkpointer`, which writes the loop's state at most every
``every`` seconds with what the run keeps (:class:`bdl.sampling.keep.Keep`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import jax

from bdl.sampling import checkpoint as checkpoint_io
from bdl.sampling.carry import Chains
from bdl.sampling.keep import Keep
from bdl.sampling.layout import Layout


def own(directory: Path) -> Path:
    """The checkpoint directory of this process: ``process-I`` inside the given one when the run
    has several processes (each keeps the state of its own chains)."""
    if jax.process_count() == 1:
        return directory
    return directory / f"process-{jax.process_index()}"


def open_directory(
    checkpoint: str | os.PathLike | None, resume: str | os.PathLike | None
) -> tuple[Path | None, checkpoint_io.Checkpoint | None]:
    """The directory this run checkpoints into (``None``: none) and, when resuming, the
    checkpoint read from it; checked before anything compiles."""
    if resume is not None:
        directory = own(checkpoint_io.check_directory(resume, "resume"))
        if checkpoint is not None and own(Path(checkpoint)) != directory:
            raise ValueError(
                f"resume={str(resume)!r} and checkpoint={str(checkpoint)!r}: a resumed run goes "
                "on checkpointing into the directory it resumes; leave checkpoint out."
            )
        return directory, checkpoint_io.read(directory)
    if checkpoint is None:
        return None, None
    directory = own(checkpoint_io.check_directory(checkpoint, "checkpoint"))
    if checkpoint_io.exists(directory):
        raise ValueError(
            f"checkpoint={str(checkpoint)!r} already holds a run; pass resume= to continue "
            "it, or give an empty directory."
        )
    return directory, None


def resumed_settings(
    saved: checkpoint_io.Checkpoint,
    directory: Path,
    num_steps: int | None,
    burn_in: int | None,
    thin: int | None,
    num_chains: int | None,
    seed: int | None,
) -> tuple[int, int, int, int, int]:
    """The run's settings from the checkpoint; a given value that differs is an error."""
    settings = saved.header.get("settings", {})
    given = {"burn_in": burn_in, "thin": thin, "num_chains": num_chains, "seed": seed}
    for name, value in given.items():
        if value is not None and value != settings.get(name):
            raise ValueError(
                f"resume: {name}={value!r} conflicts with the checkpoint in {directory}, which "
                f"has {name}={settings.get(name)!r}; leave {name} out to go on with the run."
            )
    num_steps = settings["num_steps"] if num_steps is None else num_steps
    if isinstance(num_steps, int) and num_steps < saved.step:
        raise ValueError(
            f"resume: num_steps={num_steps} is smaller than the {saved.step} steps the "
            f"checkpoint in {directory} has done; give at least {saved.step}."
        )
    return (
        num_steps,
        settings["burn_in"],
        settings["thin"],
        settings["num_chains"],
        settings["seed"],
    )


def check_same_run(saved: dict, current: dict, directory: Path, layout: Layout) -> None:
    """A checkpoint goes on only with the model and kernel it was written by (headers carry the
    run's record and the kernel's fingerprint), and with the same chains (a process of a
    multi-process run resumes its own block)."""
    block = (saved.get("layout") or {}).get("chains", [0, layout.num_chains])
    if list(block) != [layout.start, layout.stop]:
        raise ValueError(
            f"resume: the checkpoint in {directory} holds chains {block[0]} to {block[1] - 1}, "
            f"but this process runs chains {layout.start} to {layout.stop - 1}; resume with "
            "the number of processes the run was started with."
        )
    saved_kernel = (saved.get("kernel") or {}).get("name")
    checks = (
        ("model", saved.get("model"), current["model"]),
        ("kernel", saved_kernel, current["kernel"]["name"]),
        (None, saved.get("kernel_fingerprint"), current["kernel_fingerprint"]),
    )
    for what, was, now in checks:
        if was != now:
            written = f"{what} {was!r}" if what else "another kernel configuration"
            raise ValueError(
                f"resume: the checkpoint in {directory} was written by {written}, not "
                f"{f'{now!r}' if what else 'this one'}; pass the model and kernel (with the same "
                "hyper-parameters) it was started with."
            )


class Checkpointer:
    """Writes the loop's state to ``directory`` at most every ``every`` seconds: the chains and
    the step, the draws kept since the last write as a new part, and what the run keeps adds
    (the stream's part count, the running evaluation's arrays). ``parts``: the parts already
    there (a resumed run's)."""

    def __init__(self, directory: Path, every: float, header: dict, parts: int = 0) -> None:
        self.directory, self.every, self.header = directory, every, header
        self.parts = parts
        self.last = time.perf_counter()

    def due(self) -> bool:
        return time.perf_counter() - self.last >= self.every

    def save(self, t: int, chains: Chains, keep: Keep) -> None:
        header = {**self.header, **keep.checkpoint_header()}
        self.parts = checkpoint_io.write(
            self.directory, chains, t, keep.new_part(), self.parts, header,
            keep.evaluation_arrays(),
        )  # fmt: skip
        self.last = time.perf_counter()


def restore(template: Any, saved: checkpoint_io.Checkpoint, directory: Path) -> Any:
    """The chains stored in ``saved``, shaped like ``template`` (checked leaf by leaf)."""
    return checkpoint_io.restore(template, saved.carry, directory)

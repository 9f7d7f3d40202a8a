"""A run's checkpoints: where they go, what a resumed run must match, and when they are written.

The file format is :mod:`bdl.sampling.checkpoints.state`'s. Here: the directory a process
checkpoints into (:func:`open_directory`), the settings a resumed run takes from its checkpoint
(:func:`resumed_settings`) and what it must share with the run that wrote it
(:func:`check_same_run`, :func:`target_record`), and :class:`Checkpointer`, which writes the
loop's state at most every ``every`` seconds with what the run keeps
(:class:`bdl.sampling.kept.keeper.Keep`). The directory is locked for the run
(:mod:`bdl.sampling.checkpoints.lock`).
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from typing import Any

import jax

from bdl.compile import fingerprint
from bdl.compile.target import Target
from bdl.sampling.checkpoints import lock as checkpoint_lock
from bdl.sampling.checkpoints import state as checkpoint_io
from bdl.sampling.kept.keeper import Keep
from bdl.sampling.run.carry import Chains
from bdl.sampling.run.layout import Layout
from bdl.utils.dtypes import float_dtype


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
    checkpoint read from it; checked before anything compiles. The directory is locked
    (:func:`bdl.sampling.checkpoints.lock.acquire`) before its checkpoint is read."""
    if resume is not None:
        directory = own(checkpoint_io.check_directory(resume, "resume"))
        if checkpoint is not None and own(Path(checkpoint)) != directory:
            raise ValueError(
                f"resume={str(resume)!r} and checkpoint={str(checkpoint)!r}: a resumed run goes "
                "on checkpointing into the directory it resumes; leave checkpoint out."
            )
        if directory.is_dir():  # a missing one is reported by read()
            checkpoint_lock.acquire(directory)
        return directory, checkpoint_io.read(directory)
    if checkpoint is None:
        return None, None
    directory = own(checkpoint_io.check_directory(checkpoint, "checkpoint"))
    checkpoint_lock.acquire(directory)
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


def target_record(target: Target, saved: dict | None, directory: Path) -> dict:
    """What a checkpoint records of the target (:mod:`bdl.compile.fingerprint`): its
    declarations and its energy at fixed points. When resuming (``saved``: the checkpoint's
    header), a part that changed is an error naming it, raised before the sampler compiles:
    the declarations are compared before the energy is evaluated. A checkpoint of a bdl that
    recorded none resumes with a warning."""
    current = fingerprint.declarations(target)
    was = None if saved is None else saved.get("target")
    precision = float_dtype().name
    if was is not None and was.get("precision", precision) != precision:
        written = was["precision"]
        raise ValueError(
            f"resume: the checkpoint in {directory} was written in {written} and this process "
            f"runs in {precision} (JAX's 64-bit mode is {'on' if precision == 'float64' else 'off'}"
            "): its states cannot go on in another precision. Resume it with JAX_ENABLE_X64="
            f"{'1' if written == 'float64' else '0'} (docs/precision.md), or start a new run in "
            "another directory."
        )
    if saved is not None and was is None:
        warnings.warn(
            f"resume: the checkpoint in {directory} was written by bdl "
            f"{saved.get('bdl_version', '?')}, which did not record the model: only its name, "
            "kernel and shapes can be checked. Resume it with the model it was started with; "
            "the next checkpoint records it.",
            UserWarning,
            stacklevel=4,  # the caller of bdl.sample (past sample and its lock's wrapper)
        )
    if was is not None:
        changes = fingerprint.declaration_changes(was.get("declarations", {}), current)
        if changes:
            _refuse(
                [part for part, _ in changes], "; ".join(f"{p}: {c}" for p, c in changes), directory
            )
    energies = fingerprint.energies(target)
    if was is not None:
        change = fingerprint.energy_changes(was.get("energies", []), energies)
        if change is not None:
            why = "with the same declarations: the network's, likelihood's or prior's code changed"
            _refuse(["energy"], f"{change}, {why}", directory)
    return {"declarations": current, "energies": energies, "precision": precision}


def _refuse(parts: list[str], details: str, directory: Path) -> None:
    named = [f"the model's {p}" if p == "energy" else f"the {p}" for p in parts]
    listed = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    raise ValueError(
        f"resume: {listed} changed since the checkpoint in {directory} was written ({details}); "
        "pass the model the run was started with, or start a new run in another directory."
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
        """Write a checkpoint. Interrupted half-way (Ctrl-C or SIGTERM arrive between any two
        steps of it), the new part is not taken as written: no state lists it yet, so the next
        save writes it again rather than leaving its draws out."""
        header = {**self.header, **keep.checkpoint_header()}
        written = keep.checkpointed
        try:
            self.parts = checkpoint_io.write(
                self.directory, chains, t, keep.new_part(), self.parts, header,
                keep.evaluation_arrays(),
            )  # fmt: skip
        except BaseException:
            keep.checkpointed = written
            raise
        self.last = time.perf_counter()


def restore(template: Any, saved: checkpoint_io.Checkpoint, directory: Path) -> Any:
    """The chains stored in ``saved``, shaped like ``template`` (checked leaf by leaf)."""
    return checkpoint_io.restore(template, saved.carry, directory)

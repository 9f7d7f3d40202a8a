"""``bdl.sample``: run any kernel on a compiled target, chains under ``vmap``, steps in XLA loops.

The whole chain runs inside one jitted function per chunk of draws (``lax.fori_loop`` over steps,
minibatches drawn on device), so there is no Python loop over steps. Draws are streamed to the
host after every chunk: memory grows with the number of kept draws, never with the number of
steps. The step counter is shared by all chains and every random key is ``fold_in(chain_key, t)``,
so results do not depend on the chunking and the same seed gives bitwise-identical draws.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from bdl.compile.target import Target
from bdl.evaluation.curve import curve_rows, evaluation_result
from bdl.evaluation.running import Accumulator, RunningBMA, final_metrics, update_chunk
from bdl.kernels.base import Info, Kernel
from bdl.kernels.blocks import DenseMass
from bdl.kernels.recipe_kernel import RecipeState
from bdl.sampling import checkpoint as checkpoint_io
from bdl.sampling import warmup
from bdl.sampling.chain import run_chain
from bdl.sampling.checks import check_run, check_schedules, check_start
from bdl.sampling.layout import CHAIN, Layout, resolve
from bdl.sampling.progress import Progress
from bdl.sampling.provenance import run_meta
from bdl.sampling.samples import DivergenceWarning, Samples
from bdl.sampling.stream import StreamWriter
from bdl.sampling.stream import check_directory as check_stream
from bdl.utils import compile_events
from bdl.utils.convolutions import canonical_convolutions, convolves_on_cpu
from bdl.utils.identity_map import PairMemo
from bdl.utils.owner_jit import owner_jit
from bdl.utils.rng import initialisation_draws
from bdl.utils.trees import tree_size

PyTree = Any
_CHUNK_BYTES = 128 * 2**20  # host-transfer buffer per chunk
_MAX_CHUNK_DRAWS = 1000


def sample(
    target: Target,
    kernel: Kernel,
    *,
    num_steps: int | None = None,
    burn_in: int | None = None,
    thin: int | None = None,
    num_chains: int | None = None,
    seed: int | None = None,
    init: Any = "auto",
    progress: bool | None = None,
    devices: int | Sequence[jax.Device] | None = None,
    mesh: Mesh | None = None,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: float = 60.0,
    resume: str | os.PathLike | None = None,
    keep_draws: bool | None = None,
    evaluate: Any = None,
    stream_to: str | os.PathLike | None = None,
) -> Samples:
    """Draw samples of ``target`` with ``kernel``.

    Args:
        target: a compiled model or potential (``bdl.compile``).
        kernel: a kernel object, e.g. ``bdl.kernels.get("sghmc", step_size=1e-3)``.
        num_steps: total steps per chain, burn-in included (with ``resume``: default the
            checkpoint's; larger extends a finished run).
        burn_in: steps discarded before collection starts (default 0).
        thin: keep the state after every ``thin``-th step after burn-in (default 1).
        num_chains: independent chains, run under ``vmap`` (default 1).
        seed: the run's seed (default 0); the same seed gives bitwise-identical draws.
        init: initial positions (see ``target.init_positions``).
        progress: print steps/s and ETA to stderr (default: when stderr is a terminal).
        checkpoint: a directory to keep the run's state in (docs/saving.md), written every
            ``checkpoint_every`` seconds, at the end and when the run is interrupted (with
            several processes, each writes ``process-I`` inside it).
        checkpoint_every: seconds between checkpoints (0: after every chunk of about 0.5 s).
        resume: a checkpoint directory to continue from (and to go on checkpointing into);
            ``burn_in``, ``thin``, ``num_chains`` and ``seed`` are the checkpoint's, and giving
            a different value is an error. The draws are bitwise those of an uninterrupted run.
        devices: the devices to split the chains over: a number (the first of
            ``jax.local_devices()``) or a list of devices. Default: one device for a single
            chain, else every local device; ``num_chains`` must be a multiple of their count.
            The draws are bitwise those of one device (docs/scaling.md).
        mesh: a ``jax.sharding.Mesh`` with a ``chain`` axis and/or a ``data`` axis
            (``bdl.make_mesh(chains=2, data=2)``): the data axis splits each minibatch over its
            devices, which average their full-data-scale energies and gradients; the draws then
            agree with one device's to float reassociation. Give ``devices`` or ``mesh``.

            With several processes (``jax.distributed``), each runs ``num_chains / processes``
            consecutive chains on its own devices and returns those (``bdl.merge_samples``
            joins them).
        keep_draws: hold the draws in memory and return them (default ``True``; with
            ``resume``, the checkpoint's). ``False`` keeps none: the run's memory does not grow
            with the number of draws; score them with ``evaluate`` or write them with
            ``stream_to``.
        evaluate: score the draws on a test set as they are produced (docs/evaluation.md):
            ``True`` for the model's test split, or a :class:`bdl.evaluation.RunningBMA`. The
            result, ``samples.evaluation``, holds the BMA's metrics and the BMA-versus-draws
            curve. With ``resume``, pass the same evaluation again.
        stream_to: a directory to write the draws to, part by part, as they are produced
            (:mod:`bdl.sampling.stream`; read back with ``bdl.load_samples(DIR)``). With
            ``resume``, default the checkpoint's.

    Returns:
        :class:`Samples` with ``(chain, draw)`` axes. Ctrl-C (or SIGTERM) stops the run within
        about a second and returns what was collected, with ``interrupted=True``; the
        checkpoint, if any, is written first.
    """
    if not isinstance(target, Target):
        raise TypeError(
            f"sample() needs a compiled target from bdl.compile(...); got {type(target).__name__}."
        )
    if not isinstance(kernel, Kernel):
        raise TypeError(
            "sample(kernel=...) must be a bdl kernel, e.g. "
            f"bdl.kernels.get('sghmc', step_size=1e-3); got {type(kernel).__name__}."
        )
    seed = check_start(
        target,
        kernel,
        dict(seed=seed, init=init, progress=progress, num_chains=num_chains, resume=resume),
    ).get("seed")
    saved = None
    if resume is not None:
        directory = _own(checkpoint_io.check_directory(resume, "resume"))
        if checkpoint is not None and _own(Path(checkpoint)) != directory:
            raise ValueError(
                f"resume={str(resume)!r} and checkpoint={str(checkpoint)!r}: a resumed run goes "
                "on checkpointing into the directory it resumes; leave checkpoint out."
            )
        saved = checkpoint_io.read(directory)
        num_steps, burn_in, thin, num_chains, seed = _resumed_settings(
            saved, directory, num_steps, burn_in, thin, num_chains, seed
        )
    elif checkpoint is not None:
        directory = _own(checkpoint_io.check_directory(checkpoint, "checkpoint"))
        if checkpoint_io.exists(directory):
            raise ValueError(
                f"checkpoint={str(checkpoint)!r} already holds a run; pass resume= to continue "
                "it, or give an empty directory."
            )
    else:
        directory = None
    if num_steps is None:
        raise TypeError("sample() needs num_steps (total steps per chain, burn-in included).")
    burn_in = 0 if burn_in is None else burn_in
    thin = 1 if thin is None else thin
    num_chains = 1 if num_chains is None else num_chains
    seed = 0 if seed is None else seed
    num_draws = check_run(num_steps, burn_in, thin, num_chains)
    layout = resolve(target, num_chains, devices, mesh)
    streaming = _streaming_settings(
        saved, directory, keep_draws, evaluate, stream_to, target, num_chains
    )
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int | float):
        raise TypeError(f"checkpoint_every must be seconds (a float); got {checkpoint_every!r}.")
    if not checkpoint_every >= 0:
        raise ValueError(f"checkpoint_every must be >= 0 seconds; got {checkpoint_every}.")
    user_kernel, kernel = kernel, kernel.bind(target)
    adapting = warmup.needs_adaptation(kernel)
    check_schedules(target, kernel, num_steps, adapting)
    schedule = warmup.windows(burn_in) if adapting else []
    progress = sys.stderr.isatty() if progress is None else progress
    meta = run_meta(
        target,
        kernel,
        num_steps=num_steps,
        burn_in=burn_in,
        thin=thin,
        num_chains=num_chains,
        seed=seed,
        init=init,
    )
    if layout.mesh is not None or layout.processes > 1:
        meta["layout"] = layout.describe()
    header = None  # what a checkpoint records; the kernel's digest costs a pretty-print
    if directory is not None:
        header = {
            **meta,
            "kernel_fingerprint": checkpoint_io.fingerprint(kernel),
            "streaming": streaming.record(),
        }
    if saved is not None:
        _check_same_run(saved.header, header, directory, layout)

    key = jax.random.key(seed)  # warm-up draws from its own stream (_warmup_key)
    # every chain's start and keys come from the seed alone, before the chains are split over
    # processes and devices: a chain's draws do not depend on where it runs
    _, chains, chain_keys = _setup(target, kernel, key, num_chains, init)
    chains, chain_keys = layout.place(chains), layout.place(chain_keys)
    if adapting and saved is None:
        at, gather = _adaptation_layout(layout)
        chains = layout.shard(_start_adaptation(target, kernel, gather(chains), key, at))
    elif adapting:
        chains = jax.eval_shape(lambda: _start_adaptation(target, kernel, chains, key, layout))

    draw_bytes = 4 * layout.local_chains * _draw_size(user_kernel, target, kernel, chains.states)
    # the buffer length is static: a power of two, so runs of similar length share a compilation
    cap = max(1, min(_MAX_CHUNK_DRAWS, _CHUNK_BYTES // max(draw_bytes, 1)))
    chunk = int(min(cap, 1 << (num_draws - 1).bit_length()))

    scoring = streaming.accumulator
    loop = _Loop(chains, 0, (), None if scoring is None else scoring.init())
    parts = 0
    if saved is not None:
        out_shape = jax.eval_shape(
            lambda: _run_chunk(
                target, kernel, chains, chain_keys, *_ints(0, 0, 1), chunk, False, False, layout
            )[1]
        )
        treedef = jax.tree.structure(out_shape)
        collected = tuple(jax.tree.unflatten(treedef, leaves) for leaves in saved.parts)
        restored = layout.shard(checkpoint_io.restore(chains, saved.carry, directory))
        loop, parts = _Loop(restored, saved.step, collected, loop.bma), len(collected)
        if scoring is not None:
            loop = loop._replace(
                bma=checkpoint_io.restore(loop.bma, saved.evaluation[:-1], directory),
                curve=(saved.evaluation[-1],),
            )
        loop = loop._replace(chunks=len(collected))

    def index(loop: _Loop, interrupted: bool = False) -> Samples:
        return _assemble([], kernel, loop.t, interrupted, loop.chains, meta, kept=False)

    stream = None
    if streaming.stream_to is not None:
        written = saved.header["streaming"]["stream_parts"] if saved is not None else 0
        stream = StreamWriter(streaming.stream_to, checkpoint_every, written, loop.chunks)
        stream.write(None, index(loop), loop.chunks)  # a resumed stream lists the saved parts

    def flush(loop: _Loop, interrupted: bool = False) -> _Loop:
        """Write the draws the stream has not written yet; without ``keep_draws``, drop them."""
        pending = _pending(loop, stream.written)
        part = None
        if pending:
            part = _assemble(pending, kernel, loop.t, interrupted, loop.chains, meta)
        stream.write(part, index(loop, interrupted), loop.chunks)
        if not streaming.keep_draws:
            loop = loop._replace(collected=())
        return loop

    def checkpoint_extra(loop: _Loop) -> tuple[dict, list | None]:
        extra = {
            "streaming": {
                **streaming.record(),
                "stream_parts": None if stream is None else stream.parts,
            }
        }
        if scoring is None:
            return extra, None
        return extra, [*checkpoint_io.host_leaves(loop.bma), _curve_array(loop, scoring)]

    writer = (
        None
        if directory is None
        else _Checkpointer(
            directory,
            checkpoint_every,
            header,
            parts,
            len(loop.collected),
            streaming.keep_draws,
            checkpoint_extra,
        )
    )

    end = burn_in + num_draws * thin
    points = _adaptation_points(schedule)
    boundaries = sorted(points)
    sizer = _ChunkSizer((id(target), kernel.name, num_chains, layout))
    meter = Progress(num_steps, progress, label=kernel.name, start=loop.t)
    interrupted = False
    keep_host = streaming.keep_draws or stream is not None
    try:
        with _termination_as_interrupt():
            while loop.t < end:
                loop = _advance(
                    target, kernel, loop, chain_keys, key, chunk, sizer,
                    burn_in, thin, end, points, boundaries, layout, scoring, keep_host,
                )  # fmt: skip
                meter.update(loop.t)
                if stream is not None and stream.due(_pending(loop, stream.written)):
                    loop = flush(loop)
                if writer is not None and writer.due():
                    loop = flush(loop) if stream is not None else loop
                    writer.save(loop)
            if stream is not None:
                loop = flush(loop)
            if writer is not None:
                writer.save(loop)
    except KeyboardInterrupt:
        interrupted = True
        if stream is not None:
            loop = flush(loop, interrupted=True)
        if writer is not None:
            writer.save(loop)
        warnings.warn(
            f"sampling interrupted after {loop.t} steps; returning the draws collected so far"
            + (f" (checkpoint in {directory})." if writer is not None else "."),
            stacklevel=2,
        )
    finally:
        meter.close(loop.t)
    evaluation = None
    if scoring is not None:
        healthy = ~loop.chains.status.diverged
        final = np.asarray(final_metrics(scoring, loop.bma, healthy))
        evaluation = evaluation_result(scoring.names, loop.curve, final, scoring.n)
    kept = list(loop.collected) if streaming.keep_draws else []
    result = _assemble(
        kept, kernel, loop.t, interrupted, loop.chains, meta, evaluation, streaming.keep_draws
    )
    if stream is not None:  # the index's last version: the final status and evaluation
        last = _assemble([], kernel, loop.t, interrupted, loop.chains, meta, evaluation, False)
        stream.write(None, last, loop.chunks)
    if np.any(result.diverged):
        warnings.warn(
            result.divergence_report() + " samples.flat() and the predictive use the valid draws; "
            "docs/troubleshooting.md says what to change.",
            DivergenceWarning,
            stacklevel=2,
        )
    return result


def _pending(loop: _Loop, written: int) -> list:
    """The chunks of draws (counted from the run's start) after the first ``written``."""
    n = loop.chunks - written
    return list(loop.collected[len(loop.collected) - n :]) if n > 0 else []


def _curve_array(loop: _Loop, scoring: Accumulator) -> np.ndarray:
    rows = [np.zeros((0, 3 + len(scoring.names)), np.float64), *loop.curve]
    return np.concatenate(rows)


class _Streaming(NamedTuple):
    """What a run keeps of its draws and where: in memory, scored, written to a directory."""

    keep_draws: bool
    accumulator: Accumulator | None
    stream_to: Path | None

    def record(self) -> dict:
        return {
            "keep_draws": self.keep_draws,
            "evaluate": None if self.accumulator is None else self.accumulator.fingerprint(),
            "stream_to": None if self.stream_to is None else str(self.stream_to),
        }


def _streaming_settings(
    saved: checkpoint_io.Checkpoint | None,
    directory: Path | None,
    keep_draws: Any,
    evaluate: Any,
    stream_to: Any,
    target: Target,
    num_chains: int,
) -> _Streaming:
    """``keep_draws``, ``evaluate`` and ``stream_to`` checked (before any compilation); a
    resumed run takes the checkpoint's, and a different one is an error."""
    was = (saved.header.get("streaming") if saved is not None else None) or {}
    if saved is not None:
        keep_draws = was.get("keep_draws", True) if keep_draws is None else keep_draws
        if stream_to is None:
            stream_to = was.get("stream_to")
    keep_draws = True if keep_draws is None else keep_draws
    if not isinstance(keep_draws, bool):
        raise TypeError(f"keep_draws must be True or False; got {keep_draws!r}.")
    if evaluate is None or evaluate is False:
        spec = None
    elif evaluate is True:
        spec = RunningBMA()
    elif isinstance(evaluate, RunningBMA):
        spec = evaluate
    else:
        raise TypeError(
            "evaluate must be True (the model's test split) or a "
            f"bdl.evaluation.RunningBMA(x, y, batch_size=...); got {type(evaluate).__name__}."
        )
    accumulator = None if spec is None else spec.bind(target, num_chains)
    path = None if stream_to is None else check_stream(stream_to, resuming=saved is not None)
    if not keep_draws and spec is None and path is None:
        raise ValueError(
            "keep_draws=False keeps no draws, so the run would leave nothing: pass evaluate=True "
            "to score them on the test set as they are produced, or stream_to=DIR to write them "
            "to disk."
        )
    streaming = _Streaming(keep_draws, accumulator, path)
    if saved is not None:
        now = streaming.record()
        for name in ("keep_draws", "evaluate", "stream_to"):
            before = was.get(name, True if name == "keep_draws" else None)
            if before != now[name]:
                hint = (
                    "pass the same evaluate= (test data and settings) again"
                    if name == "evaluate"
                    else f"leave {name} out"
                )
                raise ValueError(
                    f"resume: the run in {directory} was started with {name}="
                    f"{_shown(name, before)}, not {_shown(name, now[name])}; {hint} to go on "
                    "with it."
                )
    return streaming


def _shown(name: str, value: Any) -> str:
    if name == "evaluate":
        return "None" if value is None else "an evaluation of other test data or settings"
    return repr(value)


def _own(directory: Path) -> Path:
    """The checkpoint directory of this process: ``process-I`` inside the given one when the run
    has several processes (each keeps the state of its own chains)."""
    if jax.process_count() == 1:
        return directory
    return directory / f"process-{jax.process_index()}"


class _Loop(NamedTuple):
    """The sampling loop's progress, replaced in one assignment so that an interruption never
    sees the carry, the step counter and the draws out of step with one another."""

    chains: Any
    t: int
    collected: tuple
    bma: Any = None  # the running BMA's sums (on the device), when evaluating
    curve: tuple = ()  # its curve points, one host array per chunk of draws
    chunks: int = 0  # chunks of draws produced since the run's start


def _advance(
    target: Target,
    kernel: Kernel,
    loop: _Loop,
    chain_keys: jax.Array,
    key: jax.Array,
    chunk: int,
    sizer: _ChunkSizer,
    burn_in: int,
    thin: int,
    end: int,
    points: dict[int, tuple[bool, bool, bool]],
    boundaries: list[int],
    layout: Layout,
    scoring: Accumulator | None = None,
    keep_host: bool = True,
) -> _Loop:
    """One call of the compiled loop, about :data:`_ChunkSizer.TARGET_SECONDS` long: burn-in up
    to the next adaptation point (where warm-up then adapts), or whole draws, or part of a draw
    whose ``thin`` steps take longer than that. Every call boundary is invisible in the draws."""
    t, budget = loop.t, sizer.budget()
    started, events = time.perf_counter(), compile_events.count()
    if t < burn_in:
        warming = bool(boundaries) and t < boundaries[-1]  # boundaries: warm-up's only
        stop = boundaries[bisect.bisect_right(boundaries, t)] if warming else burn_in
        n = min(budget, stop - t)
        chains, _ = _run_chunk(
            target, kernel, loop.chains, chain_keys, *_ints(t, 1, n), chunk, warming, False, layout
        )
        if not warming:
            chains = _located(target, kernel, loop.chains, chains, chain_keys, n, chunk, layout)
        jax.block_until_ready(chains)
        sizer.record(n, time.perf_counter() - started, compile_events.count() != events)
        if warming and t + n == stop:
            new_mass, window_end, final = points[stop]
            at, gather = _adaptation_layout(layout)
            flags = (np.asarray(f) for f in (new_mass, window_end, final))
            chains = _adapt(
                target, kernel, gather(chains), key, *flags, *_ints(stop), at,
            )  # fmt: skip
            chains = layout.shard(chains)
            jax.block_until_ready(chains)
        return loop._replace(chains=chains, t=t + n)
    to_boundary = thin - (t - burn_in) % thin
    if to_boundary == thin and thin <= budget:
        draws, steps = min(budget // thin, chunk, (end - t) // thin), thin
    else:
        draws, steps = 1, min(budget, to_boundary)
    lengths = (*_ints(t, draws), _steps_per_draw(steps, thin))
    chains, out = _run_chunk(
        target, kernel, loop.chains, chain_keys, *lengths, chunk, False, False, layout
    )
    chains = _located(target, kernel, loop.chains, chains, chain_keys, steps, chunk, layout)
    collected, bma, curve, chunks = loop.collected, loop.bma, loop.curve, loop.chunks
    if steps == to_boundary:  # the last step of a draw was run
        records, _, mask, recorded_steps = out
        if scoring is not None:  # scored on the device: the draws need not leave it
            status = chains.status
            bma, rows = update_chunk(
                scoring, bma, records["position"], mask, recorded_steps, status.diverged,
                status.step, jnp.asarray(draws, jnp.int32),
            )  # fmt: skip
            # sliced on the host: slicing on the device compiles a program per draw count
            host_mask, host_steps, rows = (
                np.asarray(a)[:draws] for a in jax.device_get((mask, recorded_steps, rows))
            )
            curve = (*curve, curve_rows(rows, host_steps, host_mask))
        if keep_host:
            out = jax.tree.map(lambda a: np.asarray(a)[:draws], jax.device_get(out))
            collected = (*collected, out)
        chunks += 1
    jax.block_until_ready(chains)
    sizer.record(draws * steps, time.perf_counter() - started, compile_events.count() != events)
    return _Loop(chains, t + draws * steps, collected, bma, curve, chunks)


def _adaptation_layout(layout: Layout) -> tuple[Layout, Callable[[Any], Any]]:
    """Where warm-up's adaptation runs, and the move of the chains there. XLA compiles a
    multi-device program with other fusions than a one-device one, which changes the rounding
    of the curvature estimates; adaptation (a few calls per window) therefore runs as the
    one-device program, on the mesh's first device, so that it adapts bitwise as on one device.
    With a data axis it stays on the mesh: one device may not hold a whole minibatch."""
    if layout.mesh is None or layout.data_devices > 1:
        return layout, lambda tree: tree
    device = layout.mesh.devices.flat[0]
    return dataclasses.replace(layout, mesh=None), partial(jax.device_put, device=device)


class _ChunkSizer:
    """Steps per call of the compiled loop, so that one call takes about ``TARGET_SECONDS``:
    Ctrl-C, which Python sees between calls, answers within about a second, and a checkpoint
    can be written between any two calls. The first call of a run that has not been seen
    before (it compiles) is short; the size then follows the measured time per step, growing
    at most fourfold per call. A later run of the same target, kernel and chain count starts
    at the size its predecessor reached (the sizes only split the loop; they never change the
    draws): a call long enough to be timed sets that size, and a shorter call can only raise
    it, since its fixed costs make its per-step time an overestimate. Without the second
    rule, runs whose calls are all short (a fast accelerator) would each start again at
    ``FIRST`` steps and pay the fixed cost of a call several times. A call that traced or
    compiled a program (:mod:`bdl.utils.compile_events`) is not timed at all: its time is
    mostly compilation, and taking it for the steps' cost would shrink the calls (and, through
    the remembered size, every later run's) to a few steps."""

    TARGET_SECONDS = 0.5
    FIRST = 16
    _reached: ClassVar[dict[tuple, int]] = {}

    def __init__(self, run: tuple = ()) -> None:
        self.run = run
        self.steps = self._reached.get(run, self.FIRST) if run else self.FIRST

    def budget(self) -> int:
        return self.steps

    def record(self, steps: int, seconds: float, compiled: bool = False) -> None:
        if compiled:
            return
        per_step = max(seconds, 1e-9) / max(steps, 1)
        want = int(self.TARGET_SECONDS / per_step)
        self.steps = max(1, min(want, 4 * max(steps, self.steps)))
        if not self.run:
            return
        # a short call is mostly fixed costs: its size may only raise the one remembered
        if seconds >= self.TARGET_SECONDS / 4 or self.steps > self._reached.get(self.run, 0):
            self._reached[self.run] = self.steps


class _Checkpointer:
    """Writes the loop's state to a checkpoint directory (:mod:`bdl.sampling.checkpoint`) at
    most every ``every`` seconds, with the draws collected since the last write as a new part
    (when the run keeps its draws) and what ``extra(loop)`` adds: header entries and the
    running evaluation's arrays."""

    def __init__(
        self,
        directory: Path,
        every: float,
        header: dict,
        parts: int,
        written: int,
        keep_draws: bool = True,
        extra: Callable[[_Loop], tuple[dict, list | None]] | None = None,
    ) -> None:
        self.directory, self.every, self.header = directory, every, header
        self.parts, self.written = parts, written
        self.keep_draws, self.extra = keep_draws, extra
        self.last = time.perf_counter()

    def due(self) -> bool:
        return time.perf_counter() - self.last >= self.every

    def save(self, loop: _Loop) -> None:
        new = loop.collected[self.written :] if self.keep_draws else ()
        leaves = None
        if new:
            merged = jax.tree.map(lambda *a: np.concatenate(a, axis=0), *new)
            leaves = checkpoint_io.host_leaves(merged)
        header, evaluation = self.extra(loop) if self.extra is not None else ({}, None)
        self.parts = checkpoint_io.write(
            self.directory, loop.chains, loop.t, leaves, self.parts, {**self.header, **header},
            evaluation,
        )  # fmt: skip
        self.written = len(loop.collected)
        self.last = time.perf_counter()


def _adaptation_points(schedule: list[warmup.Window]) -> dict[int, tuple[bool, bool, bool]]:
    """Steps after which warm-up adapts, fixed by the schedule alone (never by how the run is cut
    into calls): every :data:`warmup.STEP_EVERY` steps within a window and at its end. Each maps
    to (new mass, window end, final window)."""
    points: dict[int, tuple[bool, bool, bool]] = {}
    start = 0
    for w, window in enumerate(schedule):
        stop = start + window.length
        final = w == len(schedule) - 1
        for p in range(start + warmup.STEP_EVERY, stop, warmup.STEP_EVERY):
            points[p] = (False, False, final)
        points[stop] = (window.slow, True, final)
        start = stop
    return points


def _resumed_settings(
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


def _check_same_run(saved: dict, current: dict, directory: Path, layout: Layout) -> None:
    """A checkpoint goes on only with the model and kernel it was written by (headers carry
    :func:`run_meta`'s record and the kernel's fingerprint), and with the same chains (a process
    of a multi-process run resumes its own block)."""
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


@contextlib.contextmanager
def _termination_as_interrupt() -> Iterator[None]:
    """SIGTERM (a scheduler's stop) handled as Ctrl-C: the loop stops between calls, writes its
    checkpoint and returns what it has. Only in the main thread, where signals are delivered."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Status(NamedTuple):
    """Per chain: whether it diverged, and at which step (−1: never)."""

    diverged: jax.Array
    step: jax.Array


class Chains(NamedTuple):
    """Everything the loop carries per chain (leading chain axis): kernel states, minibatch
    streams, divergence status, adapted (h, γ, M) (``()`` when not adapting), the warm-up
    window's running statistics and warm-up's guard against unstable steps
    (:class:`warmup.Guard`) (both ``()`` when not adapting)."""

    states: Any
    streams: Any
    status: Status
    params: Any = ()
    stats: Any = ()
    guard: Any = ()


@owner_jit
def _setup(target: Target, kernel: Kernel, key: jax.Array, num_chains: int, init: Any) -> Any:
    """Initial positions, kernel states, minibatch streams and chain keys, in one compilation."""
    k_init, k_kernel, k_batch, k_run = jax.random.split(key, 4)
    with initialisation_draws():
        positions = target.init_positions(k_init, num_chains, init)
    states = jax.vmap(kernel.init)(positions, jax.random.split(k_kernel, num_chains))
    streams = jax.vmap(target.init_batches)(jax.random.split(k_batch, num_chains))
    status = Status(jnp.zeros((num_chains,), bool), jnp.full((num_chains,), -1, jnp.int32))
    return positions, Chains(states, streams, status), jax.random.split(k_run, num_chains)


#: per (kernel, target): the floats one chain's recorded draw holds, by the states' shapes
_DRAW_SIZES: PairMemo[dict] = PairMemo()


def _draw_size(user_kernel: Kernel, target: Target, kernel: Kernel, states: Any) -> int:
    """How many numbers the draws of ``states`` (all chains) hold; traced once per kernel,
    target and state shapes."""
    shapes = jax.tree.structure(states), tuple((x.shape, x.dtype) for x in jax.tree.leaves(states))
    sizes = _DRAW_SIZES.get_or_compute(user_kernel, target, dict)
    if shapes not in sizes:
        collected = jax.eval_shape(jax.vmap(warmup.apply(kernel, ()).collect), states)
        sizes[shapes] = sum(int(np.size(x)) for x in jax.tree.leaves(collected))
    return sizes[shapes]


def _ints(*values: int) -> tuple[np.ndarray, ...]:
    """Loop bounds as int32 arrays: traced, so every chunk length shares one compilation.
    NumPy's: a jitted function takes them as they are, where making a JAX array from a Python
    int compiles a conversion program at a process's first call."""
    return tuple(np.asarray(v, np.int32) for v in values)


def _warmup_key(key: jax.Array, t: jax.Array | int) -> jax.Array:
    """Warm-up's key at step ``t`` (0: its start) of a run with key ``key``: a stream of its
    own, so that the rest of the run draws as it would without warm-up. Derived inside the
    compiled programs (no program of its own at a process's first call)."""
    return jax.random.fold_in(jax.random.fold_in(key, 1), t)


def _finite(tree: Any) -> jax.Array:
    """Whether every floating leaf of ``tree`` is finite (one fused reduction per leaf)."""
    leaves = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(jnp.result_type(x), jnp.floating)]
    return jnp.all(jnp.stack([jnp.isfinite(jnp.sum(x)) for x in leaves])) if leaves else True


def _run_chunk(
    target: Target,
    kernel: Kernel,
    chains: Chains,
    chain_keys: jax.Array,
    t0: jax.Array,
    num_draws: jax.Array,
    steps_per_draw: jax.Array,
    buffer_size: int,
    adapting: bool = False,
    checked: bool = False,
    layout: Layout | None = None,
) -> tuple[Chains, Any]:
    """:func:`_compiled_chunk`, told whether the target's network convolves (decided on the
    concrete target, once per target, outside the trace) and how many steps its loops run per
    block (:func:`loop_block`)."""
    return _compiled_chunk(
        target, kernel, chains, chain_keys, t0, num_draws, steps_per_draw, buffer_size,
        adapting, checked, layout, convolves_on_cpu(target), loop_block(),
    )  # fmt: skip


#: steps per block of the sampling loop on an accelerator (:func:`loop_block`)
ACCELERATOR_BLOCK = 32


def loop_block() -> int:
    """Steps per block of the sampling loop: 1 on the CPU, where a loop of traced length runs
    in place, and :data:`ACCELERATOR_BLOCK` elsewhere, where each iteration of such a loop
    waits for the host (:mod:`bdl.sampling.chain`)."""
    return 1 if jax.default_backend() == "cpu" else ACCELERATOR_BLOCK


def _steps_per_draw(steps: int, thin: int) -> np.ndarray | int:
    """A chunk's steps per draw: traced, so that every chunk length shares one compilation;
    on an accelerator a chunk of whole draws gets ``thin`` as a static int instead, so that
    each draw's steps run in a loop of static length (one more compilation per run)."""
    if steps == thin and loop_block() > 1:
        return thin
    return np.asarray(steps, np.int32)


@owner_jit
def _compiled_chunk(
    target: Target,
    kernel: Kernel,
    chains: Chains,
    chain_keys: jax.Array,
    t0: jax.Array,
    num_draws: jax.Array,
    steps_per_draw: jax.Array,
    buffer_size: int,
    adapting: bool,
    checked: bool,
    layout: Layout | None,
    convolutions: bool,
    block: int = 1,
) -> tuple[Chains, Any]:
    """Run ``num_draws × steps_per_draw`` steps from step ``t0``, recording each draw's state.

    With a ``layout``, each device runs this for its own block of chains (and its share of every
    minibatch); the draws are gathered along the chain axis.

    ``t0``, ``num_draws`` and ``steps_per_draw`` are traced, so burn-in and sampling chunks of
    any length share one compilation; ``buffer_size`` fixes the output shape. With ``block`` > 1
    (an accelerator) the loops run ``block`` steps at a time in loops of static length, and
    ``steps_per_draw`` may be a static int (:func:`_steps_per_draw`).

    Sampling pays for diagnostics only where they are recorded: the steps inside a draw run the
    bare kernel step, and the draw's last step computes the step ``Info`` and checks that the
    energy, gradient and state are finite. A chain that fails the check goes back to its state
    at the start of the draw and stays frozen there; its divergence step is provisionally the
    draw's last step (:func:`_locate_divergences` finds the exact one). With ``checked`` every
    step is checked and a failing chain is frozen at its last finite state.

    While ``adapting`` (a warm-up window; implies ``checked``) a failing step is rejected and
    the chain's step size halved instead, h and T are the adapted step and the target's
    temperature (no schedule), and θ is accumulated into the window's statistics.

    With ``convolutions`` (on the CPU, a network with convolutions) each step's convolutions are
    written in the layout XLA:CPU runs fast inside a loop, and the chains run in turn.
    """
    checked = checked or adapting
    if layout is None or layout.mesh is None:
        return _run_chunk_local(
            target, kernel, chains, chain_keys, t0, num_draws, steps_per_draw, buffer_size,
            adapting, checked, convolutions, block,
        )  # fmt: skip

    def local(shared: tuple, per_chain: tuple) -> tuple[Chains, Any]:
        args = (*shared[:2], *per_chain, *shared[2:])
        return _run_chunk_local(*args, buffer_size, adapting, checked, convolutions, block)

    by_chain, by_draw = P(CHAIN), P(None, CHAIN)  # buffers are (draw, chain, ...)
    return layout.per_chain(
        local,
        (target, kernel, t0, num_draws, steps_per_draw),
        (chains, chain_keys),
        (by_chain, (by_draw, by_draw, P(), P())),
    )


def _run_chunk_local(
    target: Target,
    kernel: Kernel,
    chains: Chains,
    chain_keys: jax.Array,
    t0: jax.Array,
    num_draws: jax.Array,
    steps_per_draw: jax.Array,
    buffer_size: int,
    adapting: bool,
    checked: bool,
    convolutions: bool = False,
    block: int = 1,
) -> tuple[Chains, Any]:
    """:func:`_run_chunk` on one device's chains."""

    advance = partial(_chain_step, target, kernel, adapting=adapting)

    def is_finite(state: Any, info: Info) -> jax.Array:
        return jnp.isfinite(info.energy) & jnp.isfinite(info.grad_norm) & _finite(state)

    def checked_step(c: Chains, ckey: jax.Array, t: jax.Array) -> tuple[Chains, Info]:
        state, stream, info = advance(c, ckey, t)
        ok = is_finite(state, info)
        if adapting:
            return guarded_step(c, t, state, stream, info, ok), info
        move = ok & ~c.status.diverged
        state = jax.tree.map(lambda new, old: jnp.where(move, new, old), state, c.states)
        return c._replace(states=state, streams=stream, status=_mark(c.status, ~ok, t)), info

    def guarded_step(
        c: Chains, t: jax.Array, new: Any, stream: Any, info: Info, ok: jax.Array
    ) -> Chains:
        """A warm-up step (:class:`warmup.Guard`): taken when everything is finite and the
        energy at the current state did not jump; undone (back to the state before the current
        one) when it jumped or Ũ or ∇Ũ is not finite there; a non-finite new state is rejected.
        Either failure halves h."""
        guard = c.guard
        dim = tree_size(c.states.z["theta"])
        limit = warmup.energy_jump_limit(guard, target.temperature(t), dim)
        here_bad = ~(jnp.isfinite(info.energy) & jnp.isfinite(info.grad_norm))
        here_bad = here_bad | (info.energy - guard.energy > limit)  # False at the start (NaN)
        ok = ok & ~here_bad
        live = ~c.status.diverged
        taken, undone = live & ok, live & here_bad

        def where(mask: jax.Array, a: Any, b: Any) -> Any:
            return jax.tree.map(lambda x, y: jnp.where(mask, x, y), a, b)

        state = where(taken, new, where(undone, guard.previous, c.states))
        # undone: back at the previous state, whose Ũ stays the reference (the next step
        # compares it with itself on another minibatch)
        energy = info.energy.astype(guard.energy.dtype)
        guard = warmup.Guard(
            where(taken, c.states, guard.previous),
            where(taken, energy, guard.energy),
            guard.energy_noise,
        )
        params = warmup.back_off(c.params, ok)
        stats = where(taken, warmup.accumulate(c.stats, state.z["theta"]), c.stats)
        failed = params.backoff < 2.0**-40  # nothing is finite at any step size
        status = _mark(c.status, failed, t)
        return Chains(state, stream, status, params, stats, guard)

    def skip_step(c: Chains, ckey: jax.Array, t: jax.Array) -> Chains:
        state, stream, _ = advance(c, ckey, t)
        return c._replace(states=state, streams=stream)

    def recorded_step(c: Chains, ckey: jax.Array, t: jax.Array) -> tuple[Chains, Info]:
        state, stream, info = advance(c, ckey, t)
        status = _mark(c.status, ~is_finite(state, info), t)
        return c._replace(states=state, streams=stream, status=status), info

    def settle(before: Chains, after: Chains) -> Chains:
        frozen = after.status.diverged
        keep = partial(jax.tree.map, lambda new, old: jnp.where(frozen, old, new))
        return after._replace(
            states=keep(after.states, before.states), streams=keep(after.streams, before.streams)
        )

    # one chain runs without a chain axis: under vmap, an axis of one costs copies and
    # transposed products in every step
    single = chain_keys.shape[0] == 1
    over = (lambda f: f) if single else partial(jax.vmap, in_axes=(0, 0, None))
    keys = chain_keys[0] if single else chain_keys

    def per_step(step: Callable) -> Callable:
        if not convolutions:
            return lambda c, t: over(step)(c, keys, t)
        one = canonical_convolutions(step)
        if single:
            return lambda c, t: one(c, keys, t)

        def chains_step(c: Chains, t: jax.Array) -> Any:
            if sequential_chains(convolutions):
                return jax.lax.map(lambda ck: one(*ck, t), (c, keys))
            return canonical_convolutions(over(step))(c, keys, t)

        return chains_step

    def per_draw(f: Callable) -> Callable:
        return f if single else jax.vmap(f)

    def record(c: Chains, info: Info, t: jax.Array) -> Any:
        k = warmup.apply(kernel, ())
        collected = per_draw(k.collect)(c.states)
        if single:
            collected, info = jax.tree.map(lambda x: x[None], (collected, info))
        return collected, info, k.is_sample(t), t

    start = jax.tree.map(lambda x: x[0], chains) if single else chains
    lengths = (t0, num_draws, steps_per_draw)
    if checked:
        end, out = run_chain(
            per_step(checked_step), start, *lengths, record, buffer_size, block=block
        )
    else:
        end, out = run_chain(
            per_step(recorded_step),
            start,
            *lengths,
            record,
            buffer_size,
            skip=per_step(skip_step),
            settle=per_draw(settle),
            block=block,
        )
    return (jax.tree.map(lambda x: x[None], end) if single else end), out


@owner_jit
def _chain_step(
    target: Target, kernel: Kernel, c: Chains, ckey: jax.Array, t: jax.Array, adapting: bool
) -> tuple[Any, Any, Info]:
    """One chain's step t: (kernel state, minibatch stream, step ``Info``).

    A nested ``jit``: a chunk's program traces the step several times (the bare step, the
    recorded step, the latter's output shape; on an accelerator each in a block and a remainder
    loop), and every trace meets this call with the same arguments' shapes, so the step is
    traced once per program and its jaxpr reused; XLA inlines the call."""
    k = warmup.apply(kernel, c.params)
    temperature = target.temperature(t)
    h, temperature = (c.params.step_size, temperature) if adapting else k.hyper(t, temperature)
    batch, stream = target.next_batch(c.streams, t)
    grad_fn = partial(target.stochastic_energy_and_grad, batch=batch)
    state, info = k.step(jax.random.fold_in(ckey, t), c.states, grad_fn, h, temperature)
    if adapting and isinstance(state, RecipeState):
        state = state._replace(z=warmup.innermost(k).recipe.warmup_guarded(state.z, h))
    return state, stream, info


def sequential_chains(convolutions: bool) -> bool:
    """Whether the chains' steps run one after another (``lax.map``) rather than under ``vmap``:
    for a model with convolutions on the CPU, whose ``vmap`` form (grouped convolutions) XLA:CPU
    runs several times slower than the chains in turn."""
    return convolutions


def _mark(status: Status, failed: jax.Array, t: jax.Array) -> Status:
    """``status`` with a chain that ``failed`` at step ``t`` marked diverged (the first time)."""
    first = failed & ~status.diverged
    return Status(status.diverged | failed, jnp.where(first, t, status.step))


def _located(
    target: Target,
    kernel: Kernel,
    before: Chains,
    after: Chains,
    chain_keys: jax.Array,
    steps: int,
    buffer_size: int,
    layout: Layout,
) -> Chains:
    """``after`` with exact divergence steps, when a chain diverged in the call (a copy of one
    flag per chain to the host otherwise)."""
    was, now = jax.device_get((before.status.diverged, after.status.diverged))
    if np.array_equal(was, now):
        return after
    return _locate_divergences(target, kernel, was, after, chain_keys, steps, buffer_size, layout)


def _locate_divergences(
    target: Target,
    kernel: Kernel,
    before: np.ndarray,
    chains: Chains,
    chain_keys: jax.Array,
    steps: int,
    buffer_size: int,
    layout: Layout,
) -> Chains:
    """The exact step at which each newly diverged chain first went non-finite.

    Outside warm-up a draw's ``steps`` steps are checked only at their end, and a chain that
    fails is frozen at the draw's start with the draw's last step as its divergence step. The
    draw is replayed from there with every step checked (same keys and minibatches); the first
    failing step replaces the provisional one. Runs only when a chain has diverged.
    """
    status = jax.device_get(chains.status)
    fresh = np.asarray(status.diverged) & ~before
    located = np.asarray(status.step).copy()
    clean = Status(jnp.zeros_like(chains.status.diverged), jnp.full_like(chains.status.step, -1))
    for start in sorted({int(located[c]) - steps + 1 for c in np.flatnonzero(fresh)}):
        replay, _ = _run_chunk(
            target,
            kernel,
            chains._replace(status=clean),
            chain_keys,
            *_ints(start, 1, steps),
            buffer_size,
            False,
            True,  # checked
            layout,
        )
        found = jax.device_get(replay.status)
        here = fresh & (located - steps + 1 == start) & np.asarray(found.diverged)
        located = np.where(here, np.asarray(found.step), located)
    step = layout.shard(jnp.asarray(located, jnp.int32))
    return chains._replace(status=chains.status._replace(step=step))


def _noise(target: Target, kernel: Kernel, theta: Any, mass: Any, key: jax.Array) -> jax.Array:
    """V of :func:`warmup.gradient_noise` from independent random minibatches at θ."""
    keys = jax.random.split(key, warmup.NOISE_BATCHES)
    grads = jax.vmap(lambda k: _recipe_grad(target, kernel, k)(theta))(keys)
    return warmup.gradient_noise(grads, mass)


def _energy_noise(target: Target, kernel: Kernel, theta: Any, key: jax.Array) -> jax.Array:
    """s_Ũ of :class:`warmup.Guard`: the standard deviation of the minibatch energy across
    :data:`warmup.ENERGY_NOISE_BATCHES` independent minibatches at θ (0 with full batches)."""
    keys = jax.random.split(key, warmup.ENERGY_NOISE_BATCHES)
    energies = jax.vmap(lambda k: _recipe_energy(target, kernel, k)(theta))(keys)
    return jnp.std(energies, ddof=1)


def _recipe_energy(target: Target, kernel: Kernel, key: jax.Array) -> Any:
    """The minibatch energy over the recipe's θ group, on a fresh random minibatch."""
    batch, _ = target.next_batch(target.init_batches(key), jnp.zeros((), jnp.int32))
    return kernel.augment_energy(lambda theta: target.stochastic_energy_and_grad(theta, batch)[0])


def _recipe_grad(target: Target, kernel: Kernel, key: jax.Array) -> Any:
    """∇ of the minibatch energy over the recipe's θ group, on a fresh random minibatch."""
    return jax.grad(_recipe_energy(target, kernel, key))


@owner_jit
def _start_adaptation(
    target: Target, kernel: Kernel, chains: Chains, key: jax.Array, layout: Layout
) -> Chains:
    """Initial (h, γ) from the curvature at each chain's start, M = I, empty statistics;
    ``key`` is the run's key."""
    keys = layout.select(jax.random.split(_warmup_key(key, 0), layout.num_chains))
    return layout.per_chain(
        lambda shared, per_chain: _start_adaptation_local(*shared, *per_chain),
        (target, kernel),
        (chains, keys),
    )


def _start_adaptation_local(
    target: Target, kernel: Kernel, chains: Chains, keys: jax.Array
) -> Chains:
    second = warmup.momentum_kernel(kernel)
    mass_adapted = warmup.adapts_mass(kernel)

    def one(state: Any, ckey: jax.Array) -> tuple[Any, warmup.AdaptParams, warmup.Welford]:
        theta = state.z["theta"]
        dense = warmup.dense(kernel, theta)
        k_batch, k_power = jax.random.split(ckey)
        grad_fn = _recipe_grad(target, kernel, k_batch)
        mass = None
        if mass_adapted:
            if dense:
                mass = warmup.hessian_mass(grad_fn, theta)
            else:
                mass = warmup.hessian_diagonal_mass(grad_fn, theta, jax.random.fold_in(ckey, 3))
        moving = mass if mass_adapted else warmup.history_mass(kernel, state, grad_fn(theta))
        curvature = warmup.largest_curvature(grad_fn, theta, moving, k_power)
        temperature = target.temperature(jnp.zeros((), jnp.int32))
        floor = warmup.friction_floor(kernel, theta, temperature)
        params = warmup.params_at(curvature, mass, second, jnp.ones_like(curvature), floor)
        recipe = warmup.innermost(warmup.apply(kernel, params)).recipe
        state = state._replace(z=recipe.readapted(state.z))
        noise = _energy_noise(target, kernel, theta, jax.random.fold_in(ckey, 4))
        return state, params, warmup.empty_stats(theta, dense), warmup.start_guard(state, noise)

    # one chain at a time: the dense linear algebra of warm-up then gives bitwise the same
    # values however many chains a device holds (a batched Hessian or factorisation need not)
    states, params, stats, guard = jax.lax.map(lambda a: one(*a), (chains.states, keys))
    return chains._replace(states=states, params=params, stats=stats, guard=guard)


@owner_jit
def _adapt(
    target: Target,
    kernel: Kernel,
    chains: Chains,
    key: jax.Array,
    new_mass: jax.Array,
    window_end: jax.Array,
    final: jax.Array,
    t: jax.Array,
    layout: Layout,
) -> Chains:
    """(h, γ) from the curvature, after a new mass at the end of a slow window; the window's
    statistics restart at every window end; ``key`` is the run's key and ``t`` the step.

    The three flags are traced booleans, so every adaptation point of a run shares one
    compilation of the curvature estimate (as Python bools, each combination compiled its own)."""
    keys = layout.select(jax.random.split(_warmup_key(key, t), layout.num_chains))
    return layout.per_chain(
        lambda shared, per_chain: _adapt_local(*shared[:2], *per_chain, *shared[2:]),
        (target, kernel, new_mass, window_end, final, t),
        (chains, keys),
    )


def _adapt_local(
    target: Target,
    kernel: Kernel,
    chains: Chains,
    keys: jax.Array,
    new_mass: jax.Array,
    window_end: jax.Array,
    final: jax.Array,
    t: jax.Array,
) -> Chains:
    second = warmup.momentum_kernel(kernel)

    def one(state: Any, params: Any, stats: Any, ckey: jax.Array) -> tuple[Any, Any, Any]:
        theta = state.z["theta"]
        mass = params.mass
        if mass is not None:
            mass = jax.lax.cond(new_mass, warmup.window_mass, lambda _: mass, stats)
        k_batch, k_power = jax.random.split(ckey)
        grad_fn = _recipe_grad(target, kernel, k_batch)
        moving = mass if mass is not None else warmup.history_mass(kernel, state, grad_fn(theta))
        curvature = warmup.largest_curvature(grad_fn, theta, moving, k_power)
        backoff = jnp.minimum(1.0, 2.0 * params.backoff)
        temperature = target.temperature(t)
        floor = warmup.friction_floor(kernel, theta, temperature)
        k_noise = jax.random.fold_in(ckey, 2)
        noise = jax.lax.cond(
            final,
            lambda: _noise(target, kernel, theta, moving, k_noise),
            lambda: jnp.zeros((), curvature.dtype),
        )
        params = warmup.params_at(curvature, mass, second, backoff, floor, noise, temperature)
        recipe = warmup.innermost(warmup.apply(kernel, params)).recipe
        state = state._replace(z=recipe.readapted(state.z))
        dense = warmup.dense(kernel, theta)
        stats = jax.lax.cond(window_end, lambda: warmup.empty_stats(theta, dense), lambda: stats)
        return state, params, stats

    states, params, stats = jax.lax.map(
        lambda a: one(*a), (chains.states, chains.params, chains.stats, keys)
    )  # one chain at a time, as in _start_adaptation_local
    return chains._replace(states=states, params=params, stats=stats)


def _assemble(
    collected: list,
    kernel: Kernel,
    steps_done: int,
    interrupted: bool,
    chains: Chains,
    meta: dict[str, Any],
    evaluation: Any = None,
    kept: bool = True,
) -> Samples:
    collect = jax.vmap(warmup.apply(kernel, ()).collect)
    if collected:
        records, infos, mask, steps = (
            jax.tree.map(lambda *a: np.concatenate(a, axis=0), *parts)
            for parts in zip(*collected, strict=True)
        )
        info = infos._asdict()
    else:
        shape = jax.eval_shape(collect, chains.states)
        records = jax.tree.map(lambda s: np.zeros((0, *s.shape), s.dtype), shape)
        info = {k: np.zeros((0, chains.status.step.shape[0]), np.float32) for k in Info._fields}
        mask, steps = np.zeros((0,), bool), np.zeros((0,), np.int64)
    keep = np.asarray(mask, bool)
    # buffers are (draw, chain, ...); Samples are (chain, draw, ...)
    records = jax.tree.map(lambda a: np.swapaxes(np.asarray(a)[keep], 0, 1), records)
    info = {k: np.swapaxes(np.asarray(v)[keep], 0, 1) for k, v in info.items()}
    extra = {k: v for k, v in records.items() if k != "position"}
    status = jax.device_get(chains.status)
    adapted = None
    if isinstance(chains.params, warmup.AdaptParams):
        params = jax.device_get(chains.params)
        adapted = {"step_size": np.asarray(params.step_size)}
        if warmup.momentum_kernel(kernel):
            adapted["friction"] = np.asarray(params.friction)
        if isinstance(params.mass, DenseMass):
            root = np.asarray(params.mass.root)
            adapted["inverse_mass"] = root @ np.swapaxes(root, -1, -2)
        elif params.mass is not None:
            adapted["mass"] = jax.tree.map(np.asarray, params.mass.values)
    return Samples(
        positions=records["position"],
        extra=extra,
        info=info,
        steps=np.asarray(steps)[keep],
        kernel=kernel.name,
        steps_done=steps_done,
        interrupted=interrupted,
        diverged=np.asarray(status.diverged, bool),
        divergence_step=np.asarray(status.step, np.int64),
        adapted=adapted,
        meta=meta,
        evaluation=evaluation,
        kept_draws=kept,
    )

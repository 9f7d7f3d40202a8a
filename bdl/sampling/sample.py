"""``bdl.sample``: run any kernel on a compiled target, chains under ``vmap``, steps in XLA loops.

This module checks the arguments (before anything compiles), sets the run's parts up and hands
them to the loop (:mod:`bdl.sampling.run.loop`): the start (:mod:`.start`), the chunk programs
(:mod:`.program`), warm-up (:mod:`.warmup`), the chunking policy (:mod:`.chunking`), what the
run keeps (:mod:`.keep`), checkpoints (:mod:`.checkpointing`) and the device layout
(:mod:`.layout`). The step counter is shared by all chains and every random key is
``fold_in(chain_key, t)``, so results do not depend on how the run is cut into calls and the
same seed gives bitwise-identical draws.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Sequence
from functools import partial
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh

from bdl.compile.target import Target
from bdl.kernels.base import Kernel
from bdl.sampling.checkpoints import lock as checkpoint_lock
from bdl.sampling.checkpoints import policy as checkpointing
from bdl.sampling.checkpoints.state import fingerprint
from bdl.sampling.kept import buffers as draw_buffers
from bdl.sampling.kept import keeper as keeping
from bdl.sampling.kept.keeper import Keep
from bdl.sampling.kept.provenance import run_meta
from bdl.sampling.kept.stream import StreamWriter
from bdl.sampling.run import loop as looping
from bdl.sampling.run.argument_checks import check_run, check_schedules, check_start
from bdl.sampling.run.failures import refuse_bad_starts, start_explanation
from bdl.sampling.run.layout import Layout, resolve
from bdl.sampling.run.loop_options import LoopOptions
from bdl.sampling.run.loop_options import resolve as resolve_loop
from bdl.sampling.run.program import Programs
from bdl.sampling.run.progress import Progress
from bdl.sampling.run.start import start_chains
from bdl.sampling.samples import DivergenceWarning, Samples
from bdl.sampling.verdict.convergence_check import checked, run_monitor
from bdl.sampling.verdict.runaway_check import flag_runaway
from bdl.sampling.warmup import Schedule, WarmUp, needs_adaptation

#: the draw buffers' size on the device, at most (and at most this many draws)
BUFFER_BYTES = 128 * 2**20
MAX_BUFFER_DRAWS = 1000


@checkpoint_lock.released_on_return  # the checkpoint directory is locked for the run
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
    loop: LoopOptions | None = None,
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
        devices: the devices to split the chains over: a number (the first of
            ``jax.local_devices()``) or a list of devices. Default: one device for a single
            chain, else every local device; ``num_chains`` must be a multiple of their count
            ([Devices and processes](../scaling.md) says what holds of the draws on several
            devices).
        mesh: a ``jax.sharding.Mesh`` with a ``chain`` axis and/or a ``data`` axis
            (``bdl.make_mesh(chains=2, data=2)``): the data axis splits each minibatch over its
            devices, which average their full-data-scale energies and gradients; the draws then
            agree with one device's to float reassociation. Give ``devices`` or ``mesh``.

            With several processes (``jax.distributed``), each runs ``num_chains / processes``
            consecutive chains on its own devices and returns those (``bdl.merge_samples``
            joins them).
        checkpoint: a directory to keep the run's state in ([Saving runs](../saving.md)),
            written every ``checkpoint_every`` seconds, at the end and when the run is
            interrupted (with several processes, each writes ``process-I`` inside it).
        checkpoint_every: seconds between checkpoints (0: after every call of about 0.5 s).
        resume: a checkpoint directory to continue from (and to go on checkpointing into);
            ``burn_in``, ``thin``, ``num_chains`` and ``seed`` are the checkpoint's, and giving
            a different value is an error. The draws are bitwise those of an uninterrupted run.
        keep_draws: hold the draws in memory and return them (default ``True``; with
            ``resume``, the checkpoint's). ``False`` keeps none: the run's memory does not grow
            with the number of draws; score them with ``evaluate`` or write them with
            ``stream_to``.
        evaluate: score the draws on a test set as they are produced ([Evaluation that
            streams](../evaluation.md)):
            ``True`` for the model's test split, or a :class:`bdl.evaluation.RunningBMA`. The
            result, ``samples.evaluation``, holds the BMA's metrics and the BMA-versus-draws
            curve. With ``resume``, pass the same evaluation again.
        stream_to: a directory to write the draws to, part by part, as they are produced
            (:mod:`bdl.sampling.kept.stream`; read back with ``bdl.load_samples(DIR)``). With
            ``resume``, default the checkpoint's.
        loop: how the loop is cut into calls and vectorised
            (:class:`bdl.sampling.LoopOptions`: the chunking policy, the loop's block, chains
            in turn); never what it computes on the CPU.

    Returns:
        :class:`Samples` with ``(chain, draw)`` axes. Ctrl-C (or SIGTERM) stops the run within
            about a second and returns what was collected, with ``interrupted=True``; the
            checkpoint, if any, is written first.

    Raises:
        ValueError: an argument out of its range or inconsistent with the others (steps,
            burn-in and thin; chains and devices; a ``resume`` whose checkpoint disagrees), or
            a start where the energy is not finite.
        TypeError: an argument of the wrong kind (a target that is not compiled, a kernel that
            is not a kernel), or no ``num_steps``.

    Warns:
        ConvergenceWarning: the kept draws fail the convergence check (R̂, bulk and tail ESS,
            stuck chains; ``samples.convergence`` has the details).
        DivergenceWarning: a chain diverged (``samples.diverged``).

    Examples:
        Two chains of SGHMC on a tiny Bayesian linear regression (a run this short is far from
        converged, and warns so):

        >>> import jax.numpy as jnp
        >>> import bdl
        >>> from bdl.data import linear_regression
        >>> model = bdl.Model(
        ...     network=lambda params, x: x @ params["w"],
        ...     params={"w": jnp.zeros(2)},
        ...     likelihood=bdl.Gaussian(scale=0.5),
        ...     prior=bdl.Normal(1.0),
        ... )
        >>> data = linear_regression(n=50, dim=2, n_test=10)
        >>> compiled = bdl.compile(model, data, batch_size=10)
        >>> kernel = bdl.kernels.get("sghmc", step_size=0.01)
        >>> samples = bdl.sample(compiled, kernel, num_steps=60, burn_in=20, thin=2, num_chains=2)
        >>> samples.positions["net"]["w"].shape  # (chains, draws, *leaf)
        (2, 20, 2)
        >>> compiled.predict(samples, compiled.x_test).shape  # the BMA's mean at 10 test inputs
        (10,)
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
    if loop is not None and not isinstance(loop, LoopOptions):
        raise TypeError(f"loop must be a bdl.sampling.LoopOptions; got {type(loop).__name__}.")
    options = dict(seed=seed, init=init, progress=progress, num_chains=num_chains, resume=resume)
    seed = check_start(target, kernel, options).get("seed")
    directory, saved = checkpointing.open_directory(checkpoint, resume)
    if saved is not None:
        num_steps, burn_in, thin, num_chains, seed = checkpointing.resumed_settings(
            saved, directory, num_steps, burn_in, thin, num_chains, seed
        )
    if num_steps is None:
        raise TypeError("sample() needs num_steps (total steps per chain, burn-in included).")
    burn_in = 0 if burn_in is None else burn_in
    thin = 1 if thin is None else thin
    num_chains = 1 if num_chains is None else num_chains
    seed = 0 if seed is None else seed
    num_draws = check_run(num_steps, burn_in, thin, num_chains)
    layout = resolve(target, num_chains, devices, mesh)
    kept = keeping.settings(
        keep_draws, evaluate, stream_to, target, num_chains,
        None if saved is None else (saved.header.get("streaming") or {}), directory,
    )  # fmt: skip
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int | float):
        raise TypeError(f"checkpoint_every must be seconds (a float); got {checkpoint_every!r}.")
    if not checkpoint_every >= 0:
        raise ValueError(f"checkpoint_every must be >= 0 seconds; got {checkpoint_every}.")
    bound = kernel.bind(target)
    adapting = needs_adaptation(bound)
    check_schedules(target, bound, num_steps, adapting)
    schedule = Schedule(burn_in) if adapting else None
    settings = dict(num_steps=num_steps, burn_in=burn_in, thin=thin, num_chains=num_chains)
    meta = run_meta(target, bound, **settings, seed=seed, init=init)
    if layout.mesh is not None or layout.processes > 1:
        meta["layout"] = layout.describe()
    header = None  # what a checkpoint records; the kernel's digest costs a pretty-print
    if directory is not None:
        header = {**meta, "kernel_fingerprint": fingerprint(bound), "streaming": kept.record()}
        if saved is not None:
            checkpointing.check_same_run(saved.header, header, directory, layout)
        # the model's fingerprint evaluates its energy: only when checkpointing or resuming
        header["target"] = checkpointing.target_record(
            target, None if saved is None else saved.header, directory
        )
    options = resolve_loop(loop, target, (kernel.name, num_chains, layout))

    key = jax.random.key(seed)
    warmup = WarmUp(bound) if adapting else None
    chains, chain_keys = start_chains(
        target, bound, warmup, key, num_chains, init, (layout.start, layout.stop)
    )
    chains, chain_keys = layout.shard(chains), layout.shard(chain_keys)
    owners = (kernel, target)  # the draw's shapes are traced once per kernel and target
    rows = _buffer_rows(draw_buffers.template(bound, chains.states, 1, owners), num_draws)
    shapes = draw_buffers.template(bound, chains.states, rows, owners)
    buffers = _placed(draw_buffers.zeros(shapes), layout)
    programs = Programs(
        target, bound, warmup, chain_keys, layout, key, rows,
        options.convolutions, options.chains_in_turn and num_chains > 1, options.block, thin,
    )  # fmt: skip
    run = draw_buffers.RunFields(bound, meta, warmup, shapes)
    table = draw_buffers.DrawTable(shapes, num_draws) if kept.keep_draws else None
    stream = None if kept.stream_to is None else StreamWriter(kept.stream_to, checkpoint_every)
    monitor = run_monitor(target, num_chains, num_draws) if table is not None else None
    sinks = Keep(kept, table, stream, shapes, run, monitor)
    t, parts = 0, 0
    if saved is not None:
        chains = layout.shard(checkpointing.restore(chains, saved, directory))
        t, parts = saved.step, len(saved.parts)
        _restore_keep(sinks, saved, shapes, directory)
        sinks.flush(t, chains)  # a resumed stream's index lists the saved parts
    writer = None
    if directory is not None:
        writer = checkpointing.Checkpointer(directory, checkpoint_every, header, parts)

    plan = looping.Plan(burn_in, thin, burn_in + num_draws * thin, rows)
    meter = Progress(num_steps, sys.stderr.isatty() if progress is None else progress,
                     label=kernel.name, start=t)  # fmt: skip
    start = looping.LoopState(chains, buffers, t)
    check = None  # a resumed run's start was checked when it began
    if saved is None:
        check = partial(refuse_bad_starts, target, bound, first=layout.start)
    end, interrupted = looping.run(
        programs, plan, start, schedule, options.chunks, sinks, writer, meter, check
    )
    if interrupted:
        warnings.warn(
            f"sampling interrupted after {end.t} steps; returning the draws collected so far"
            + (f" (checkpoint in {directory})." if writer is not None else "."),
            stacklevel=3,  # past the wrapper that releases the checkpoint's lock
        )
    result = sinks.result(end.t, end.chains, interrupted)
    if np.any(result.diverged):
        diverged = result.diverged[: layout.local_chains]
        why = start_explanation(target, bound, start.chains, diverged, end.chains)
        warnings.warn(
            result.divergence_report() + (f" {why}" if why else "") + " samples.flat() and the "
            "predictive use the valid draws; docs/troubleshooting.md says what to change.",
            DivergenceWarning,
            stacklevel=3,  # past the wrapper that releases the checkpoint's lock
        )
    result = flag_runaway(result, target)  # chains that ran away or ran hot, and their warning
    # the convergence verdict, and its warning when it fails
    return checked(result, target, sinks.monitored())


def _buffer_rows(one_row: draw_buffers.Records, num_draws: int) -> int:
    """Rows of the draw buffers (``one_row``: their shapes for one draw): a power of two (runs
    of similar length share a compilation), at most the run's draws, :data:`MAX_BUFFER_DRAWS`
    and :data:`BUFFER_BYTES`."""
    per_draw = draw_buffers.nbytes(one_row)
    cap = max(1, min(MAX_BUFFER_DRAWS, BUFFER_BYTES // max(per_draw, 1)))
    return int(min(cap, 1 << (num_draws - 1).bit_length()))


def _placed(buffers: draw_buffers.Records, layout: Layout) -> draw_buffers.Records:
    """The first call's buffers where the calls keep them: with a mesh, the chain-major ones
    split over its chain axis and the per-draw ones on every device."""
    if layout.mesh is None:
        return jax.device_put(buffers)
    by_chain = layout.shard((buffers.collected, buffers.info))
    per_draw = layout.replicate((buffers.is_sample, buffers.steps))
    return draw_buffers.Records(*by_chain, *per_draw)


def _restore_keep(keep: Keep, saved: Any, shapes: draw_buffers.Records, directory: Any) -> None:
    """A resumed run's kept draws (the checkpoint's parts) and running evaluation."""
    treedef = jax.tree.structure(shapes)
    if keep.table is not None:
        for leaves in saved.parts:
            rows = jax.tree.unflatten(treedef, leaves)
            keep.table.add(draw_buffers.Records.from_rows(rows))
        keep.checkpointed = keep.table.size
    keep.restore_evaluation(saved.evaluation, directory)
    if keep.stream is not None:
        keep.stream.parts = saved.header["streaming"]["stream_parts"]

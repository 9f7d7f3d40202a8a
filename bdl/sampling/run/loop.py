"""The sampling loop: calls of the compiled chunk program until the run's last draw.

There is no Python loop over steps: each iteration here is one call of one program
(:mod:`bdl.sampling.run.program`) of as many steps as the chunking policy allows
(:mod:`bdl.sampling.run.chunking`), cut where a phase ends: burn-in up to the next warm-up point
(where warm-up adapts, inside the call), or whole draws, or part of a draw whose ``thin`` steps
take longer than a call. Before the first call the chains' far-out margin is set for the run's
length (:func:`bdl.sampling.run.failures.with_margin`). After each call the loop locates any new
divergence (:mod:`bdl.sampling.run.failures`), hands complete draws to what the run keeps
(:class:`bdl.sampling.kept.keeper.Keep`), and writes the stream and the checkpoint when they are
due.

The draw buffers are double: a call writes its draws into one set while the host copies the
previous call's out of the other. Keep takes a call's draws only once the next call has been
launched (:meth:`bdl.sampling.kept.keeper.Keep.settle`), so on a device that runs asynchronously the
copy overlaps that call's steps rather than leaving the device idle; it is taken at once before
anything reads the kept draws (the stream, the checkpoint, the result).
The loop's progress is one value (:class:`LoopState`) replaced in one assignment, so an
interruption never sees the chains, the step and the draws out of step. Ctrl-C and SIGTERM stop
the loop between calls; what was collected is written and returned.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import jax
import numpy as np

from bdl.sampling.checkpoints.policy import Checkpointer
from bdl.sampling.kept.buffers import Records
from bdl.sampling.kept.keeper import Keep
from bdl.sampling.run.carry import Chains
from bdl.sampling.run.chunking import ChunkPolicy
from bdl.sampling.run.failures import located, with_margin
from bdl.sampling.run.program import Programs
from bdl.sampling.run.progress import Progress
from bdl.sampling.warmup import Schedule
from bdl.utils import compile_events


class LoopState(NamedTuple):
    """The loop's state: the chains after ``t`` steps, the draw buffers the next call writes
    into (donated from call to call) and the other set (``spare``: the one whose draws the host
    may still be copying; ``None``, made when first needed)."""

    chains: Chains
    buffers: Records
    t: int
    spare: Records | None = None


class Plan(NamedTuple):
    """The run's lengths: steps of burn-in, steps per draw, the step after the last draw, and
    the draws a call may hold (the buffers' rows)."""

    burn_in: int
    thin: int
    end: int
    rows: int


def run(
    programs: Programs,
    plan: Plan,
    start: LoopState,
    schedule: Schedule | None,
    policy: ChunkPolicy,
    keep: Keep,
    checkpointer: Checkpointer | None,
    meter: Progress,
    after_first: Callable[[Chains, Chains], None] | None = None,
) -> tuple[LoopState, bool]:
    """Run from ``start`` to the plan's end; returns the progress and whether the run was
    interrupted (Ctrl-C or SIGTERM: the stream and the checkpoint are written first).
    ``after_first(start chains, chains)`` runs after the first call (it may raise)."""
    start = start._replace(chains=with_margin(programs, start.chains, plan.end))
    now = start
    try:
        with _termination_as_interrupt():
            while now.t < plan.end:
                before = now
                now = _advance(programs, plan, now, schedule, policy, keep)
                if after_first is not None and before is start:
                    after_first(start.chains, now.chains)
                meter.update(now.t)
                if keep.stream_due():
                    keep.flush(now.t, now.chains)
                if checkpointer is not None and checkpointer.due():
                    keep.flush(now.t, now.chains)
                    checkpointer.save(now.t, now.chains, keep)
            keep.flush(now.t, now.chains)
            if checkpointer is not None:
                checkpointer.save(now.t, now.chains, keep)
    except KeyboardInterrupt:
        keep.flush(now.t, now.chains, interrupted=True)
        if checkpointer is not None:
            checkpointer.save(now.t, now.chains, keep)
        return now, True
    finally:
        meter.close(now.t)
    return now, False


def _advance(
    programs: Programs,
    plan: Plan,
    now: LoopState,
    schedule: Schedule | None,
    policy: ChunkPolicy,
    keep: Keep,
) -> LoopState:
    """One call of the compiled loop (module docstring); every call boundary is invisible in
    the draws."""
    t, budget = now.t, policy.budget()
    started, events = time.perf_counter(), compile_events.count()
    buffers = now.buffers
    if t < plan.burn_in and schedule is not None and t < schedule.end:
        stop = schedule.next_point(t)
        n = min(budget, stop - t)
        point = schedule.points[stop] if t + n == stop else None
        chains = programs.warm(now.chains, t, n, point)
        jax.block_until_ready(chains)
        # a call that adapted is not timed: its time is not its steps'
        adapted = point is not None
        policy.record(n, time.perf_counter() - started, compiled(events) or adapted)
        return now._replace(chains=chains, t=t + n)
    if t < plan.burn_in:
        draws, steps = 1, min(budget, plan.burn_in - t)
        complete = False
    else:
        to_boundary = plan.thin - (t - plan.burn_in) % plan.thin
        if to_boundary == plan.thin and plan.thin <= budget:
            draws = min(budget // plan.thin, plan.rows, (plan.end - t) // plan.thin)
            steps = plan.thin
        else:
            draws, steps = 1, min(budget, to_boundary)
        complete = steps == to_boundary
    chains, filled = programs.sample(now.chains, buffers, t, draws, steps, steps == plan.thin)
    spare = keep.settle() or now.spare  # the last call's draws, copied while this call runs
    chains = located(programs, now.chains, chains, steps)
    if complete:  # its draws wait for the next call's launch; that call writes into the spare
        keep.add(filled, draws, chains)
        filled, spare = spare if spare is not None else _like(filled), filled
    jax.block_until_ready(chains)
    policy.record(draws * steps, time.perf_counter() - started, compiled(events))
    return LoopState(chains, filled, t + draws * steps, spare)


def _like(buffers: Records) -> Records:
    """A second set of draw buffers shaped and placed like ``buffers`` (committed to their
    devices only where they are: the programs' cache tells the two apart)."""

    def like(b: jax.Array) -> jax.Array:
        return jax.device_put(np.zeros(b.shape, b.dtype), b.sharding if b.committed else None)

    return jax.tree.map(like, buffers)


def compiled(events: int) -> bool:
    """Whether anything was traced or compiled since ``events`` was counted."""
    return compile_events.count() != events


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

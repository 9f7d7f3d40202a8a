"""What a run keeps of its draws, passed to the loop as one object: in memory, scored on a test
set as they are made, written to a directory part by part.

``bdl.sample``'s ``keep_draws``, ``evaluate`` and ``stream_to`` build a :class:`Keep`
(:func:`settings` checks them before anything compiles). The loop hands it each call's buffers
(:meth:`Keep.add`) and, once it has launched the next call, has them taken
(:meth:`Keep.settle`): the running evaluation scores them on the device, and the draws are
copied to the host once, only when something there wants them
(:class:`bdl.sampling.kept.buffers.DrawTable` in memory, the stream's pending part). The checkpoint
asks it for what it must store (:meth:`Keep.checkpoint_header`, :meth:`Keep.new_part`,
:meth:`Keep.evaluation_arrays`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bdl.compile.target import Target
from bdl.evaluation.curve import curve_rows, evaluation_result
from bdl.evaluation.running import Accumulator, RunningBMA, final_metrics, update_chunk
from bdl.sampling.checkpoints import state as checkpoint_io
from bdl.sampling.kept import stream as stream_io
from bdl.sampling.kept.buffers import DrawTable, Records, RunFields
from bdl.sampling.kept.stream import StreamWriter
from bdl.sampling.kept.stream import check_directory as check_stream
from bdl.sampling.run.carry import Chains
from bdl.sampling.samples import Samples


@dataclasses.dataclass(frozen=True)
class Settings:
    """``keep_draws``, the running evaluation (bound to the target) and the stream directory."""

    keep_draws: bool
    accumulator: Accumulator | None
    stream_to: Path | None

    def record(self) -> dict[str, Any]:
        """What a checkpoint records of these settings (a resumed run must give the same)."""
        return {
            "keep_draws": self.keep_draws,
            "evaluate": None if self.accumulator is None else self.accumulator.fingerprint(),
            "stream_to": None if self.stream_to is None else str(self.stream_to),
        }


def settings(
    keep_draws: Any,
    evaluate: Any,
    stream_to: Any,
    target: Target,
    num_chains: int,
    saved: dict[str, Any] | None = None,
    directory: Path | None = None,
) -> Settings:
    """``keep_draws``, ``evaluate`` and ``stream_to`` checked (before any compilation); a
    resumed run (``saved``: its checkpoint's record) takes the checkpoint's, and a different
    one is an error."""
    was = saved or {}
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
    chosen = Settings(keep_draws, accumulator, path)
    if saved is not None:
        now = chosen.record()
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
    return chosen


def _shown(name: str, value: Any) -> str:
    if name == "evaluate":
        return "None" if value is None else "an evaluation of other test data or settings"
    return repr(value)


class Keep:
    """A run's sinks (module docstring). ``table``: the draws in memory (``None`` without
    ``keep_draws``); ``stream``: the stream writer; ``shapes``: the buffers' shapes
    (:func:`bdl.sampling.kept.buffers.template`); ``run``: the run's fields of every ``Samples``.
    The running evaluation's sums stay on the device (``bma``), its curve points on the host
    (``curve``, one array per call)."""

    def __init__(
        self,
        chosen: Settings,
        table: DrawTable | None,
        stream: StreamWriter | None,
        shapes: Records,
        run: RunFields,
        monitor: tuple[int, Any] | None = None,
    ) -> None:
        self.settings = chosen
        # the convergence check's function-space values, computed on each chunk's draws while
        # they are still on the device (bdl.sampling.verdict.convergence_check.run_monitor): (num,
        # function)
        self._monitor = monitor if table is not None else None
        self._monitored: list[np.ndarray] = []  # on the host, (chain, draw, k) per call
        self._monitoring: tuple[Any, int] | None = None  # the last call's, still on the device
        self.run = run
        self.table = table
        self.stream = stream
        self._pending: list[Records] = []
        self._added: tuple[Records, int, Chains] | None = None  # a call's, not yet taken
        self._shapes = shapes
        self.accumulator = chosen.accumulator
        self.bma = None if self.accumulator is None else self.accumulator.init()
        self.curve: list[np.ndarray] = []
        self.checkpointed = 0 if table is None else table.size  # draws in checkpoint parts

    @property
    def wants_host(self) -> bool:
        return self.table is not None or self.stream is not None

    # ------------------------------------------------------------------ a call's draws
    def add(self, buffers: Records, draws: int, chains: Chains) -> None:
        """Hand over a call's buffers (``draws`` rows made) and the chains after it, to be
        taken by the next :meth:`settle` (the loop's next call must not write into them
        before). A call's draws not yet taken are taken first."""
        self.settle()
        self._added = (buffers, draws, chains)

    def settle(self) -> Records | None:
        """Take the draws of the last :meth:`add` (score them, copy them to the host); returns
        their buffers, free for a call to write into again (``None``: nothing was added)."""
        if self._added is None:
            return None
        buffers, draws, chains = self._added
        self._take(buffers, draws, chains)
        self._added = None
        return buffers

    def _take(self, buffers: Records, draws: int, chains: Chains) -> None:
        """Score a call's buffers (``draws`` rows made) and copy them where they are kept."""
        if self.accumulator is not None:  # scored on the device: the draws need not leave it
            collected, mask, steps = buffers.collected, buffers.is_sample, buffers.steps
            status = chains.status
            self.bma, rows = update_chunk(
                self.accumulator, self.bma, collected["position"], mask, steps, status.diverged,
                status.step, jnp.asarray(draws, jnp.int32),
            )  # fmt: skip
            # sliced on the host: slicing on the device compiles a program per draw count
            host_mask, host_steps, rows = (
                np.asarray(a)[:draws] for a in jax.device_get((mask, steps, rows))
            )
            self.curve.append(curve_rows(rows, host_steps, host_mask))
        if not self.wants_host:
            return
        if self._monitor is not None:  # dispatched first: it runs while the draws are copied
            self._take_monitored()  # the previous call's rows: only they stay, on the host
            self._monitoring = (self._monitor[1](buffers.collected["position"], draws), draws)
        # the table copies its rows into place at once; the stream's pending parts wait
        records = Records.from_device(buffers, draws, copy=self.stream is not None)
        if self.table is not None:
            self.table.add(records)
        if self.stream is not None:
            self._pending.append(records)

    def monitored(self) -> tuple[int, np.ndarray] | None:
        """``(num, values)``: the run's function-space values of its kept draws
        ``(chain, draw, k)``, on ``num`` held-out inputs; ``None`` when there are none for
        every draw in memory (no monitor, or a resumed run's earlier draws)."""
        if self._monitor is None or self.table is None:
            return None
        self.settle()
        self._take_monitored()
        if not self._monitored or sum(v.shape[1] for v in self._monitored) != self.table.size:
            return None
        values = np.concatenate(self._monitored, axis=1)
        made = self.table.is_sample[: self.table.size]
        return self._monitor[0], values if made.all() else values[:, made]

    def _take_monitored(self) -> None:
        """The last call's monitored rows copied to the host (a buffer's worth of rows per call
        held on the device for a whole run would grow with its calls)."""
        if self._monitoring is not None:
            values, draws = self._monitoring
            self._monitored.append(np.asarray(values)[:, :draws])
            self._monitoring = None

    # ------------------------------------------------------------------ the stream
    def stream_due(self) -> bool:
        """Whether the stream's pending draws (those taken) fill a part or are overdue."""
        if self.stream is None or not self._pending:
            return False
        size = sum(np.asarray(a).nbytes for r in self._pending for a in jax.tree.leaves(r))
        return size >= stream_io.PART_BYTES or self.stream.overdue()

    def flush(self, t: int, chains: Chains, interrupted: bool = False) -> None:
        """Take the last call's draws, then write the stream's pending draws as a part and
        its index (the run's fields)."""
        self.settle()
        if self.stream is None:
            return
        index = self.run.samples(None, t, interrupted, chains)
        part = None
        if self._pending:
            table = DrawTable(self._shapes, sum(r.num_draws for r in self._pending))
            for records in self._pending:
                table.add(records)
            part = dataclasses.replace(index, **table.fields(), kept_draws=True)
        self.stream.write(part, index)
        self._pending = []

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_header(self) -> dict[str, Any]:
        stream_parts = None if self.stream is None else self.stream.parts
        return {"streaming": {**self.settings.record(), "stream_parts": stream_parts}}

    def new_part(self) -> list[np.ndarray] | None:
        """The draws made since the last checkpoint, as a part's arrays (``None``: none)."""
        self.settle()
        if self.table is None or self.table.size == self.checkpointed:
            return None
        part = self.table.records(self.checkpointed).as_rows()
        self.checkpointed = self.table.size
        return checkpoint_io.host_leaves(part)

    def evaluation_arrays(self) -> list[np.ndarray] | None:
        self.settle()
        if self.accumulator is None:
            return None
        return [*checkpoint_io.host_leaves(self.bma), self._curve_array()]

    def restore_evaluation(self, arrays: tuple[np.ndarray, ...], directory: Path) -> None:
        if self.accumulator is None:
            return
        self.bma = checkpoint_io.restore(self.bma, list(arrays[:-1]), directory)
        self.curve = [arrays[-1]]

    def _curve_array(self) -> np.ndarray:
        rows = [np.zeros((0, 3 + len(self.accumulator.names)), np.float64), *self.curve]
        return np.concatenate(rows)

    # ------------------------------------------------------------------ the result
    def result(self, t: int, chains: Chains, interrupted: bool) -> Samples:
        """The run's :class:`Samples` (the stream's index gets its last version, with the
        final status and evaluation)."""
        self.settle()
        evaluation = None
        if self.accumulator is not None:
            healthy = ~chains.status.diverged
            final = np.asarray(final_metrics(self.accumulator, self.bma, healthy))
            evaluation = evaluation_result(
                self.accumulator.names, self.curve, final, self.accumulator.n
            )
        if self.stream is not None:
            last = self.run.samples(None, t, interrupted, chains, evaluation)
            self.stream.write(None, last)
        fields = None if self.table is None else self.table.fields()
        return self.run.samples(fields, t, interrupted, chains, evaluation)

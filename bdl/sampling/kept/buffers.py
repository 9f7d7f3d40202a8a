"""The draws a run records: the device buffers a chunk writes them to, the host table a run
keeps them in, and the :class:`Samples` made from it.

A chunk program (:mod:`bdl.sampling.run.program`) records each draw's state into buffers laid out
as ``Samples`` holds draws, chain-major: what a draw holds (``kernel.collect``) and the step's
``Info`` (float32) as ``(chain, row, ...)``, and whether the step was a sample
(``kernel.is_sample``) and its index as ``(row,)`` — :class:`Records`. The buffers are donated
from one call to the next, so a call writes its rows in place: no buffer is allocated or
zeroed per call, whatever its number of rows. :class:`DrawTable` holds a run's draws on the host
in the same layout, allocated once for every draw the run can make and filled as calls finish:
each draw is copied once off the device into its place, and nothing is concatenated at the end.
The pages of a draw not yet made are never touched, so memory grows with the draws made.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np

from bdl.kernels.base import Info, Kernel
from bdl.sampling.run.carry import Chains
from bdl.sampling.samples import Samples
from bdl.utils.identity_map import PairMemo

PyTree = Any


class Records(NamedTuple):
    """Draws, chain-major: what each draw holds ``(chain, draw, ...)``, the steps' ``Info``
    ``(chain, draw)``, whether each step was a sample ``(draw,)`` and each draw's step
    ``(draw,)``."""

    collected: dict[str, PyTree]
    info: Info
    is_sample: Any
    steps: Any

    @classmethod
    def from_device(cls, buffers: Records, draws: int, copy: bool = True) -> Records:
        """The first ``draws`` rows of a chunk's buffers on the host. With ``copy`` they are
        the records' own (the buffers themselves are left to the next call, which may reuse
        their memory); without, views of the host's copy of the buffers (on a CPU possibly the
        buffers themselves), for a caller that copies them before the next call."""

        def rows(a: Any, chain_major: bool = True) -> np.ndarray:
            a = np.asarray(a)
            a = a[:, :draws] if chain_major else a[:draws]
            return np.array(a) if copy else a

        return cls(
            jax.tree.map(rows, buffers.collected),
            Info(*(rows(x) for x in buffers.info)),
            rows(buffers.is_sample, False),
            rows(buffers.steps, False),
        )

    @classmethod
    def from_rows(cls, rows: Records) -> Records:
        """Records from arrays in the draw-major layout of a checkpoint's parts."""
        swap = lambda a: np.swapaxes(np.asarray(a), 0, 1)  # noqa: E731
        return cls(
            jax.tree.map(swap, rows.collected),
            Info(*(swap(x) for x in rows.info)),
            np.asarray(rows.is_sample),
            np.asarray(rows.steps),
        )

    def as_rows(self) -> Records:
        """These records draw-major, ``(draw, chain, ...)`` (a checkpoint's parts)."""
        swap = lambda a: np.ascontiguousarray(np.swapaxes(np.asarray(a), 0, 1))  # noqa: E731
        return Records(
            jax.tree.map(swap, self.collected),
            Info(*(swap(x) for x in self.info)),
            self.is_sample,
            self.steps,
        )

    @property
    def num_draws(self) -> int:
        return int(np.shape(self.steps)[0])


#: per (kernel as given, target): what a draw holds, by the states' shapes
_COLLECTED: PairMemo[dict] = PairMemo()


def template(kernel: Kernel, states: Any, rows: int, owners: tuple | None = None) -> Records:
    """Shapes and dtypes of buffers of ``rows`` draws of the chains ``states`` (leading chain
    axis), by abstract evaluation of ``kernel.collect`` (nothing is compiled). With ``owners``
    (the kernel as the user gave it and the target) the evaluation is remembered for them and
    the states' shapes: a repeated run does not trace it again."""
    shapes = jax.tree.structure(states), tuple((x.shape, x.dtype) for x in jax.tree.leaves(states))
    known = {} if owners is None else _COLLECTED.get_or_compute(*owners, dict)
    if shapes not in known:
        known[shapes] = jax.eval_shape(jax.vmap(kernel.collect), states)
    collected = known[shapes]
    chains = jax.tree.leaves(states)[0].shape[0]

    def per_draw(shape: Any) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct((chains, rows, *shape.shape[1:]), shape.dtype)

    info = Info(*(jax.ShapeDtypeStruct((chains, rows), np.float32) for _ in Info._fields))
    return Records(
        jax.tree.map(per_draw, collected),
        info,
        jax.ShapeDtypeStruct((rows,), np.bool_),
        jax.ShapeDtypeStruct((rows,), np.int32),
    )


def zeros(shapes: Records) -> Records:
    """Host buffers of zeros shaped like ``shapes`` (the first call's buffers)."""
    return jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), shapes)


def nbytes(shapes: Records) -> int:
    """Bytes of one row (draw) of buffers shaped like ``shapes``."""
    rows = shapes.steps.shape[0]
    total = sum(int(np.prod(s.shape)) * np.dtype(s.dtype).itemsize for s in jax.tree.leaves(shapes))
    return total // max(rows, 1)


class DrawTable:
    """A run's draws on the host for up to ``capacity`` draws (module docstring), shaped per
    draw like ``shapes`` (:func:`template`)."""

    def __init__(self, shapes: Records, capacity: int) -> None:
        def empty(shape: Any) -> np.ndarray:  # (chain, row, ...) → (chain, capacity, ...)
            chains, _, *rest = shape.shape
            return np.empty((chains, capacity, *rest), shape.dtype)

        self.collected = jax.tree.map(empty, shapes.collected)
        self.info = Info(*(empty(s) for s in shapes.info))
        self.is_sample = np.empty((capacity,), bool)
        self.steps = np.empty((capacity,), np.int64)
        self.size = 0

    def add(self, records: Records) -> None:
        """Append draws (copied into place)."""
        n = records.num_draws
        k = slice(self.size, self.size + n)

        def put(table: np.ndarray, rows: np.ndarray) -> None:
            table[:, k] = rows

        jax.tree.map(put, self.collected, records.collected)
        for table, rows in zip(self.info, records.info, strict=True):
            put(table, rows)
        self.is_sample[k] = records.is_sample
        self.steps[k] = records.steps
        self.size += n

    def records(self, start: int = 0) -> Records:
        """The draws from ``start`` on (views)."""
        k = slice(start, self.size)
        return Records(
            jax.tree.map(lambda a: a[:, k], self.collected),
            Info(*(a[:, k] for a in self.info)),
            self.is_sample[k],
            self.steps[k],
        )

    def fields(self) -> dict[str, Any]:
        """The draws as :class:`Samples` holds them, those after non-sample steps left out
        (copied only when there are such draws)."""
        made = self.records()
        keep = np.asarray(made.is_sample, bool)
        every = bool(keep.all())

        def kept(a: np.ndarray) -> np.ndarray:
            return a if every else a[:, keep]

        collected = jax.tree.map(kept, made.collected)
        return {
            "positions": collected["position"],
            "extra": {k: v for k, v in collected.items() if k != "position"},
            "info": {k: kept(v) for k, v in made.info._asdict().items()},
            "steps": made.steps if every else made.steps[keep],
        }


class RunFields:
    """What every :class:`Samples` of a run shares besides its draws: the kernel's name, the
    run's record (``meta``), the adapted values (from warm-up's state in the chains) and the
    per-draw fields of a run with no draws (``empty``)."""

    def __init__(self, kernel: Kernel, meta: dict[str, Any], warmup: Any, empty: Records) -> None:
        self.kernel, self.meta, self.warmup = kernel, meta, warmup
        self.empty = DrawTable(empty, 0).fields()

    def samples(
        self,
        fields: dict[str, Any] | None,
        steps_done: int,
        interrupted: bool,
        chains: Chains,
        evaluation: Any = None,
    ) -> Samples:
        """A :class:`Samples` of the draws ``fields`` (:meth:`DrawTable.fields`; ``None``: a
        run's fields alone, with no draws)."""
        status = jax.device_get(chains.status)
        adapted = None if self.warmup is None else self.warmup.final(chains.warmup)
        return Samples(
            **(self.empty if fields is None else fields),
            kernel=self.kernel.name,
            steps_done=steps_done,
            interrupted=interrupted,
            diverged=np.asarray(status.diverged, bool),
            divergence_step=np.asarray(status.step, np.int64),
            adapted=adapted,
            meta=self.meta,
            evaluation=evaluation,
            kept_draws=fields is not None,
        )

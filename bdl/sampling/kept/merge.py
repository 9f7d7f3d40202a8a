"""Join the draws of a run's processes into one :class:`Samples`.

With several processes (``jax.distributed``), each process of a ``bdl.sample`` run draws a
contiguous block of the chains and returns (or saves) those; its ``meta["layout"]["chains"]``
says which. :func:`merge_samples` checks that the parts come from one run and cover every chain
once, and concatenates them along the chain axis.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from bdl.compile.target import Target
from bdl.sampling.kept.loading import load_samples
from bdl.sampling.samples import Samples
from bdl.sampling.verdict.bias_check import check_bias
from bdl.sampling.verdict.convergence_check import check_convergence


def merge_samples(parts: Sequence[Samples | str | os.PathLike], *, target: Any = None) -> Samples:
    """One :class:`Samples` from the per-process parts of a run (objects or saved files).

    The parts may come in any order; they must share the model, kernel, settings and draw
    steps, and their chain blocks must cover ``0 … num_chains − 1`` exactly once. The result is
    the one-process run's ``Samples`` (chains in order).

    Its convergence verdict is recomputed over all the chains
    (:func:`bdl.sampling.check_convergence`): from the draws alone for a model checked in
    parameter space; a network's, checked on its predictions, needs ``target`` (the compiled
    model), without which the merged ``convergence`` is ``None`` (as it is for parts that carry
    no verdict, unless ``target`` is given). Its bias part (:func:`bdl.sampling.check_bias`)
    takes full-data gradients at the draws, so it is recomputed only with ``target``.

    Args:
        parts: the parts, :class:`Samples` or paths of saved ones.
        target: the compiled model the run sampled, to check a network's convergence and any
            model's bias.

    Returns:
        The run's :class:`Samples`, chains in order.

    Raises:
        ValueError: no part, parts of different runs, or chain blocks that overlap or leave a
            gap.
        TypeError: a part that is neither a :class:`Samples` nor a path.
    """
    if isinstance(parts, Samples | str | os.PathLike) or not isinstance(parts, Sequence):
        raise TypeError(
            "merge_samples needs a list of Samples or of files saved by Samples.save; got "
            f"{type(parts).__name__}."
        )
    if not parts:
        raise ValueError("merge_samples needs at least one part; got an empty list.")
    if target is not None and not isinstance(target, Target):
        raise TypeError(
            "merge_samples(target=...) must be the compiled model the parts were drawn from "
            f"(bdl.compile(...)); got {type(target).__name__}."
        )
    loaded = [p if isinstance(p, Samples) else load_samples(p) for p in parts]
    blocks = [_block(s, i) for i, s in enumerate(loaded)]
    order = np.argsort([b[0] for b in blocks], kind="stable")
    loaded, blocks = [loaded[i] for i in order], [blocks[i] for i in order]
    first = loaded[0]
    total = first.meta["settings"]["num_chains"]
    covered = 0
    for s, (start, stop) in zip(loaded, blocks, strict=True):
        for name in ("model", "kernel", "settings"):
            if s.meta.get(name) != first.meta.get(name):
                raise ValueError(
                    f"merge_samples: the parts come from different runs (their {name} differ: "
                    f"{first.meta.get(name)!r} and {s.meta.get(name)!r})."
                )
        if s.steps_done != first.steps_done or not np.array_equal(s.steps, first.steps):
            raise ValueError(
                "merge_samples: the parts stopped at different steps (one was interrupted, or "
                "resumed further); resume the shorter ones to the same num_steps first."
            )
        if start != covered:
            what = "twice" if start < covered else "by no part"
            chains = f"{min(start, covered)}–{max(start, covered) - 1}"
            raise ValueError(
                f"merge_samples: chains {chains} are covered {what}; give each process's part "
                "exactly once."
            )
        covered = stop
    if covered != total:
        raise ValueError(
            f"merge_samples: the parts cover chains 0–{covered - 1} of the run's {total}; the "
            f"parts of chains {covered}–{total - 1} are missing."
        )

    def joined(*trees: Any) -> Any:
        return jax.tree.map(lambda *a: np.concatenate([np.asarray(x) for x in a], axis=0), *trees)

    adapted = None if first.adapted is None else joined(*(s.adapted for s in loaded))
    layout = dict(first.meta.get("layout", {}))
    layout.update(chains=[0, total], processes=len(loaded))
    merged = Samples(
        positions=joined(*(s.positions for s in loaded)),
        extra=joined(*(s.extra for s in loaded)),
        info=joined(*(s.info for s in loaded)),
        steps=np.asarray(first.steps),
        kernel=first.kernel,
        steps_done=first.steps_done,
        interrupted=any(s.interrupted for s in loaded),
        diverged=joined(*(s.diverged for s in loaded)),
        divergence_step=joined(*(s.divergence_step for s in loaded)),
        runaway=joined(*(s.runaway for s in loaded)),
        runaway_step=joined(*(s.runaway_step for s in loaded)),
        runaway_reason=[r for s in loaded for r in s.runaway_reason],
        adapted=adapted,
        meta={**first.meta, "layout": layout},
    )
    checked = [s.convergence for s in loaded if s.convergence is not None]
    space = checked[0].space if checked else None
    if target is None and space != "parameter":
        return merged  # a network's predictions need the model; unchecked parts say nothing
    convergence = check_convergence(merged, target, space=space)
    if convergence is not None and target is not None:  # the bias part takes gradients
        convergence = convergence.with_bias(check_bias(merged, target))
    return dataclasses.replace(merged, convergence=convergence)


def _block(samples: Samples, i: int) -> tuple[int, int]:
    """The chains ``[start, stop)`` of the run that part ``i`` holds."""
    meta = samples.meta
    if "settings" not in meta:
        raise ValueError(
            f"merge_samples: part {i} has no run record (meta); give draws returned or saved by "
            "bdl.sample."
        )
    start, stop = (meta.get("layout") or {}).get("chains", [0, meta["settings"]["num_chains"]])
    if stop - start != samples.num_chains:
        raise ValueError(
            f"merge_samples: part {i} says it holds chains {start}–{stop - 1} but has "
            f"{samples.num_chains} chains."
        )
    return int(start), int(stop)

"""Divergences that float32 causes: at the state where a chain failed, the full-data energy or
its gradient is NaN or ±∞ in float32 and finite in float64.

The divergence replay (:func:`bdl.sampling.run.failures.located`) leaves each chain that failed at
the state whose step failed, and records the minibatch energy there. For the first chain of a
call whose recorded energy is NaN or ±∞ (not a far-out chain, whose energy is finite),
:func:`warn_if_float32` evaluates U(θ) and ∇U(θ) at that state in float64
(:func:`bdl.compile.precision.float64_note`; the float32 energy there is known not to be
finite); when both are finite, a :class:`~bdl.sampling.samples.DivergenceWarning` says so and
how to run in float64. Nothing of this runs in a run that does not diverge, nor in one that is
in float64 already.
"""

from __future__ import annotations

import warnings
from typing import Any

import jax
import numpy as np

from bdl.compile.precision import float64_note
from bdl.compile.start_check import start_is_finite
from bdl.compile.target import Target
from bdl.kernels.base import Kernel
from bdl.sampling.samples import DivergenceWarning
from bdl.utils.dtypes import float_dtype


def warn_if_float32(
    target: Target, kernel: Kernel, states: Any, failed: np.ndarray, steps: np.ndarray
) -> None:
    """Warn when the first chain in ``failed`` stopped where float32, not the model, makes the
    energy or its gradient non-finite.

    Args:
        target: the run's target.
        kernel: the run's kernel (it says where the position is in a state).
        states: the replayed kernel states, with a leading chain axis; a failed chain's is the
            state whose step failed.
        failed: per chain, whether it newly failed in this call at a state whose float32
            energy is NaN or ±∞.
        steps: per chain, its divergence step.
    """
    chains = np.flatnonzero(np.asarray(failed))
    if chains.size == 0 or float_dtype() == np.float64 or jax.process_count() > 1:
        return
    c = int(chains[0])
    position = kernel.position(jax.tree.map(lambda a: a[c], states))
    note = float64_note(target, position, start_is_finite)
    if note:
        warnings.warn(
            f"chain {c} diverged at step {int(steps[c])}: its energy is NaN or ±∞ in float32 at "
            f"the state it stopped at, but {note}.",
            DivergenceWarning,
            stacklevel=2,
        )

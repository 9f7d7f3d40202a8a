"""Divergence: where a chain went non-finite, found exactly.

In the sampling phase a draw's steps are checked only at its last step (diagnostics cost only
where they are recorded); a chain that fails is frozen at the draw's start, its divergence step
provisionally the draw's last (:mod:`bdl.sampling.program`). When a call leaves a chain newly
diverged, the draw is replayed from that start with every step checked — the same keys and
minibatches — and the first failing step replaces the provisional one. Nothing of this runs
unless a chain diverged: a healthy call costs one copy of a flag per chain to the host.

A chain that cannot leave its start at all, because the energy or its gradient is not finite
there, is refused after the run's first call with the rows or the prior responsible named
(:func:`refuse_bad_starts`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bdl.compile.start_check import cannot_start, explain_start, start_is_finite
from bdl.compile.target import Target
from bdl.kernels.base import Kernel
from bdl.sampling.carry import Chains, Status
from bdl.sampling.program import Programs
from bdl.utils.owner_jit import owner_jit


def located(programs: Programs, before: Chains, after: Chains, steps: int) -> Chains:
    """``after`` (the chains after a call of ``steps`` steps per draw from ``before``) with the
    exact divergence step of every chain that diverged in the call."""
    was, now = jax.device_get((before.status.diverged, after.status.diverged))
    if np.array_equal(was, now):
        return after
    status = jax.device_get(after.status)
    fresh = np.asarray(status.diverged) & ~np.asarray(was)
    found = np.asarray(status.step).copy()
    clean = Status(jnp.zeros_like(after.status.diverged), jnp.full_like(after.status.step, -1))
    for start in sorted({int(found[c]) - steps + 1 for c in np.flatnonzero(fresh)}):
        replay = programs.replay(after._replace(status=clean), start, steps)
        seen = jax.device_get(replay.status)
        here = fresh & (found - steps + 1 == start) & np.asarray(seen.diverged)
        found = np.where(here, np.asarray(seen.step), found)
    step = programs.layout.shard(jnp.asarray(found, jnp.int32))
    return after._replace(status=after.status._replace(step=step))


def refuse_bad_starts(
    target: Target, kernel: Kernel, start: Chains, after: Chains, first: int = 0
) -> None:
    """Raise ``ValueError`` when a chain could not leave its start because the full-data energy
    or its gradient is not finite there, naming the term responsible: the rows of the data on
    which the network or the likelihood is not finite, or the prior
    (:func:`bdl.compile.start_check.explain_start`). Called after a run's first call: a chain
    with a fixed step that diverged at step 0, or a warm-up chain that has not taken a step
    (its guard's energy is still unset), is probed; a healthy run compiles nothing for this.
    ``first``: the run's index of this process's first chain."""
    status = jax.device_get(after.status)
    if isinstance(after.warmup, tuple):
        stuck = np.asarray(status.diverged) & (np.asarray(status.step) == 0)
    else:
        stuck = ~np.isfinite(np.asarray(jax.device_get(after.warmup.guard.energy)))
    if not stuck.any():
        return

    def position(c: int) -> object:
        return kernel.position(jax.tree.map(lambda a: a[c], start.states))

    bad = [int(c) for c in np.flatnonzero(stuck) if not bool(_finite_at(target, position(c)))]
    if not bad:
        return  # the start is finite: the first step went wrong, a divergence to report
    why = explain_start(target, position(bad[0]))
    raise ValueError(
        cannot_start(bad, first, "the energy U(θ) or its gradient is", why) + " No draw was "
        "kept: a chain started there diverges at its first step."
    )


def start_explanation(target: Target, kernel: Kernel, start: Chains, diverged: np.ndarray) -> str:
    """For the report of chains that diverged: why the first of them whose start has a
    non-finite energy or gradient could not have run well (``""`` when every diverged chain's
    start is finite: the dynamics went wrong, not the model there). Compiles the full-data
    gradient: for the failure path only."""
    for c in np.flatnonzero(np.asarray(diverged)):
        position = kernel.position(jax.tree.map(lambda a, c=c: a[c], start.states))
        if not bool(_finite_at(target, position)):
            return f"Chain {int(c)}'s start was already bad: {explain_start(target, position)}."
    return ""


@owner_jit
def _finite_at(target: Target, position: object) -> jax.Array:
    return start_is_finite(target, position)

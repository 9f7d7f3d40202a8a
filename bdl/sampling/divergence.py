"""Divergence: where a chain went non-finite, found exactly.

In the sampling phase a draw's steps are checked only at its last step (diagnostics cost only
where they are recorded); a chain that fails is frozen at the draw's start, its divergence step
provisionally the draw's last (:mod:`bdl.sampling.program`). When a call leaves a chain newly
diverged, the draw is replayed from that start with every step checked — the same keys and
minibatches — and the first failing step replaces the provisional one. Nothing of this runs
unless a chain diverged: a healthy call costs one copy of a flag per chain to the host.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bdl.sampling.carry import Chains, Status
from bdl.sampling.program import Programs


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

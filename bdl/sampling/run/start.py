"""A run's start: every chain's position, kernel state, minibatch stream and key, and its first
warm-up values, in one compiled program, which also evaluates the full-data energy at every
chain's start (:func:`bdl.compile.start_check.start_value_is_finite`): a start where it is not
finite is refused before sampling, naming the rows of the data or the prior responsible. With
``init="auto"``, a chain whose default start (a prior draw, say) is not finite starts from the
declared parameters plus noise (``"perturbed"``) instead.

The same program measures each chain's far-out reference (:mod:`bdl.sampling.run.failures`):
its minibatch energies on the minibatches of its first steps, so that the chunk programs,
compiled with every optimisation, carry no copy of the step's energy for it.

The program runs once per run, so on a CPU it is compiled with fewer optimisations, which
halves its compilation and computes the same values (:func:`bdl.utils.owner_jit.owner_jit`,
``once=True``).

``jax.random.key(seed)`` is split into four keys: the starting positions, the kernel states, the
minibatch streams and the per-chain run keys. Every chain's start and keys come from the seed
alone, before the chains are split over processes and devices, so a chain's draws do not depend
on where it runs. Warm-up's first values come from a stream of their own
(:func:`bdl.sampling.run.program.warmup_key` at step 0).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bdl.compile.auto_start import from_prior_draws, redrawn_where_far
from bdl.compile.start_check import (
    cannot_start,
    explain_start,
    start_is_finite,
    start_value_is_finite,
)
from bdl.compile.target import Target
from bdl.kernels.base import Kernel
from bdl.sampling.run.carry import Chains, healthy_status, reference_at
from bdl.sampling.run.program import chain_step, warmup_key
from bdl.sampling.warmup import WarmUp
from bdl.utils.owner_jit import owner_jit
from bdl.utils.rng import initialisation_draws


def start_chains(
    target: Target,
    kernel: Kernel,
    warmup: WarmUp | None,
    key: jax.Array,
    num_chains: int,
    init: Any,
    chains: tuple[int, int],
) -> tuple[Chains, jax.Array]:
    """The chains ``[start, stop)`` of a run of ``num_chains`` with key ``key``, and their run
    keys; with ``warmup``, each chain's first warm-up values (one chain at a time, as at every
    adaptation point). A ``ValueError`` naming the network's rows or the prior when the
    full-data energy is not finite at a chain's start (checked in the same program)."""
    out, chain_keys, finite = _start(target, kernel, warmup, key, num_chains, init, chains)
    finite = np.asarray(jax.device_get(finite), bool).reshape(-1)
    if not finite.all():
        bad = [int(c) for c in np.flatnonzero(~finite)]
        position = kernel.position(jax.tree.map(lambda a: a[bad[0]], out.states))
        why = explain_start(target, position)
        raise ValueError(
            cannot_start(bad, chains[0], "the energy U(θ) is", why) + " Nothing was sampled: a "
            "chain started there diverges at its first step."
        )
    return out, chain_keys


def _finite_or_perturbed(
    target: Target, positions: Any, key: jax.Array, num_chains: int, finite: Any = None
) -> Any:
    """``init="auto"``'s positions, with the ``"perturbed"`` start (the declared parameters plus
    a little noise) for every chain whose energy or gradient is not finite at its ``"auto"``
    draw: a prior draw can reach where the likelihood overflows (exp(x·w) of a Poisson
    regression), which is no reason to refuse a default start. The gradient is checked too:
    compiled, a Poisson log-likelihood y·log(exp(η)) − exp(η) can stay finite where exp(η) is
    infinite (XLA simplifies log(exp(η)) to η) while its gradient (y − exp(η))·x is not, and
    no step can leave such a start."""
    if finite is None:
        finite = jax.lax.map(lambda p: start_is_finite(target, p), positions)
    fallback = target.init_positions(key, num_chains, "perturbed")

    def pick(drawn: jax.Array, declared: jax.Array) -> jax.Array:
        return jnp.where(finite.reshape(-1, *([1] * (drawn.ndim - 1))), drawn, declared)

    return jax.tree.map(pick, positions, fallback)


@owner_jit(once=True)
def _start(
    target: Target,
    kernel: Kernel,
    warmup: WarmUp | None,
    key: jax.Array,
    num_chains: int,
    init: Any,
    chains: tuple[int, int],
) -> tuple[Chains, jax.Array, jax.Array]:
    """:func:`start_chains`' program; also, per chain, whether U is finite at its start."""
    k_init, k_kernel, k_batch, k_run = jax.random.split(key, 4)
    with initialisation_draws():
        positions = target.init_positions(k_init, num_chains, init)
        if isinstance(init, str) and init == "auto" and "perturbed" in target.INITS:
            finite = None
            if from_prior_draws(target):  # Stan's start where a prior draw cannot start
                positions, finite = redrawn_where_far(target, positions, k_init)
            positions = _finite_or_perturbed(target, positions, k_init, num_chains, finite)
    states = jax.vmap(kernel.init)(positions, jax.random.split(k_kernel, num_chains))
    streams = jax.vmap(target.init_batches)(jax.random.split(k_batch, num_chains))
    chain_keys = jax.random.split(k_run, num_chains)
    start, stop = chains
    mine = (states, streams, chain_keys)
    if (start, stop) != (0, num_chains):
        mine = jax.tree.map(lambda a: a[start:stop], mine)
    states, streams, chain_keys = mine
    finite = jax.lax.map(
        lambda state: start_value_is_finite(target, kernel.position(state)), states
    )
    out = Chains(states, streams, healthy_status(stop - start))
    if warmup is not None:
        keys = jax.random.split(warmup_key(key, 0), num_chains)[start:stop]

        def one(args: tuple) -> tuple:
            state, k = args
            return warmup.init(target, state, k)

        states, adaptation = jax.lax.map(one, (states, keys))
        out = out._replace(states=states, warmup=adaptation)
    return _with_reference(target, kernel, warmup, out, chain_keys), chain_keys, finite


def _with_reference(
    target: Target, kernel: Kernel, warmup: WarmUp | None, chains: Chains, keys: jax.Array
) -> Chains:
    """``chains`` with every chain's far-out reference
    (:func:`~bdl.sampling.run.carry.reference_at`), measured here, once per run, so that the chunk
    programs, compiled with every optimisation, need no copy of the step's energy for it."""
    step = partial(chain_step, target, kernel, warmup, warming=warmup is not None)
    reference = jax.vmap(partial(reference_at, step), in_axes=(0, 0, None))(
        chains, keys, jnp.int32(0)
    )
    return chains._replace(status=chains.status._replace(reference=reference))

"""Divergence: where a chain went non-finite or far out, found exactly.

In the sampling phase a draw's steps are checked only at its last step (diagnostics cost only
where they are recorded); a chain that fails is frozen at the draw's start, its divergence step
provisionally the draw's last (:mod:`bdl.sampling.run.program`). When a call leaves a chain newly
diverged, the draw is replayed from that start with every step checked — the same keys and
minibatches — and the first failing step replaces the provisional one. Nothing of this runs
unless a chain diverged: a healthy call costs one copy of a flag per chain to the host.

A chain that cannot leave its start at all, because the energy or its gradient is not finite
there, is refused after the run's first call with the rows or the prior responsible named
(:func:`refuse_bad_starts`).

**Far-out chains.** A chain can leave π_T without a single non-finite number. pSGLD at a large
step throws chains of a 10-d standard Gaussian to |θ| of 10²–10⁵ in its first steps (its
RMSprop statistic V is then one squared gradient, and G = 1/(λ + √V) is large wherever that
gradient was small); its drift hG∇Ũ is then about h per coordinate, so the way back takes
|θ|/h steps, and beyond |θ| ≈ h·2²⁴ (8·10⁶ at h = 0.5) the update is below half a float32 ulp
of θ and the chain freezes there for good. Every number stays finite, so the non-finite test
never fires. Such a chain is flagged as diverged, at the step that took it out, when at a
checked step (the same steps as the non-finite test) its minibatch energy is beyond

    Ũ(θ_t) > Ū₀ + :data:`~bdl.sampling.run.carry.NOISE_SDS`·s₀ + :data:`FAR_OUT_FACTOR`·(d + 1)·T*,

where Ū₀ and s₀ are the mean and standard deviation of its minibatch energy over
:data:`~bdl.sampling.run.carry.REFERENCE_BATCHES` minibatches at its start (the minibatches of its
first steps; s₀ = 0 with full batches), d the dimension of θ, and T* the hottest temperature of
the target's schedule over the run (no test when T* = 0: optimisation, not sampling).

*The thermal margin.* For a log-concave π_T ∝ exp(−U/T) on ℝ^d, U/T is concentrated near its
minimum: E[U/T] − min U/T ≤ d (the entropy of a log-concave density is at most d above
−log of its maximum) and Var(U/T) ≤ d (Bobkov & Madiman 2011; Nguyen 2014, Wang 2014), d/2
for a Gaussian. A state with U(θ_t) − U(θ₀) > 1000·(d + 1)·T* has, since U(θ₀) ≥ min U and
T ≤ T*, U/T − min U/T ≥ 1000·(d + 1) = d + k·√d with k ≥ 999·(d + 1)/√d ≥ 1998, which
Cantelli's inequality gives a probability of at most 1/(1 + k²) < 2.6·10⁻⁷ under π_T (d = 1,
the worst case; 10⁻⁸ at d = 100), and the exponential tails of a log-concave U/T
(Bobkov & Madiman 2011) far less. A chain that samples π_T, or one on its way there from its
start, whose drift −∇U lowers the energy, does not get there; a chain that started above the
typical set is measured from its own start, so it may descend as far as it likes. A network's
posterior is not log-concave, but around a mode its energy fluctuates as the quadratic
approximation's, by d/2 in variance, and a region 1000·(d + 1)·T above the start has
e^{−1000(d+1)} times the density there, too little for any volume to make up. Under a
temperature schedule a chain can lag behind a cooling π_T by its energy at a hotter one, at most
O(d·T*) above the start: T* covers that.

*The noise allowance.* Ũ is U plus the minibatch noise, of standard deviation σ(θ); by
Cantelli again, a noise beyond 1000·σ has probability below 10⁻⁶ per checked step. σ is
measured at the start (s₀), where a network's per-example losses are at least as spread as at
the posterior in practice; Ū₀ estimates U(θ₀) to s₀/√8. For a model with many data and few
parameters (a logistic regression with d = 11, n = 10⁵, B = 100: s₀ ≈ 5·10³ at the mode, the
thermal margin 1.2·10⁴) this term, not the thermal one, sets the limit.

The replay finds the step exactly as for a non-finite value: the first step of the failing draw
whose starting energy is beyond the limit, the divergence step being the one before it (the
step after which the state is beyond; ``samples.valid`` drops its draw). Like the non-finite
test, the far-out test sees only the checked steps: a chain that leaves and comes back between
two of them is not flagged, and one whose noisy energy hovers at the limit is flagged at its
first crossing inside the draw that found it. The reference costs
:data:`~bdl.sampling.run.carry.REFERENCE_BATCHES` minibatch energies per chain in the run's start
program (:mod:`bdl.sampling.run.start`); a checked step, one comparison. Measured
false alarms: none in 45 healthy runs (docs/sampling.md, "Far-out chains").
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from bdl.compile.start_check import cannot_start, explain_start, start_is_finite
from bdl.compile.target import Target
from bdl.kernels.base import Kernel
from bdl.sampling.run.carry import NOISE_SDS, Chains
from bdl.sampling.run.float32_failures import warn_if_float32
from bdl.sampling.run.program import Programs
from bdl.utils.owner_jit import owner_jit

#: the far-out margin in units of (d + 1)·T*: module docstring
FAR_OUT_FACTOR = 1e3
#: temperature-schedule points read for T*, at most (every step of shorter runs)
SCHEDULE_POINTS = 200_001


def located(programs: Programs, before: Chains, after: Chains, steps: int) -> Chains:
    """``after`` (the chains after a call of ``steps`` steps per draw from ``before``) with the
    exact divergence step, and the energy there, of every chain that diverged in the call."""
    was, now = jax.device_get((before.status.diverged, after.status.diverged))
    if np.array_equal(was, now):
        return after
    status = jax.device_get(after.status)
    fresh = np.asarray(status.diverged) & ~np.asarray(was)
    found = np.asarray(status.step).copy()
    energy = np.asarray(status.energy).copy()
    provisional = found.copy()  # the draws' last steps
    clean = after.status._replace(
        diverged=jnp.zeros_like(after.status.diverged),
        step=jnp.full_like(after.status.step, -1),
        energy=jnp.full_like(after.status.energy, jnp.nan),
    )
    for start in sorted({int(provisional[c]) - steps + 1 for c in np.flatnonzero(fresh)}):
        replay = programs.replay(after._replace(status=clean), start, steps)
        seen = jax.device_get(replay.status)
        here = fresh & (provisional - steps + 1 == start) & np.asarray(seen.diverged)
        found = np.where(here, np.asarray(seen.step), found)
        nan = here & ~np.isfinite(np.asarray(seen.energy))  # not a far-out chain
        warn_if_float32(programs.target, programs.kernel, replay.states, nan, found)
        energy = np.where(here, np.asarray(seen.energy), energy)
    step = programs.layout.shard(jnp.asarray(found, jnp.int32))
    energy = programs.layout.shard(jnp.asarray(energy, after.status.energy.dtype))
    return after._replace(status=after.status._replace(step=step, energy=energy))


def with_margin(programs: Programs, chains: Chains, end: int) -> Chains:
    """``chains`` with the thermal part of their far-out limit for a run of ``end`` steps:
    :data:`FAR_OUT_FACTOR`·(d + 1)·T* (module docstring); +∞ (no test) when T* = 0. Set
    whenever a run starts or resumes, so that a resumed run's T* covers its new steps."""
    hottest = hottest_temperature(programs.target, end)
    # d: the sampled coordinates, θ's (a wrapper's auxiliary variables, such as Entropy-MCMC's
    # guide, live in the momentum and are not counted)
    d = sum(math.prod(np.shape(leaf)) for leaf in jax.tree.leaves(programs.target.initial_position))
    margin = FAR_OUT_FACTOR * (d + 1) * hottest if hottest > 0 else math.inf
    status = chains.status
    value = np.full(status.margin.shape, margin, np.float32)
    margin = programs.layout.shard(jax.device_put(value))  # a transfer that compiles nothing
    return chains._replace(status=status._replace(margin=margin))


def hottest_temperature(target: Target, end: int) -> float:
    """T*: the largest temperature of ``target``'s schedule over steps ``[0, end)`` (every step,
    or :data:`SCHEDULE_POINTS` evenly spaced ones)."""
    constant = target.constant_temperature()
    if constant is not None:
        return float(constant)
    if end <= SCHEDULE_POINTS:
        steps = np.arange(max(end, 1))
    else:
        steps = np.unique(np.linspace(0, end - 1, SCHEDULE_POINTS).astype(np.int64))
    hottest = float(np.max(np.asarray(_temperatures(target, jnp.asarray(steps, jnp.int32)))))
    return hottest if math.isfinite(hottest) else 0.0


@owner_jit
def _temperatures(target: Target, steps: jax.Array) -> jax.Array:
    return jax.vmap(lambda t: jnp.asarray(target.temperature(t), jnp.float32))(steps)


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


def start_explanation(
    target: Target, kernel: Kernel, start: Chains, diverged: np.ndarray, end: Chains | None = None
) -> str:
    """For the report of chains that diverged: why the first of them whose start has a
    non-finite energy or gradient could not have run well (``""`` when every diverged chain's
    start is finite: the dynamics went wrong, not the model there), and, given the chains at
    the run's ``end``, the step and energy at which each far-out chain left (module docstring).
    Compiles the full-data gradient: for the failure path only."""
    why = far_out_explanation(end) if end is not None else ""
    for c in np.flatnonzero(np.asarray(diverged)):
        position = kernel.position(jax.tree.map(lambda a, c=c: a[c], start.states))
        if not bool(_finite_at(target, position)):
            start_why = (
                f"Chain {int(c)}'s start was already bad: {explain_start(target, position)}."
            )
            return f"{why} {start_why}" if why else start_why
    return why


def far_out_chains(chains: Chains) -> tuple[np.ndarray, np.ndarray]:
    """Per chain, whether it diverged by going far out (a finite energy beyond its limit)
    rather than by a non-finite value, and its limit (in the program's float32 arithmetic)."""
    status = jax.device_get(chains.status)
    energy = np.asarray(status.energy)
    with np.errstate(invalid="ignore", over="ignore"):
        limit = np.asarray(status.reference) + np.asarray(status.margin)
        far = np.asarray(status.diverged) & np.isfinite(energy) & (energy > limit)
    return far, limit


def far_out_explanation(chains: Chains) -> str:
    """A sentence naming each chain that went far out, the step that took it there and its
    energy against its limit (``""`` when none did)."""
    far, limit = far_out_chains(chains)
    if not far.any():
        return ""
    status = jax.device_get(chains.status)
    each = "; ".join(
        f"chain {int(c)} after step {int(status.step[c])}: Ũ = {float(status.energy[c]):.4g}, "
        f"limit {float(limit[c]):.4g}"
        for c in np.flatnonzero(far)
    )
    return (
        f"Far out, every number finite ({each}): an energy beyond the start's by more than "
        f"{FAR_OUT_FACTOR:g}·(d + 1)·T and {NOISE_SDS:g} sds of its minibatch noise, where no "
        "chain sampling π_T goes (docs/troubleshooting.md, 'Far-out chains')."
    )


@owner_jit
def _finite_at(target: Target, position: object) -> jax.Array:
    return start_is_finite(target, position)

"""Meta-training of NNSGHMC (Gong, Li & Hernández-Lobato 2019, Sec. 3.3, App. C–F).

**Meta-loss.** The sampler's parameters φ (the elementwise MLPs net_Q and net_D of
:mod:`bdl.kernels.nnsghmc`) are trained to make the distribution of its chains close to the target
π ∝ exp(−U) quickly: the loss is KL(q‖π) = E_q[U(θ)] + E_q[log q(θ)] + log Z (the negative ELBO),
accumulated over the distributions q that K parallel chains produce.

* **Cross-chain loss** (Eq. 10): q = q_t, the distribution *across chains* at step t,

      L_cross = (1/|𝒯|) Σ_{t∈𝒯} (1/K) Σ_k [U(θ_t^k) + log q_t(θ_t^k)],

  with 𝒯 every ``cross_chain_every``-th step (App. F.1: every 2nd).
* **In-chain loss** (Eq. 11): q = the distribution *along one chain's* thinned trajectory
  {θ^k_{sτ}} after ``in_chain_burn_in`` steps, thinned by τ = ``in_chain_thin``, for a random
  subset of ``in_chain_chains`` chains (App. D, "parallel chain sub-sampling"; F.1: 50 burn-in, 5
  chains, τ = 3).

**Gradients.** log q is intractable; its φ-gradient is ∇_φ log q(θ) = (∂θ/∂φ)ᵀ ∇_θ log q(θ)
(Sec. 3.3; the score-function part has zero expectation), and ∇_θ log q is estimated by the Stein
gradient estimator on the samples that define q (:func:`bdl.meta.score_estimator.stein_score`, Li &
Turner 2018; App. C, Eq. 25). The differentiated objective is therefore the surrogate

    mean_k [U(θ_k) + sg(Ĝ_k)·θ_k],    sg = stop_gradient,

whose φ-gradient is the Monte Carlo estimate of ∇_φ KL(q‖π). The θ_k are differentiated through
the unrolled sampler (``jax.grad`` through the library's own NNSGHMC steps, including the exact
correction Γ and the networks' inputs U, r, ∇Ũ), with **truncated back-propagation**: the chain
state is passed through ``stop_gradient`` every ``window`` steps (App. D, Fig. 7; F.1: 20 steps),
so a loss term reaches back at most to the start of its window. Each meta-iteration simulates
``window × windows_per_iteration`` steps (App. F.1: 100) and makes one Adam update (gradient
clipping by global norm, then Adam; App. F.1 uses learning rate 5·10⁻⁴).

**Tasks** (Sec. 5.1, App. F.1). A fixed pool of ``num_tasks`` random d-dimensional Gaussians with
diagonal covariance (:func:`bdl.data.synthetic_energies.diagonal_gaussian`; variances
log-uniform in ``variance_range``), energy U(θ) = ½ Σᵢ (θᵢ − μᵢ)²/σᵢ² (the constant log Z is
dropped: the networks see U, so it must not depend on an arbitrary normaliser), and unit Gaussian
noise injected into every gradient, ∇̃U = ∇U + ξ, ξ ~ N(0, I). All tasks' chains run as one
batch and the loss is the mean over tasks. The held-out test task of the paper (a 20-D
Gaussian with a dense covariance, ``benchmarks/gong_toy.py``) is never trained on.

**Input normalisation** (App. E). The networks see the energy per dimension U/d (the paper's
D_train/D_test rescaling, Eq. 26), the momentum r and the noisy gradient ∂Ũ, each standardised
with the mean and sd measured in a **pilot run** (:func:`pilot_statistics`): the randomly
initialised sampler, without standardisation, run for ``pilot_steps`` steps from fresh starts on
every task. The statistics are constants for the whole run, written into ``nnsghmc.npz`` and read
back by the kernel, which applies the same map
(:func:`bdl.kernels.nnsghmc_inputs.normalised_inputs`) on any target.

**Epochs and replay** (App. F.1, F.3.1). Chains continue from one meta-iteration to the next for
``iterations_per_epoch`` iterations; at the start of each epoch every chain restarts either from a
state drawn from its task's replay buffer (probability ``replay_prob``) or from a fresh start
θ ~ μ + U(−a, a)ᵈ, r = 0 (a = ``init_range``; the paper draws U([0, 6]ᵈ) around mean 3). The
buffer is a ring of ``replay_size`` past states (θ, r) per task, fed with the chains' final states
after every iteration, so training sees both burn-in from afar and roughly converged chains.

**What is logged.** The surrogate's value is not the loss (the Stein term is only a gradient), so
each record reports moment-matched estimates of the two KL terms being minimised, exact for
Gaussian q: ``kl_cross``, the mean over 𝒯 of KL(q̂_t‖π) with q̂_t the product of 1-D Gaussians
fitted to the chains' coordinates (π is a product of 1-D Gaussians, so this is a sum of 1-D KLs),
``kl_in_chain`` the same along the sub-sampled chains' trajectories, and ``loss`` their weighted
sum with the loss weights. Also: ``energy`` (E_q[U]/d at the last step), ``f_q`` and
``friction`` (means of f_Q and D_rr over the final states), ``grad_norm`` (before clipping),
``skipped`` (1 when a chain diverged: the update is then skipped and the chains restart; ten in
a row stop training) and ``time_s``.

Deviations from the paper (each a configuration choice, stated in docs/meta-learning-nnsghmc.md):
no stop-gradient on the networks' inputs (App. D stops it to avoid higher-order derivatives; JAX
differentiates through Γ exactly, so we keep the full truncated gradient); the exact Γ rather than
finite differences; the median-heuristic bandwidth unscaled (×1, not ×0.5: with 50 samples in 10-D
×0.5 under-estimates the entropy gradient by ~40 %, ×1 by ~12 %); β₀ = 1 and α = 1 so that the
untrained sampler is SGHMC with friction ≈ 1; f_Q bounded (``q_bound``) during training, not
only at evaluation (App. F.1 clamps f_Q ≤ 5 at test time; unbounded, training diverged).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from bdl.data.synthetic_energies import diagonal_gaussian
from bdl.kernels.elementwise_mlp import MetaParams
from bdl.kernels.nnsghmc import init_nnsghmc_params
from bdl.kernels.nnsghmc_inputs import HEADER_KEY, IDENTITY, InputStatistics
from bdl.meta import driver
from bdl.meta.config import parse_config
from bdl.meta.driver import TrainingRun
from bdl.meta.nnsghmc_config import NNSGHMCConfig, kernel_hyper
from bdl.meta.nnsghmc_loss import Tasks, make_kernel, meta_loss, pilot_run

PyTree = Any
KERNEL = "nnsghmc"

#: consecutive skipped (diverged) iterations after which training stops
MAX_SKIPPED = 10
#: the pilot run's random stream, fold_in(key(seed), PILOT_STREAM): apart from the iterations'
PILOT_STREAM = 2**30


# ---------------------------------------------------------------------------- tasks and state
def make_tasks(cfg: NNSGHMCConfig) -> Tasks:
    """The training pool: ``num_tasks`` :func:`diagonal_gaussian` targets seeded by the run."""
    means, variances = [], []
    for i in range(cfg.num_tasks):
        mean, cov = diagonal_gaussian(
            cfg.dim, seed=1000 * cfg.seed + i, variance_range=cfg.variance_range
        )
        means.append(mean)
        variances.append(jnp.diag(cov))
    return Tasks(jnp.stack(means), jnp.stack(variances))


class TrainState(NamedTuple):
    """Everything a checkpoint holds (the iteration count lives in the history file)."""

    meta: MetaParams
    opt_state: PyTree
    theta: jax.Array  # (tasks, chains, dim): the current chain states
    r: jax.Array
    buffer_theta: jax.Array  # (tasks, replay_size, dim): the replay buffers
    buffer_r: jax.Array
    buffer_count: jax.Array  # (tasks,) filled entries
    buffer_ptr: jax.Array  # (tasks,) next write position


def optimizer(cfg: NNSGHMCConfig) -> optax.GradientTransformation:
    """Gradient clipping by global norm, then Adam."""
    return optax.chain(optax.clip_by_global_norm(cfg.clip_norm), optax.adam(cfg.learning_rate))


def init_state(cfg: NNSGHMCConfig) -> TrainState:
    """Fresh meta-parameters (SGHMC-like: small output layers) and empty buffers."""
    meta = init_nnsghmc_params(
        cfg.seed,
        cfg.hidden,
        final_scale=cfg.init_final_scale,
        activation=cfg.activation,
    )
    shape = (cfg.num_tasks, cfg.num_chains, cfg.dim)
    buf = (cfg.num_tasks, cfg.replay_size, cfg.dim)
    zeros_t = jnp.zeros((cfg.num_tasks,), jnp.int32)
    return TrainState(
        meta=meta,
        opt_state=optimizer(cfg).init(meta),
        theta=jnp.zeros(shape, jnp.float32),
        r=jnp.zeros(shape, jnp.float32),
        buffer_theta=jnp.zeros(buf, jnp.float32),
        buffer_r=jnp.zeros(buf, jnp.float32),
        buffer_count=zeros_t,
        buffer_ptr=zeros_t,
    )


# ---------------------------------------------------------------------------- one iteration
def restart_chains(
    state: TrainState, tasks: Tasks, key: jax.Array, cfg: NNSGHMCConfig
) -> tuple[jax.Array, jax.Array]:
    """New chain states at an epoch start: replayed with probability ``replay_prob`` (when the
    task's buffer has entries), else θ ~ μ + U(−a, a)ᵈ and r = 0 (App. F.1, F.3.1)."""
    num_tasks, k, d = state.theta.shape
    k_fresh, k_coin, k_pick = jax.random.split(key, 3)
    fresh = tasks.mean[:, None, :] + cfg.init_range * jax.random.uniform(
        k_fresh, (num_tasks, k, d), minval=-1.0, maxval=1.0
    )
    count = state.buffer_count[:, None]
    use = (jax.random.uniform(k_coin, (num_tasks, k)) < cfg.replay_prob) & (count > 0)
    idx = jnp.floor(jax.random.uniform(k_pick, (num_tasks, k)) * jnp.maximum(count, 1))
    idx = jnp.minimum(idx.astype(jnp.int32), jnp.maximum(count, 1) - 1)
    replay_theta = jnp.take_along_axis(state.buffer_theta, idx[..., None], axis=1)
    replay_r = jnp.take_along_axis(state.buffer_r, idx[..., None], axis=1)
    theta = jnp.where(use[..., None], replay_theta, fresh)
    r = jnp.where(use[..., None], replay_r, jnp.zeros_like(fresh))
    return theta, r


def push_buffer(state: TrainState, theta: jax.Array, r: jax.Array) -> TrainState:
    """Append the chains' states to the per-task ring buffers (oldest entries replaced)."""
    size = state.buffer_theta.shape[1]
    k = theta.shape[1]
    pos = (state.buffer_ptr[:, None] + jnp.arange(k)[None, :]) % size  # (tasks, k)
    rows = jnp.arange(theta.shape[0])[:, None]
    if k > size:  # only the last `size` states survive a wrap-around
        pos, theta, r = pos[:, -size:], theta[:, -size:], r[:, -size:]
    return state._replace(
        buffer_theta=state.buffer_theta.at[rows, pos].set(theta),
        buffer_r=state.buffer_r.at[rows, pos].set(r),
        buffer_count=jnp.minimum(state.buffer_count + k, size),
        buffer_ptr=(state.buffer_ptr + k) % size,
    )


@functools.lru_cache(maxsize=8)
def pilot_statistics(cfg: NNSGHMCConfig) -> InputStatistics:
    """The input statistics of the run (App. E): means and sds of U/d, r and ∂Ũ over a pilot run
    of ``pilot_steps`` steps of the randomly initialised sampler (the initial meta-parameters,
    no standardisation) from fresh starts θ ~ μ + U(−a, a)ᵈ, r = 0 on every task.
    Deterministic in ``cfg`` (cached), so a resumed run gets the same constants."""
    tasks = make_tasks(cfg)
    state = init_state(cfg)
    key = jax.random.fold_in(jax.random.key(cfg.seed), PILOT_STREAM)
    k_start, k_run = jax.random.split(key)
    theta, r = restart_chains(state, tasks, k_start, cfg)  # empty buffers: all fresh starts
    flat = (cfg.num_tasks * cfg.num_chains, cfg.dim)
    mean = jnp.broadcast_to(tasks.mean[:, None, :], theta.shape).reshape(flat)
    var = jnp.broadcast_to(tasks.var[:, None, :], theta.shape).reshape(flat)
    return pilot_run(
        make_kernel(state.meta, cfg, IDENTITY),
        theta.reshape(flat),
        r.reshape(flat),
        mean,
        var,
        k_run,
        steps=cfg.pilot_steps,
        grad_noise=cfg.grad_noise,
    )


@functools.lru_cache(maxsize=8)
def make_update(cfg: NNSGHMCConfig) -> Callable[..., tuple[TrainState, dict[str, Any]]]:
    """The jitted meta-iteration ``(state, iteration) -> (state, metrics)`` for ``cfg`` (cached:
    runs with equal configs in one process share the compiled function)."""
    tasks = make_tasks(cfg)
    stats = pilot_statistics(cfg)
    opt = optimizer(cfg)
    base_key = jax.random.key(cfg.seed)

    @jax.jit
    def update(state: TrainState, iteration: jax.Array) -> tuple[TrainState, dict[str, Any]]:
        key = jax.random.fold_in(base_key, iteration)
        k_restart, k_loss = jax.random.split(key)
        new_epoch = iteration % cfg.iterations_per_epoch == 0
        theta0, r0 = restart_chains(state, tasks, k_restart, cfg)
        theta = jnp.where(new_epoch, theta0, state.theta)
        r = jnp.where(new_epoch, r0, state.r)
        (loss, aux), grads = jax.value_and_grad(meta_loss, has_aux=True)(
            state.meta, theta, r, tasks, k_loss, cfg, stats
        )
        grad_norm = optax.tree.norm(grads)
        theta_last, r_last = aux.pop("theta_last"), aux.pop("r_last")
        # a diverged chain (non-finite loss, gradient or state) skips the update: the
        # meta-parameters, optimiser state and replay buffers stay, and the chains restart
        ok = (
            jnp.isfinite(loss)
            & jnp.isfinite(grad_norm)
            & jnp.all(jnp.isfinite(theta_last))
            & jnp.all(jnp.isfinite(r_last))
        )
        updates, opt_state = opt.update(grads, state.opt_state, state.meta)
        meta = optax.apply_updates(state.meta, updates)
        moved = push_buffer(
            state._replace(meta=meta, opt_state=opt_state, theta=theta_last, r=r_last),
            theta_last,
            r_last,
        )
        stay = state._replace(theta=theta0, r=r0)
        new = jax.tree.map(lambda a, b: jnp.where(ok, a, b), moved, stay)
        metrics = dict(aux)
        metrics["grad_norm"] = grad_norm
        metrics["skipped"] = 1.0 - ok.astype(jnp.float32)
        return new, metrics

    return update


# ---------------------------------------------------------------------------- training
def train(
    config: NNSGHMCConfig | Mapping[str, Any],
    out_dir: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
) -> TrainingRun:
    """Meta-train NNSGHMC (module docstring) and write the run to ``out_dir``.

    The run directory is :mod:`bdl.meta.driver`'s (checkpoints every ``checkpoint_every``
    iterations and on Ctrl-C or SIGTERM, ``nnsghmc.npz``, ``loss.png``) plus
    ``nnsghmc-hyper.json`` (the kernel hyper-parameters the networks were trained with); the
    input statistics of the pilot run are in ``nnsghmc.npz``'s header. With
    ``resume`` it continues from the checkpoint in ``out_dir`` (bitwise identical to an
    uninterrupted run); only ``iterations``, ``checkpoint_every`` and ``log_every`` may differ
    from the checkpointed config.
    """
    cfg = parse_config(NNSGHMCConfig, config, "meta-train nnsghmc")
    update = make_update(cfg)

    def step(state: TrainState, it: int) -> tuple[TrainState, dict[str, float]]:
        state, metrics = update(state, jnp.asarray(it, jnp.int32))
        return state, {k: float(v) for k, v in jax.device_get(metrics).items()}

    counted = [0, 0]  # records counted, skipped among them

    def describe(history: list[dict[str, Any]]) -> str:
        n, skipped = counted
        counted[:] = len(history), skipped + sum(int(r["skipped"]) for r in history[n:])
        h = history[-1]
        return (
            f"loss {h['loss']:.4g} (cross {h['kl_cross']:.3g}, in-chain {h['kl_in_chain']:.3g})"
            f"  f_Q {h['f_q']:.3g}  skipped {counted[1]}"
        )

    def stop(history: list[dict[str, Any]]) -> str | None:
        if len(history) < MAX_SKIPPED or not all(h["skipped"] for h in history[-MAX_SKIPPED:]):
            return None
        return (
            f"the chains diverged in {MAX_SKIPPED} iterations in a row (up to iteration "
            f"{len(history)}); lower step_size or learning_rate, or set q_bound"
        )

    loop = driver.Loop(
        state=init_state(cfg),
        step=step,
        meta_params=lambda state: state.meta,
        describe=describe,
        plot={
            "series": {
                "loss": "loss (weighted sum)",
                "kl_cross": "cross-chain KL(q_t‖π)",
                "kl_in_chain": "in-chain KL(q̄‖π)",
            },
            "ylabel": "moment-matched KL estimate",
            "title": "NNSGHMC meta-training (Gong et al. 2019, Eq. 10–11)",
            "log": True,
        },
        log_every=cfg.log_every,
        stop=stop,
        metadata={HEADER_KEY: pilot_statistics(cfg).as_dict()},
    )
    result, _ = driver.run(cfg, loop, out_dir, resume=resume, progress=progress)
    (result.out_dir / f"{KERNEL}-hyper.json").write_text(
        json.dumps(
            {
                "kernel": KERNEL,
                "trained_on_dim": cfg.dim,
                **kernel_hyper(cfg),
                HEADER_KEY: pilot_statistics(cfg).as_dict(),
            },
            indent=1,
        )
    )
    return result

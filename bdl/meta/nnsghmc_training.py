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
gradient estimator on the samples that define q (:func:`bdl.meta.stein.stein_score`, Li & Turner
2018; App. C, Eq. 25). The differentiated objective is therefore the surrogate

    mean_k [U(θ_k) + sg(Ĝ_k)·θ_k],    sg = stop_gradient,

whose φ-gradient is the Monte Carlo estimate of ∇_φ KL(q‖π). The θ_k are differentiated through
the unrolled sampler (``jax.grad`` through ``lax.scan`` over NNSGHMC steps, including the exact
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

**Input scaling** (App. E). The networks see u = s_U·U(θ)/d, the energy per dimension, so that
10-D training and 20-D test tasks present the same scale (the paper's D_train/D_test rescaling,
Eq. 26); use ``NNSGHMC(energy_scale=s_U/d)`` on a d-dimensional target.

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

import contextlib
import functools
import json
import math
import signal
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from bdl.data.synthetic_energies import diagonal_gaussian
from bdl.kernels.elementwise_mlp import MetaParams, save_meta_params
from bdl.kernels.nnsghmc import NNSGHMC, NNSGHMCRecipe, init_nnsghmc_params
from bdl.kernels.recipe import Context
from bdl.meta.checkpoint import HISTORY, TrainingRun, load_checkpoint, save_checkpoint
from bdl.meta.config import merge
from bdl.meta.stein import stein_score

PyTree = Any
KERNEL = "nnsghmc"
WHERE = "nnsghmc config"

#: every configuration key with its default (the shipped bdl/meta/configs/nnsghmc.toml sets them)
DEFAULTS: dict[str, Any] = {
    "seed": 0,
    # schedule
    "iterations": 400,
    "iterations_per_epoch": 4,
    "checkpoint_every": 50,
    "log_every": 10,
    # tasks
    "dim": 10,
    "num_tasks": 4,
    "variance_range": [0.05, 2.0],
    "grad_noise": 1.0,
    "init_range": 3.0,
    # sampler (kernel hyper-parameters used in training, and recommended at test time)
    "step_size": 0.025,
    "alpha": 1.0,
    "beta0": 1.0,
    "c": 0.01,
    "energy_scale": 1.0,
    "momentum_scale": 1.0,
    "grad_scale": 1.0,
    "d_scale": 1.0,
    "q_bound": 4.0,
    "hidden": [10],
    "activation": "tanh",
    "init_final_scale": 0.1,
    # unrolling
    "num_chains": 50,
    "window": 20,
    "windows_per_iteration": 5,
    # losses
    "cross_chain_weight": 1.0,
    "cross_chain_every": 2,
    "in_chain_weight": 1.0,
    "in_chain_chains": 5,
    "in_chain_burn_in": 50,
    "in_chain_thin": 3,
    "stein_eta": 0.01,
    "stein_bandwidth_scale": 1.0,
    # replay
    "replay_prob": 0.5,
    "replay_size": 500,
    # optimiser
    "learning_rate": 2e-3,
    "clip_norm": 1.0,
}

#: consecutive skipped (diverged) iterations after which training stops
MAX_SKIPPED = 10

#: keys that may change between a run and its resumption (they do not change the computation)
RESUMABLE_CHANGES = frozenset({"iterations", "checkpoint_every", "log_every"})


# ---------------------------------------------------------------------------- configuration
def validate_config(config: dict[str, Any]) -> dict[str, Any]:
    """Defaults merged with ``config``; unknown keys and bad values raise ``ValueError`` naming
    the key."""
    cfg = merge(DEFAULTS, config, where=WHERE)

    def fail(key: str, what: str) -> None:
        raise ValueError(f"{WHERE}: {key} must be {what}; got {cfg[key]!r}.")

    def integer(key: str, minimum: int) -> None:
        v = cfg[key]
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < minimum:
            fail(key, f"an integer >= {minimum}")

    def number(key: str, minimum: float, *, strict: bool) -> None:
        v = cfg[key]
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        if not ok or (v <= minimum if strict else v < minimum):
            fail(key, f"a number {'>' if strict else '>='} {minimum}")

    for key in ("seed", "in_chain_burn_in"):
        integer(key, 0)
    for key in (
        "iterations",
        "iterations_per_epoch",
        "checkpoint_every",
        "log_every",
        "dim",
        "num_tasks",
        "window",
        "windows_per_iteration",
        "cross_chain_every",
        "in_chain_thin",
        "replay_size",
    ):
        integer(key, 1)
    integer("num_chains", 2)
    integer("in_chain_chains", 1)
    for key in (
        "step_size",
        "c",
        "energy_scale",
        "momentum_scale",
        "grad_scale",
        "learning_rate",
        "clip_norm",
        "init_range",
        "stein_bandwidth_scale",
        "stein_eta",
    ):
        number(key, 0.0, strict=True)
    for key in (
        "alpha",
        "d_scale",
        "grad_noise",
        "init_final_scale",
        "cross_chain_weight",
        "in_chain_weight",
    ):
        number(key, 0.0, strict=False)
    number("beta0", -math.inf, strict=True)
    number("replay_prob", 0.0, strict=False)
    if cfg["replay_prob"] > 1:
        fail("replay_prob", "in [0, 1]")
    if cfg["q_bound"] is not None:
        number("q_bound", 0.0, strict=True)
    vr = cfg["variance_range"]
    if (
        not isinstance(vr, list | tuple)
        or len(vr) != 2
        or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in vr)
        or not 0 < vr[0] <= vr[1]
    ):
        fail("variance_range", "[low, high] with 0 < low <= high")
    hidden = cfg["hidden"]
    if (
        not isinstance(hidden, list | tuple)
        or not hidden
        or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in hidden)
    ):
        fail("hidden", "a non-empty list of positive integers")
    from bdl.kernels.elementwise_mlp import ACTIVATIONS

    if cfg["activation"] not in ACTIVATIONS:
        fail("activation", f"one of {sorted(ACTIVATIONS)}")
    if cfg["in_chain_chains"] > cfg["num_chains"]:
        fail("in_chain_chains", f"<= num_chains ({cfg['num_chains']})")
    steps = cfg["window"] * cfg["windows_per_iteration"]
    if cfg["cross_chain_every"] > steps:
        fail("cross_chain_every", f"<= the steps per iteration ({steps})")
    if len(range(cfg["in_chain_burn_in"], steps, cfg["in_chain_thin"])) < 2:
        fail("in_chain_burn_in", f"small enough to leave >= 2 thinned in-chain samples of {steps}")
    if cfg["cross_chain_weight"] == 0 and cfg["in_chain_weight"] == 0:
        fail("cross_chain_weight", "> 0 when in_chain_weight is 0")
    cfg["variance_range"] = [float(v) for v in vr]
    cfg["hidden"] = [int(h) for h in hidden]
    return cfg


def kernel_hyper(cfg: dict[str, Any], dim: int) -> dict[str, Any]:
    """The NNSGHMC hyper-parameters of training, for a ``dim``-dimensional target (App. E)."""
    return {
        "step_size": float(cfg["step_size"]),
        "alpha": float(cfg["alpha"]),
        "beta0": float(cfg["beta0"]),
        "c": float(cfg["c"]),
        "num_data": 1.0,
        "energy_scale": float(cfg["energy_scale"]) / dim,
        "momentum_scale": float(cfg["momentum_scale"]),
        "grad_scale": float(cfg["grad_scale"]),
        "d_scale": float(cfg["d_scale"]),
        "q_bound": None if cfg["q_bound"] is None else float(cfg["q_bound"]),
    }


# ---------------------------------------------------------------------------- tasks and state
class Tasks(NamedTuple):
    """A pool of diagonal Gaussians: means and variances, shape (num_tasks, dim)."""

    mean: jax.Array
    var: jax.Array


def make_tasks(cfg: dict[str, Any]) -> Tasks:
    """The training pool: ``num_tasks`` :func:`diagonal_gaussian` targets seeded by the run."""
    means, variances = [], []
    for i in range(cfg["num_tasks"]):
        mean, cov = diagonal_gaussian(
            cfg["dim"], seed=1000 * cfg["seed"] + i, variance_range=tuple(cfg["variance_range"])
        )
        means.append(mean)
        variances.append(jnp.diag(cov))
    return Tasks(jnp.stack(means), jnp.stack(variances))


def gaussian_energy(theta: jax.Array, mean: jax.Array, var: jax.Array) -> jax.Array:
    """U(θ) = ½ Σᵢ (θᵢ − μᵢ)²/σᵢ² over the last axis (no normalising constant)."""
    diff = theta - mean
    return 0.5 * jnp.sum(diff * diff / var, axis=-1)


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


def optimizer(cfg: dict[str, Any]) -> optax.GradientTransformation:
    """Gradient clipping by global norm, then Adam."""
    return optax.chain(
        optax.clip_by_global_norm(cfg["clip_norm"]), optax.adam(cfg["learning_rate"])
    )


def init_state(cfg: dict[str, Any]) -> TrainState:
    """Fresh meta-parameters (SGHMC-like: small output layers) and empty buffers."""
    meta = init_nnsghmc_params(
        cfg["seed"],
        tuple(cfg["hidden"]),
        final_scale=cfg["init_final_scale"],
        activation=cfg["activation"],
    )
    shape = (cfg["num_tasks"], cfg["num_chains"], cfg["dim"])
    buf = (cfg["num_tasks"], cfg["replay_size"], cfg["dim"])
    zeros_t = jnp.zeros((cfg["num_tasks"],), jnp.int32)
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


# ---------------------------------------------------------------------------- the meta-loss
def make_kernel(meta: MetaParams, cfg: dict[str, Any]) -> NNSGHMC:
    """The NNSGHMC kernel being trained (its meta-parameters may be tracers)."""
    return NNSGHMC(meta_params=meta, integrator="symplectic_euler", **kernel_hyper(cfg, cfg["dim"]))


def nnsghmc_step(
    recipe: NNSGHMCRecipe,
    theta: jax.Array,
    r: jax.Array,
    energy: jax.Array,
    grad: jax.Array,
    xi: jax.Array,
    h: jax.Array,
    temperature: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """One NNSGHMC step of one chain (θ, r of shape (d,)) given Ũ, ∇Ũ and the noise ξ ~ N(0, I).

    The same update as ``NNSGHMC.step`` with the symplectic-Euler integrator (Eq. 7; checked
    against it in the tests), written out for this recipe so that the unrolled, differentiated
    program stays small:

        D = α f_Q² + f_D + c,   Γ_r = ∂f_Q/∂U · ∇Ũ + ∂(α f_Q² + f_D)/∂r,   Γ_θ = −∂f_Q/∂r,
        r' = r + h[−D r − f_Q ∇Ũ + T Γ_r] + √(2ThD) ξ,      (f_Q, f_D, D, Γ_r at (θ, r))
        θ' = θ + h[f_Q r' + T Γ_θ],                         (f_Q, Γ_θ at (θ, r'))

    with the elementwise derivatives by forward-mode autodiff (an all-ones tangent on r, as
    :func:`bdl.kernels.recipe.correction`).
    """
    ones = jnp.ones_like(r)

    def f_q(rr: jax.Array, e: jax.Array) -> jax.Array:
        return recipe.f_q({"theta": theta, "r": rr}, Context(e, grad))

    def f_d(rr: jax.Array) -> jax.Array:
        return recipe.f_d({"theta": theta, "r": rr}, Context(energy, grad))

    fq, dfq_dr = jax.jvp(lambda rr: f_q(rr, energy), (r,), (ones,))
    _, dfq_du = jax.jvp(lambda e: f_q(r, e), (energy,), (jnp.ones_like(energy),))
    fd, dfd_dr = jax.jvp(f_d, (r,), (ones,))
    friction = recipe.alpha * fq * fq + fd + recipe.c
    gamma_r = dfq_du * grad + 2.0 * recipe.alpha * fq * dfq_dr + dfd_dr
    r_new = r + h * (-(fq * grad + friction * r) + temperature * gamma_r)
    r_new = r_new + jnp.sqrt(2.0 * temperature * h * friction) * xi
    fq_new, dfq_dr_new = jax.jvp(lambda rr: f_q(rr, energy), (r_new,), (ones,))
    theta_new = theta + h * (fq_new * r_new - temperature * dfq_dr_new)
    return theta_new, r_new


def unroll(
    kernel: NNSGHMC,
    theta: jax.Array,
    r: jax.Array,
    mean: jax.Array,
    var: jax.Array,
    key: jax.Array,
    *,
    window: int,
    num_windows: int,
    grad_noise: float,
    truncate: bool | jax.Array = True,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Run K chains for ``window × num_windows`` steps, differentiably.

    ``theta``, ``r``, ``mean`` and ``var`` are (K, d): chain k targets N(mean_k, diag(var_k))
    with N(0, grad_noise²·I) added to every gradient. Returns ``(thetas, theta_last, r_last)``
    with ``thetas`` the positions after every step, shape (steps, K, d). With ``truncate`` (a
    bool, possibly traced) the state passes through ``stop_gradient`` at the start of every
    window but the first (truncated back-propagation, App. D): a loss term's gradient reaches
    back to the start of its window only.
    """
    recipe = kernel.recipe()
    h = jnp.asarray(kernel.step_size, theta.dtype)
    temperature = jnp.asarray(1.0, theta.dtype)
    step = jax.vmap(nnsghmc_step, in_axes=(None, 0, 0, 0, 0, 0, None, None))

    def one_step(
        carry: tuple[jax.Array, jax.Array], noise: tuple[jax.Array, jax.Array]
    ) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
        th, rr = carry
        xi_grad, xi = noise
        grad = (th - mean) / var
        energy = 0.5 * jnp.sum((th - mean) * grad, axis=-1)
        th, rr = step(recipe, th, rr, energy, grad + grad_noise * xi_grad, xi, h, temperature)
        return (th, rr), th

    def one_window(
        carry: tuple[jax.Array, jax.Array], inputs: tuple[jax.Array, jax.Array]
    ) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
        index, key = inputs
        # truncated back-propagation: no gradient flows into a window from the one before
        cut = jnp.logical_and(jnp.asarray(truncate), index > 0)
        carry = jax.tree.map(lambda x: jnp.where(cut, jax.lax.stop_gradient(x), x), carry)
        k_grad, k_step = jax.random.split(key)
        noise = (
            jax.random.normal(k_grad, (window, *theta.shape), theta.dtype),
            jax.random.normal(k_step, (window, *theta.shape), theta.dtype),
        )
        return jax.lax.scan(one_step, carry, noise)

    keys = jax.random.split(key, num_windows)
    (theta_last, r_last), thetas = jax.lax.scan(
        one_window, (theta, r), (jnp.arange(num_windows), keys)
    )
    return thetas.reshape(window * num_windows, *theta.shape), theta_last, r_last


def surrogate(
    x: jax.Array, mean: jax.Array, var: jax.Array, *, eta: float, bandwidth_scale: float
) -> jax.Array:
    """mean_k [U(x_k) + sg(Ĝ_k)·x_k] for samples x (K, d) of one q: its gradient is ∇KL(q‖π)."""
    g = stein_score(x, eta=eta, bandwidth_scale=bandwidth_scale)
    return jnp.mean(gaussian_energy(x, mean, var) + jnp.sum(g * x, axis=-1))


def marginal_kl(x: jax.Array, mean: jax.Array, var: jax.Array) -> jax.Array:
    """Σᵢ KL(N(m̂ᵢ, v̂ᵢ) ‖ N(μᵢ, σᵢ²)) with m̂, v̂ fitted to samples x (K, d) (diagnostic)."""
    x = jax.lax.stop_gradient(x)
    m = jnp.mean(x, axis=0)
    v = jnp.maximum(jnp.var(x, axis=0, ddof=1), 1e-12)
    return 0.5 * jnp.sum((v + (m - mean) ** 2) / var - 1.0 - jnp.log(v / var))


def meta_loss(
    meta: MetaParams,
    theta: jax.Array,
    r: jax.Array,
    tasks: Tasks,
    key: jax.Array,
    cfg: dict[str, Any],
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The surrogate cross-chain + in-chain loss (Eq. 10, 11), averaged over the tasks.

    ``theta`` and ``r`` are (tasks, K, d). All tasks' chains run as one batch of chains. Returns
    the surrogate (to differentiate) and diagnostics, including the final chain states.
    """
    num_tasks, k, d = theta.shape
    kernel = make_kernel(meta, cfg)
    k_run, k_sub = jax.random.split(key)
    mean = jnp.broadcast_to(tasks.mean[:, None, :], theta.shape)
    var = jnp.broadcast_to(tasks.var[:, None, :], theta.shape)
    flat = (num_tasks * k, d)
    thetas, theta_last, r_last = unroll(
        kernel,
        theta.reshape(flat),
        r.reshape(flat),
        mean.reshape(flat),
        var.reshape(flat),
        k_run,
        window=cfg["window"],
        num_windows=cfg["windows_per_iteration"],
        grad_noise=cfg["grad_noise"],
    )
    steps = thetas.shape[0]
    thetas = thetas.reshape(steps, num_tasks, k, d)
    stein = {"eta": cfg["stein_eta"], "bandwidth_scale": cfg["stein_bandwidth_scale"]}

    def per_task(fn: Any, x: jax.Array) -> jax.Array:
        """``fn(samples (n, d), μ, σ²)`` over x of shape (groups, tasks, n, d) → (groups, tasks)."""
        return jax.vmap(jax.vmap(fn, in_axes=(0, 0, 0)), in_axes=(0, None, None))(
            x, tasks.mean, tasks.var
        )

    def sur(x: jax.Array, m: jax.Array, v: jax.Array) -> jax.Array:
        return surrogate(x, m, v, **stein)

    # cross-chain: q_t across the K chains, every `cross_chain_every` steps (Eq. 10)
    cross = thetas[cfg["cross_chain_every"] - 1 :: cfg["cross_chain_every"]]  # (T_c, tasks, K, d)
    cross_loss = jnp.mean(per_task(sur, cross))
    kl_cross = jnp.mean(per_task(marginal_kl, cross))

    # in-chain: q along a sub-sampled chain's thinned trajectory (Eq. 11)
    times = jnp.arange(cfg["in_chain_burn_in"], steps, cfg["in_chain_thin"])
    chains = jax.vmap(
        lambda kk: jax.random.choice(kk, k, (cfg["in_chain_chains"],), replace=False)
    )(jax.random.split(k_sub, num_tasks))  # (tasks, n_in)
    picked = jnp.take_along_axis(thetas[times], chains[None, :, :, None], axis=2)
    inner = jnp.transpose(picked, (2, 1, 0, 3))  # (n_in, tasks, T_in, d)
    in_loss = jnp.mean(per_task(sur, inner))
    kl_in = jnp.mean(per_task(marginal_kl, inner))

    wc, wi = cfg["cross_chain_weight"], cfg["in_chain_weight"]
    loss = wc * cross_loss + wi * in_loss

    # what the sampler does at the final states (diagnostic)
    last = jax.lax.stop_gradient(theta_last)
    rl = jax.lax.stop_gradient(r_last)
    m_flat, v_flat = mean.reshape(flat), var.reshape(flat)
    grad = (last - m_flat) / v_flat
    energy = 0.5 * jnp.sum((last - m_flat) * grad, axis=-1)
    recipe = jax.lax.stop_gradient(kernel.recipe())

    def nets(th: jax.Array, rr: jax.Array, e: jax.Array, g: jax.Array) -> jax.Array:
        z, ctx = {"theta": th, "r": rr}, Context(e, g)
        fq = recipe.f_q(z, ctx)
        return jnp.stack([fq, recipe.alpha * fq * fq + recipe.f_d(z, ctx) + recipe.c])

    f_q, friction = jnp.mean(jax.vmap(nets)(last, rl, energy, grad), axis=(0, 2))
    aux = {
        "loss": wc * kl_cross + wi * kl_in,
        "kl_cross": kl_cross,
        "kl_in_chain": kl_in,
        "energy": jnp.mean(energy) / d,
        "f_q": f_q,
        "friction": friction,
        "theta_last": last.reshape(theta.shape),
        "r_last": rl.reshape(theta.shape),
    }
    return loss, aux


# ---------------------------------------------------------------------------- one iteration
def restart_chains(
    state: TrainState, tasks: Tasks, key: jax.Array, cfg: dict[str, Any]
) -> tuple[jax.Array, jax.Array]:
    """New chain states at an epoch start: replayed with probability ``replay_prob`` (when the
    task's buffer has entries), else θ ~ μ + U(−a, a)ᵈ and r = 0 (App. F.1, F.3.1)."""
    num_tasks, k, d = state.theta.shape
    k_fresh, k_coin, k_pick = jax.random.split(key, 3)
    fresh = tasks.mean[:, None, :] + cfg["init_range"] * jax.random.uniform(
        k_fresh, (num_tasks, k, d), minval=-1.0, maxval=1.0
    )
    count = state.buffer_count[:, None]
    use = (jax.random.uniform(k_coin, (num_tasks, k)) < cfg["replay_prob"]) & (count > 0)
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


def make_update(cfg: dict[str, Any]) -> Any:
    """The jitted meta-iteration ``(state, iteration) -> (state, metrics)`` for ``cfg`` (cached:
    runs with the same config in one process share the compiled function)."""
    key = {k: v for k, v in cfg.items() if k not in RESUMABLE_CHANGES}
    return _cached_update(json.dumps(key, sort_keys=True))


@functools.lru_cache(maxsize=8)
def _cached_update(cfg_json: str) -> Any:
    cfg = json.loads(cfg_json)
    tasks = make_tasks(cfg)
    opt = optimizer(cfg)
    base_key = jax.random.key(cfg["seed"])

    @jax.jit
    def update(state: TrainState, iteration: jax.Array) -> tuple[TrainState, dict[str, Any]]:
        key = jax.random.fold_in(base_key, iteration)
        k_restart, k_loss = jax.random.split(key)
        new_epoch = iteration % cfg["iterations_per_epoch"] == 0
        theta0, r0 = restart_chains(state, tasks, k_restart, cfg)
        theta = jnp.where(new_epoch, theta0, state.theta)
        r = jnp.where(new_epoch, r0, state.r)
        (loss, aux), grads = jax.value_and_grad(meta_loss, has_aux=True)(
            state.meta, theta, r, tasks, k_loss, cfg
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


# ---------------------------------------------------------------------------- the driver
def train(
    config: dict[str, Any],
    out_dir: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
) -> TrainingRun:
    """Meta-train NNSGHMC (module docstring) and write the run to ``out_dir``.

    Writes ``checkpoint.npz`` and ``history.json`` every ``checkpoint_every`` iterations (and on
    Ctrl-C, before the ``KeyboardInterrupt`` propagates), then ``nnsghmc.npz`` (the meta-parameters,
    :func:`bdl.kernels.save_meta_params`), ``nnsghmc-hyper.json`` (the kernel hyper-parameters
    they were trained with) and ``loss.png``. With ``resume`` it continues from the checkpoint in
    ``out_dir`` (bitwise identical to an uninterrupted run); only ``iterations``,
    ``checkpoint_every`` and ``log_every`` may differ from the checkpointed config.
    """
    cfg = validate_config(config)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    state = init_state(cfg)
    start, history, wall_before = 0, [], 0.0
    if resume:
        _check_resumable(out, cfg)
        loaded = load_checkpoint(out, state)
        if loaded is not None:
            state, start, history, wall_before = loaded
            state = jax.tree.map(jnp.asarray, state)
        elif progress:
            print(f"nnsghmc: no checkpoint in {out}; starting afresh.", file=sys.stderr)
    update = make_update(cfg)
    total = cfg["iterations"]
    t0 = time.perf_counter()

    def elapsed() -> float:
        return wall_before + time.perf_counter() - t0

    def checkpoint(iteration: int) -> None:
        save_checkpoint(
            out, state, iteration=iteration, history=history, config=cfg, wall_time_s=elapsed()
        )

    it, skipped_in_a_row = start, 0
    skipped = sum(int(h.get("skipped", 0)) for h in history)
    rate_t, rate_it = time.perf_counter(), start
    previous_handler = _install_sigterm_as_interrupt()
    try:
        while it < total:
            new_state, metrics = update(state, jnp.asarray(it, jnp.int32))
            metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
            history.append({"iteration": it + 1, **metrics, "time_s": elapsed()})
            state, it = new_state, it + 1  # (an interrupt before this line drops the record)
            skipped_in_a_row = skipped_in_a_row + 1 if metrics["skipped"] else 0
            skipped += int(metrics["skipped"])
            if skipped_in_a_row >= MAX_SKIPPED:
                checkpoint(it)
                raise FloatingPointError(
                    f"nnsghmc: the chains diverged in {MAX_SKIPPED} iterations in a row (up to "
                    f"iteration {it}); lower step_size or learning_rate, or set q_bound "
                    "(checkpoint saved)."
                )
            if it % cfg["checkpoint_every"] == 0 or it == total:
                checkpoint(it)
            if progress and (it % cfg["log_every"] == 0 or it == total):
                now = time.perf_counter()
                rate = (it - rate_it) / max(now - rate_t, 1e-9)  # over the last log interval
                rate_t, rate_it = now, it
                eta = (total - it) / rate if rate > 0 else float("inf")
                print(
                    f"nnsghmc: iteration {it}/{total}  loss {metrics['loss']:.4g}  "
                    f"(cross {metrics['kl_cross']:.3g}, in-chain {metrics['kl_in_chain']:.3g})  "
                    f"f_Q {metrics['f_q']:.3g}  skipped {skipped}  {rate:.2f} it/s  "
                    f"ETA {eta:,.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
    except KeyboardInterrupt:
        del history[it:]  # keep the records of finished iterations only
        checkpoint(it)
        print(
            f"\nnnsghmc: interrupted at iteration {it}; checkpoint saved in {out} "
            "(continue with --resume).",
            file=sys.stderr,
        )
        raise
    finally:
        _restore_sigterm(previous_handler)

    meta = jax.device_get(state.meta)
    path = save_meta_params(out / f"{KERNEL}.npz", meta)
    hyper = kernel_hyper(cfg, cfg["dim"])
    (out / f"{KERNEL}-hyper.json").write_text(
        json.dumps(
            {
                "kernel": KERNEL,
                "trained_on_dim": cfg["dim"],
                "energy_scale_per_dim": cfg["energy_scale"],
                "note": "use NNSGHMC(energy_scale=energy_scale_per_dim / d) on a d-dim target",
                **{k: v for k, v in hyper.items() if k not in ("energy_scale", "num_data")},
            },
            indent=1,
        )
    )
    plot_history(history, out / "loss.png")
    return TrainingRun(
        kernel=KERNEL,
        out_dir=out,
        meta_params_path=path,
        history=history,
        wall_time_s=elapsed(),
        iterations=it,
    )


def _check_resumable(out: Path, cfg: dict[str, Any]) -> None:
    path = out / HISTORY
    if not path.is_file():
        return
    saved = json.loads(path.read_text()).get("config", {})
    keys = (set(saved) | set(cfg)) - RESUMABLE_CHANGES
    changed = sorted(k for k in keys if saved.get(k) != cfg.get(k))
    if changed:
        raise ValueError(
            f"{WHERE}: cannot resume the run in {out}: keys {changed} differ from its config; "
            "use a new --out directory or drop --resume."
        )


def _install_sigterm_as_interrupt() -> Any:
    """Treat SIGTERM like Ctrl-C (checkpoint, then stop); only possible in the main thread."""
    try:
        return signal.signal(signal.SIGTERM, signal.default_int_handler)
    except ValueError:  # not the main thread
        return None


def _restore_sigterm(previous: Any) -> None:
    if previous is not None:
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGTERM, previous)


def plot_history(history: list[dict[str, float]], path: str | Path) -> Path:
    """The loss curve (moment-matched KL estimates per iteration, with a running mean) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, ax = plt.subplots(figsize=(7, 4))
    if history:
        it = np.array([h["iteration"] for h in history])
        for key, color, label in (
            ("loss", "C0", "loss (weighted sum)"),
            ("kl_cross", "C1", "cross-chain KL(q_t‖π)"),
            ("kl_in_chain", "C2", "in-chain KL(q̄‖π)"),
        ):
            y = np.array([h[key] for h in history])
            ax.plot(it, y, color=color, alpha=0.25, lw=0.8)
            w = max(1, len(y) // 25)
            smooth = np.convolve(y, np.ones(w) / w, mode="valid")
            ax.plot(it[w - 1 :], smooth, color=color, lw=1.8, label=f"{label}, mean of {w}")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    ax.set_xlabel("meta-iteration (one Adam update)")
    ax.set_ylabel("moment-matched KL estimate")
    ax.set_title("NNSGHMC meta-training (Gong et al. 2019, Eq. 10–11)")
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

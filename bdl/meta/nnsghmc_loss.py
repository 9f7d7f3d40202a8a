"""NNSGHMC's meta-loss (Gong et al. 2019, Sec. 3.3; :mod:`bdl.meta.nnsghmc_training` explains
it): the library's NNSGHMC kernel unrolled differentiably over a batch of Gaussian tasks, and the
cross-chain and in-chain KL surrogates with the Stein gradient estimator."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from bdl.kernels.elementwise_mlp import MetaParams
from bdl.kernels.nnsghmc import nnsghmc
from bdl.kernels.nnsghmc_inputs import IDENTITY, InputStatistics, raw_features
from bdl.kernels.recipe import Context
from bdl.kernels.recipe_kernel import RecipeKernel, RecipeState
from bdl.meta.nnsghmc_config import NNSGHMCConfig, kernel_hyper
from bdl.meta.score_estimator import stein_score
from bdl.sampling.run.chain import run_chain


class Tasks(NamedTuple):
    """A pool of diagonal Gaussians: means and variances, shape (num_tasks, dim)."""

    mean: jax.Array
    var: jax.Array


def gaussian_energy(theta: jax.Array, mean: jax.Array, var: jax.Array) -> jax.Array:
    """U(θ) = ½ Σᵢ (θᵢ − μᵢ)²/σᵢ² over the last axis (no normalising constant)."""
    diff = theta - mean
    return 0.5 * jnp.sum(diff * diff / var, axis=-1)


def make_kernel(
    meta: MetaParams, cfg: NNSGHMCConfig, stats: InputStatistics = IDENTITY
) -> RecipeKernel:
    """The NNSGHMC kernel being trained (its meta-parameters may be tracers), with the input
    statistics of the pilot run (constants)."""
    return nnsghmc(meta_params=meta, input_stats=stats, **kernel_hyper(cfg))


def _chain_step(kernel: RecipeKernel, grad_noise: float, dtype: Any) -> Any:
    """One step of one chain on N(m, diag(v)) with N(0, grad_noise²·I) added to the gradient:
    ``(state, m, v, chain_key, t) -> state``."""
    h = jnp.asarray(kernel.step_size, dtype)
    temperature = jnp.asarray(1.0, dtype)

    def chain_step(state: RecipeState, m: jax.Array, v: jax.Array, ckey: jax.Array, t: jax.Array):
        k_grad, k_step = jax.random.split(jax.random.fold_in(ckey, t))

        def energy_and_grad(th: jax.Array) -> tuple[jax.Array, jax.Array]:
            grad = (th - m) / v
            noise = grad_noise * jax.random.normal(k_grad, th.shape, th.dtype)
            return 0.5 * jnp.sum((th - m) * grad), grad + noise

        return kernel.step(k_step, state, energy_and_grad, h, temperature)[0]

    return chain_step


def unroll(
    kernel: RecipeKernel,
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
    remat: bool = False,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Run K chains of ``kernel`` (the library's own step) for ``window × num_windows`` steps,
    differentiably, with :func:`bdl.sampling.run.chain.run_chain`.

    ``theta``, ``r``, ``mean`` and ``var`` are (K, d): chain k targets N(mean_k, diag(var_k))
    with N(0, grad_noise²·I) added to every gradient. Returns ``(thetas, theta_last, r_last)``
    with ``thetas`` the positions after every step, shape (steps, K, d). With ``truncate`` (a
    bool, possibly traced) the state passes through ``stop_gradient`` at the start of every
    window but the first (truncated back-propagation, App. D): a loss term's gradient reaches
    back to the start of its window only. ``remat`` recomputes each step in the backward pass
    (``jax.checkpoint``) instead of storing its intermediates, for long windows or large d.
    """
    chain_keys = jax.random.split(key, theta.shape[0])
    chain_step = _chain_step(kernel, grad_noise, theta.dtype)

    def transition(states: RecipeState, t: jax.Array) -> tuple[RecipeState, None]:
        # truncated back-propagation: no gradient flows into a window from the one before
        cut = jnp.logical_and(jnp.asarray(truncate), (t > 0) & (t % window == 0))
        states = jax.tree.map(lambda x: jnp.where(cut, jax.lax.stop_gradient(x), x), states)
        states = jax.vmap(chain_step, in_axes=(0, 0, 0, 0, None))(states, mean, var, chain_keys, t)
        return states, None

    if remat:
        transition = jax.checkpoint(transition)
    start = RecipeState({"theta": theta, "r": r})
    last, thetas = run_chain(
        transition, start, 0, window * num_windows, observe=lambda s, _, t: s.z["theta"]
    )
    return thetas, last.z["theta"], last.z["r"]


def pilot_run(
    kernel: RecipeKernel,
    theta: jax.Array,
    r: jax.Array,
    mean: jax.Array,
    var: jax.Array,
    key: jax.Array,
    *,
    steps: int,
    grad_noise: float,
) -> InputStatistics:
    """The input statistics of App. E: run ``kernel`` (the randomly initialised sampler) for
    ``steps`` steps from (θ, r) (K, d) on the tasks (mean, var) (K, d), and measure the mean and
    sd of the raw features Ũ/d, r and ∂Ũ (with the tasks' gradient noise) over every step, chain
    and coordinate (:mod:`bdl.kernels.nnsghmc_inputs`)."""
    chain_keys = jax.random.split(key, theta.shape[0])
    chain_step = _chain_step(kernel, grad_noise, theta.dtype)
    d = theta.shape[-1]

    def transition(states: RecipeState, t: jax.Array) -> tuple[RecipeState, None]:
        return jax.vmap(chain_step, in_axes=(0, 0, 0, 0, None))(
            states, mean, var, chain_keys, t
        ), None

    start = RecipeState({"theta": theta, "r": r})
    _, (thetas, rs) = run_chain(
        transition, start, 0, steps, observe=lambda s, _, t: (s.z["theta"], s.z["r"])
    )
    exact = (thetas - mean) / var
    energy = 0.5 * jnp.sum((thetas - mean) * exact, axis=-1)
    noise = grad_noise * jax.random.normal(jax.random.fold_in(key, steps), thetas.shape)
    u, p, g = raw_features(energy, rs, exact + noise, d)
    return InputStatistics(
        float(jnp.mean(u)),
        float(jnp.std(u)),
        float(jnp.mean(p)),
        float(jnp.std(p)),
        float(jnp.mean(g)),
        float(jnp.std(g)),
    )


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
    cfg: NNSGHMCConfig,
    stats: InputStatistics = IDENTITY,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The surrogate cross-chain + in-chain loss (Eq. 10, 11), averaged over the tasks.

    ``theta`` and ``r`` are (tasks, K, d). All tasks' chains run as one batch of chains, with the
    input statistics ``stats`` (:func:`pilot_run`). Returns the surrogate (to differentiate) and
    diagnostics, including the final chain states.
    """
    num_tasks, k, d = theta.shape
    kernel = make_kernel(meta, cfg, stats)
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
        window=cfg.window,
        num_windows=cfg.windows_per_iteration,
        grad_noise=cfg.grad_noise,
    )
    steps = thetas.shape[0]
    thetas = thetas.reshape(steps, num_tasks, k, d)
    stein = {"eta": cfg.stein_eta, "bandwidth_scale": cfg.stein_bandwidth_scale}

    def per_task(fn: Any, x: jax.Array) -> jax.Array:
        """``fn(samples (n, d), μ, σ²)`` over x of shape (groups, tasks, n, d) → (groups, tasks)."""
        return jax.vmap(jax.vmap(fn, in_axes=(0, 0, 0)), in_axes=(0, None, None))(
            x, tasks.mean, tasks.var
        )

    def sur(x: jax.Array, m: jax.Array, v: jax.Array) -> jax.Array:
        return surrogate(x, m, v, **stein)

    # cross-chain: q_t across the K chains, every `cross_chain_every` steps (Eq. 10)
    cross = thetas[cfg.cross_chain_every - 1 :: cfg.cross_chain_every]  # (T_c, tasks, K, d)
    cross_loss = jnp.mean(per_task(sur, cross))
    kl_cross = jnp.mean(per_task(marginal_kl, cross))

    # in-chain: q along a sub-sampled chain's thinned trajectory (Eq. 11)
    times = jnp.arange(cfg.in_chain_burn_in, steps, cfg.in_chain_thin)
    chains = jax.vmap(lambda kk: jax.random.choice(kk, k, (cfg.in_chain_chains,), replace=False))(
        jax.random.split(k_sub, num_tasks)
    )  # (tasks, n_in)
    picked = jnp.take_along_axis(thetas[times], chains[None, :, :, None], axis=2)
    inner = jnp.transpose(picked, (2, 1, 0, 3))  # (n_in, tasks, T_in, d)
    in_loss = jnp.mean(per_task(sur, inner))
    kl_in = jnp.mean(per_task(marginal_kl, inner))

    wc, wi = cfg.cross_chain_weight, cfg.in_chain_weight
    loss = wc * cross_loss + wi * in_loss

    # what the sampler does at the final states (diagnostic)
    last = jax.lax.stop_gradient(theta_last)
    rl = jax.lax.stop_gradient(r_last)
    m_flat, v_flat = mean.reshape(flat), var.reshape(flat)
    grad = (last - m_flat) / v_flat
    energy = 0.5 * jnp.sum((last - m_flat) * grad, axis=-1)
    recipe = jax.lax.stop_gradient(kernel.recipe)

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

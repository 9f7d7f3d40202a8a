"""Meta-training of L2E and Kinetic-L2E by antithetic evolution strategies (Kim et al. 2024).

One outer iteration (Kim et al. 2024, Alg. 1):

1. sample a task T from the task distribution (:mod:`bdl.meta.tasks`);
2. draw N perturbation pairs ±η_i ~ N(0, σ²I) of the meta-parameters φ (:mod:`bdl.meta.es`);
3. run the inner loop (Alg. 2) for each of the 2N perturbed samplers, all under one ``vmap``
   with common random numbers (the same initial θ₀, minibatches and injected noise): a chain of
   ``num_steps`` steps as a ``lax.scan``, discarding ``burn_in`` steps and keeping every
   ``thin``-th state after them, K states in all;
4. score each chain by the BMA meta-loss on the task's held-out data (Eq. 7), averaged over the
   held-out points,

       L(φ) = −(1/n*) Σ_{(x*, y*)} log (1/K) Σ_k p(y* | x*, θ_k(φ));

5. estimate ∇_φ L by Eq. 10 and take an Adam step on φ after clipping the estimate's global
   norm (App. I.3).

Only the held-out log-likelihoods of the kept states leave the scan, so memory does not grow
with the chain length. Alongside the population the unperturbed sampler with zero output heads
(exactly SGHMC, see :mod:`bdl.kernels.l2e`) runs with the same random numbers, so every
iteration records the meta-loss of the untrained baseline on the same task. For L2E's paper form
(``form = "paper"``), whose zero heads would freeze θ, the baseline is the residual form's zero
heads (SGHMC) in a call of its own, with the same chain key.

:func:`train` dispatches on the config's ``kernel`` (``"l2e"`` or ``"kinetic-l2e"``); the two
differ only in their meta-parameters and kernel class. The outer loop, checkpoints and outputs
are :mod:`bdl.meta.driver`'s.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import sys
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from bdl.compile.compiled_model import CompiledModel
from bdl.kernels.base import Kernel
from bdl.kernels.elementwise_mlp import ElementwiseMLP, MetaParams
from bdl.kernels.kinetic_l2e import init_kinetic_l2e_params, kinetic_l2e
from bdl.kernels.l2e import init_l2e_params, l2e
from bdl.meta import driver, es
from bdl.meta.config import parse_config
from bdl.meta.driver import TrainingRun
from bdl.meta.l2e_config import L2EConfig
from bdl.meta.tasks import Task, TaskDistribution
from bdl.sampling.run.chain import run_chain

PyTree = Any

KERNELS: dict[str, tuple[Callable[..., Kernel], Callable[..., MetaParams]]] = {
    "l2e": (l2e, init_l2e_params),
    "kinetic-l2e": (kinetic_l2e, init_kinetic_l2e_params),
}


# ------------------------------------------------------------------------------ inner loop
def bma_meta_loss(log_lik: jax.Array) -> jax.Array:
    """Kim et al. (2024), Eq. 7 averaged over held-out points: log-likelihoods ``(K, n*)`` of
    K samples give −(1/n*) Σ_j log (1/K) Σ_k p(y*_j | x*_j, θ_k)."""
    k = log_lik.shape[0]
    return -jnp.mean(jax.nn.logsumexp(log_lik, axis=0) - jnp.log(k))


def zero_heads(params: MetaParams) -> MetaParams:
    """The meta-parameters with every network's output layer set to zero: L2E's heads vanish
    (α = 0, β = r) and Kinetic-L2E's f_φ = 0, so both kernels are exactly SGHMC."""

    def zero_last(mlp: ElementwiseMLP) -> ElementwiseMLP:
        return eqx.tree_at(
            lambda m: (m.weights[-1], m.biases[-1]),
            mlp,
            (jnp.zeros_like(mlp.weights[-1]), jnp.zeros_like(mlp.biases[-1])),
        )

    return {name: zero_last(mlp) for name, mlp in params.items()}


def inner_loop_loss(
    kernel: Kernel,
    model: CompiledModel,
    key: jax.Array,
    *,
    num_steps: int,
    burn_in: int,
    thin: int,
) -> jax.Array:
    """Kim et al. (2024), Alg. 2: run ``kernel`` on ``model`` from a fresh network
    initialisation for ``num_steps`` steps (:func:`bdl.sampling.run.chain.run_chain`), keep every
    ``thin``-th state after
    ``burn_in``, and return the BMA meta-loss (Eq. 7) of the kept states on the model's
    held-out split (``x_test``, ``y_test``)."""
    k_init, k_kernel, k_batch, k_run = jax.random.split(key, 4)
    theta0 = jax.tree.map(lambda a: a[0], model.init_positions(k_init, 1))
    kernel = kernel.bind(model)

    def step(carry: Any, t: jax.Array) -> tuple[Any, None]:
        state, stream = carry
        batch, stream = model.next_batch(stream, t)
        h, temperature = kernel.hyper(t, model.temperature(t))
        grad_fn = partial(model.stochastic_energy_and_grad, batch=batch)
        state, _ = kernel.step(jax.random.fold_in(k_run, t), state, grad_fn, h, temperature)
        return (state, stream), None

    def held_out(carry: Any, _: None, t: jax.Array) -> jax.Array:
        return model.log_likelihood(kernel.position(carry[0]), model.x_test, model.y_test)

    carry = (kernel.init(theta0, k_kernel), model.init_batches(k_batch))
    num_kept = (num_steps - burn_in) // thin
    start = num_steps - num_kept * thin  # the last kept state is the final one
    carry, _ = run_chain(step, carry, 0, start)
    _, log_lik = run_chain(step, carry, start, num_kept, thin, held_out)
    return bma_meta_loss(log_lik)


@dataclasses.dataclass(frozen=True)
class InnerSettings:
    """The static settings of the inner loop (part of the jit cache key)."""

    kernel: str
    num_steps: int
    burn_in: int
    thin: int
    loss_cap: float
    init_momentum: str
    form: str = "residual"

    # fields then a property, as a frozen dataclass reads (diagnostics.bias.Bias alike): no logic
    # is shared
    @property
    def baseline_inside(self) -> bool:
        """Whether zero output heads make this kernel SGHMC, so the baseline can join the
        population (not so for L2E's paper form: there zero heads freeze θ)."""
        return self.form == "residual"

    def sghmc(self) -> InnerSettings:
        """The settings whose kernel, at zero heads, is SGHMC (L2E's residual form)."""
        return dataclasses.replace(self, form="residual")


def make_kernel(settings: InnerSettings, params: MetaParams, task: TaskHyper) -> Kernel:
    """The learned kernel with meta-parameters ``params`` at the task's step size and friction."""
    factory, _ = KERNELS[settings.kernel]
    extra = {"form": settings.form} if settings.kernel == "l2e" else {}
    return factory(
        task.step_size,
        task.friction,
        meta_params=params,
        init_momentum=settings.init_momentum,
        **extra,
    )


@dataclasses.dataclass(frozen=True)
class TaskHyper:
    """A task's SG-MCMC step size h and friction C (static: fixed within a family)."""

    step_size: float
    friction: float

    @classmethod
    def of(cls, task: Task) -> TaskHyper:
        return cls(float(task.step_size), float(task.friction))


@eqx.filter_jit
def population_losses(
    settings: InnerSettings,
    population: MetaParams,
    model: CompiledModel,
    hyper: TaskHyper,
    keys: jax.Array,
) -> jax.Array:
    """Meta-losses of a population of meta-parameters (leading axis P) on one task, under one
    ``vmap``, member m running with chain key ``keys[m]``. Non-finite or larger losses (a
    diverged chain) are replaced by ``settings.loss_cap``.

    Compiled once per task family and population size: training and :func:`evaluate` share it.
    """

    def one(params: MetaParams, key: jax.Array) -> jax.Array:
        loss = inner_loop_loss(
            make_kernel(settings, params, hyper),
            model,
            key,
            num_steps=settings.num_steps,
            burn_in=settings.burn_in,
            thin=settings.thin,
        )
        cap = settings.loss_cap
        return jnp.where(jnp.isfinite(loss), jnp.minimum(loss, cap), cap)

    return jax.vmap(one)(population, keys)


def _stack(params_list: list[MetaParams]) -> MetaParams:
    return jax.tree.map(lambda *xs: jnp.stack(xs), *params_list)


@partial(jax.jit, static_argnums=(2, 3, 4))
def _population(
    params: MetaParams, key: jax.Array, num_pairs: int, sigma: float, with_baseline: bool = True
) -> tuple[MetaParams, MetaParams, jax.Array]:
    """(η, [φ + η_1..N, φ − η_1..N, zero heads], the common chain key repeated 2N + 1 times);
    without the zero-head member when ``with_baseline`` is false (2N keys)."""
    k_eps, k_chain = jax.random.split(key)
    eps = es.perturbations(k_eps, params, num_pairs, sigma)
    population = es.antithetic_population(params, eps)
    if not with_baseline:
        return eps, population, jnp.broadcast_to(k_chain, (2 * num_pairs,))
    baseline = jax.tree.map(lambda x: x[None], zero_heads(params))
    population = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), population, baseline)
    return eps, population, jnp.broadcast_to(k_chain, (2 * num_pairs + 1,))


def sghmc_losses(
    settings: InnerSettings, params: MetaParams, task: Task, keys: jax.Array
) -> jax.Array:
    """Meta-losses of SGHMC (L2E's residual form with zero heads) with chain keys ``keys``, one
    chain per key and one compiled population of one member, whatever the number of keys."""
    zero = jax.tree.map(lambda x: x[None], zero_heads(params))
    hyper = TaskHyper.of(task)
    return jnp.concatenate(
        [
            population_losses(settings.sghmc(), zero, task.model, hyper, keys[i : i + 1])
            for i in range(keys.shape[0])
        ]
    )


@eqx.filter_jit
def _update(
    optimizer: optax.GradientTransformation,
    params: MetaParams,
    opt_state: Any,
    eps: MetaParams,
    losses: jax.Array,
    sigma: float,
) -> tuple[MetaParams, Any, dict[str, jax.Array]]:
    num_pairs = (losses.shape[0] - 1) // 2
    plus, minus = losses[:num_pairs], losses[num_pairs : 2 * num_pairs]
    grad = es.antithetic_gradient(plus, minus, eps, sigma)
    updates, opt_state = optimizer.update(grad, opt_state, params)
    stats = {
        "loss": jnp.mean(losses[: 2 * num_pairs]),
        "sghmc_loss": losses[2 * num_pairs],
        "grad_norm": optax.tree.norm(grad),
        "spread": jnp.mean(jnp.abs(plus - minus)),
    }
    return optax.apply_updates(params, updates), opt_state, stats


def es_step(
    settings: InnerSettings,
    optimizer: optax.GradientTransformation,
    params: MetaParams,
    opt_state: Any,
    task: Task,
    key: jax.Array,
    *,
    num_pairs: int,
    sigma: float,
) -> tuple[MetaParams, Any, dict[str, float]]:
    """One outer iteration on one task (Kim et al. 2024, Alg. 1 lines 5–10 with N pairs):
    perturb φ, run the 2N inner loops and the zero-head baseline under one ``vmap`` with common
    random numbers, estimate the gradient (Eq. 10), clip its global norm, take an Adam step."""
    inside = settings.baseline_inside
    eps, population, keys = _population(params, key, num_pairs, sigma, inside)
    losses = population_losses(settings, population, task.model, TaskHyper.of(task), keys)
    if not inside:
        losses = jnp.concatenate([losses, sghmc_losses(settings, params, task, keys[:1])])
    params, opt_state, stats = _update(optimizer, params, opt_state, eps, losses, sigma)
    return params, opt_state, {k: float(v) for k, v in stats.items()}


# ------------------------------------------------------------------------------ evaluation
def evaluate(
    kernel: str,
    params: MetaParams,
    tasks: list[Task],
    settings: InnerSettings,
    *,
    num_pairs: int,
    repeats: int,
    seed: int,
) -> list[dict[str, Any]]:
    """Meta-loss (Eq. 7) of ``params`` and of the zero-head sampler (SGHMC) on each task.

    Each of ``repeats`` rounds runs N = ``num_pairs`` chains of each sampler, paired on the same
    chain keys (the population size 2N + 1 of training, so nothing recompiles). L2E's paper form
    runs 2N chains per round in its training population of 2N and SGHMC on the same 2N keys one
    chain at a time (the baseline's compiled size in training). Returns one record per task: both
    mean losses over the chains, their paired difference and its standard error.
    """
    zero = zero_heads(params)
    inside = settings.baseline_inside
    if inside:
        population = _stack([params] * num_pairs + [zero] * num_pairs + [params])
    else:
        population = _stack([params] * (2 * num_pairs))
    results = []
    for i, task in enumerate(tasks):
        trained, base = [], []
        for r in range(repeats):
            key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), i), r)
            hyper = TaskHyper.of(task)
            if not inside:
                keys = jax.random.split(key, 2 * num_pairs)
                trained.extend(
                    np.asarray(population_losses(settings, population, task.model, hyper, keys))
                )
                base.extend(np.asarray(sghmc_losses(settings, params, task, keys)))
                continue
            keys = jax.random.split(key, num_pairs)
            keys = jnp.concatenate([keys, keys, keys[:1]])
            losses = np.asarray(population_losses(settings, population, task.model, hyper, keys))
            trained.extend(losses[:num_pairs])
            base.extend(losses[num_pairs : 2 * num_pairs])
        diff = np.asarray(trained) - np.asarray(base)
        m = len(diff)
        results.append(
            {
                "task": task.name,
                "family": task.family.name,
                "held_out": False,
                kernel: float(np.mean(trained)),
                "sghmc": float(np.mean(base)),
                "difference": float(diff.mean()),
                "difference_se": float(diff.std(ddof=1) / math.sqrt(m)) if m > 1 else 0.0,
            }
        )
    return results


# ------------------------------------------------------------------------------ training
def init_params(cfg: L2EConfig) -> MetaParams:
    """φ₀: the kernel's random meta-parameters with the output layer scaled by
    ``init_final_scale`` (0: the sampler starts as SGHMC; for L2E's paper form, as SGHMC with
    the momentum divided by its per-leaf RMS, see :func:`bdl.kernels.l2e.init_l2e_params`)."""
    _, init = KERNELS[cfg.kernel]
    extra = {"form": cfg.form} if cfg.kernel == "l2e" else {}
    return init(cfg.init_seed, final_scale=cfg.init_final_scale, **extra)


@functools.cache
def make_optimizer(cfg: L2EConfig) -> optax.GradientTransformation:
    """Global-norm clipping of the ES estimate, then Adam (Kim et al. 2024, App. I.3); cached, so
    equal configs share the object and the jitted update compiled for it."""
    adam = optax.adam(cfg.learning_rate, b1=cfg.adam_b1, b2=cfg.adam_b2)
    return optax.chain(optax.clip_by_global_norm(cfg.clip_norm), adam)


def settings_of(cfg: L2EConfig) -> InnerSettings:
    """The inner-loop settings (Alg. 2) of a config."""
    return InnerSettings(
        cfg.kernel,
        cfg.num_steps,
        cfg.burn_in,
        cfg.thin,
        cfg.loss_cap,
        cfg.init_momentum,
        cfg.form,
    )


def train(
    config: L2EConfig | Mapping[str, Any],
    out_dir: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
) -> TrainingRun:
    """Meta-train L2E or Kinetic-L2E (the config's ``kernel``) by antithetic ES (Kim et al. 2024,
    Alg. 1, Eq. 7 and 10) and write the run to ``out_dir``.

    The run directory is :mod:`bdl.meta.driver`'s (checkpoints every ``checkpoint_every``
    iterations and on Ctrl-C, ``<kernel>.npz``, ``loss.png``) plus, when ``eval_repeats > 0``,
    ``eval.json`` (trained vs SGHMC on held-out-seed tasks of every family and on the held-out
    family). ``resume=True`` continues from ``out_dir``'s checkpoint; an interrupted and resumed
    run ends bitwise equal to an uninterrupted one.
    """
    kernel = config.get("kernel", "l2e") if isinstance(config, Mapping) else config.kernel
    cfg = parse_config(L2EConfig, config, f"meta-train {kernel}")
    kernel = cfg.meta_params_name  # "l2e-paper" for L2E's paper form
    distribution = TaskDistribution(cfg.families, cfg.held_out or None)
    optimizer = make_optimizer(cfg)
    settings = settings_of(cfg)
    params = init_params(cfg)

    def step(state: PyTree, it: int) -> tuple[PyTree, dict[str, Any]]:
        task = distribution.sample(cfg.seed, it)
        key = jax.random.fold_in(jax.random.key(cfg.seed), it)
        tic = time.perf_counter()
        params, opt_state, stats = es_step(
            settings, optimizer, *state, task, key, num_pairs=cfg.num_pairs, sigma=cfg.sigma
        )
        record = {"task": task.name, **stats, "seconds": time.perf_counter() - tic}
        return (params, opt_state), record

    def describe(history: list[dict[str, Any]]) -> str:
        return f"loss {history[-1]['loss']:.4f} (sghmc {history[-1]['sghmc_loss']:.4f})"

    loop = driver.Loop(
        state=(params, optimizer.init(params)),
        step=step,
        meta_params=lambda state: state[0],
        describe=describe,
        plot={
            "series": {"loss": "learned (ES population mean)", "sghmc_loss": "zero heads = SGHMC"},
            "ylabel": "BMA meta-loss (nats / held-out point)",
            "title": f"{kernel} meta-training",
            "difference": ("loss", "sghmc_loss", "learned − SGHMC (same task, same noise)"),
        },
    )
    result, (params, _) = driver.run(cfg, loop, out_dir, resume=resume, progress=progress)

    if cfg.eval_repeats > 0:
        results = evaluate(
            kernel,
            params,
            distribution.evaluation_tasks(cfg.seed),
            settings,
            num_pairs=cfg.num_pairs,
            repeats=cfg.eval_repeats,
            seed=cfg.seed + 1,
        )
        if cfg.held_out:
            results[-1]["held_out"] = True
        (result.out_dir / "eval.json").write_text(json.dumps(results, indent=1))
        if progress:
            for r in results:
                tag = " (held out)" if r["held_out"] else ""
                print(
                    f"  {r['task']}{tag}: {kernel} {r[kernel]:.4f}  sghmc {r['sghmc']:.4f}  "
                    f"diff {r['difference']:+.4f} ± {r['difference_se']:.4f}",
                    file=sys.stderr,
                )
    return result

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
iteration records the meta-loss of the untrained baseline on the same task.

:func:`train` dispatches on ``config["kernel"]`` (``"l2e"`` or ``"kinetic-l2e"``); the two
differ only in their meta-parameters and kernel class.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import sys
import time
from collections.abc import Callable
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
from bdl.kernels.elementwise_mlp import ElementwiseMLP, MetaParams, save_meta_params
from bdl.kernels.kinetic_l2e import KineticL2E, init_kinetic_l2e_params
from bdl.kernels.l2e import L2E, init_l2e_params
from bdl.meta import es
from bdl.meta.checkpoint import TrainingRun, load_checkpoint, save_checkpoint
from bdl.meta.config import merge
from bdl.meta.tasks import FAMILIES, HELD_OUT, TRAINING_FAMILIES, Task, TaskDistribution

PyTree = Any

KERNELS: dict[str, tuple[type[Kernel], Callable[..., MetaParams]]] = {
    "l2e": (L2E, init_l2e_params),
    "kinetic-l2e": (KineticL2E, init_kinetic_l2e_params),
}

#: every config key with its default (the shipped configs set the run lengths)
DEFAULTS: dict[str, Any] = {
    "seed": 0,
    "iterations": 120,
    "num_pairs": 4,
    "sigma": 0.01,
    "learning_rate": 0.003,
    "adam_b1": 0.9,
    "adam_b2": 0.99,
    "clip_norm": 1.0,
    "num_steps": 2000,
    "burn_in": 1500,
    "thin": 50,
    "loss_cap": 10.0,
    "init_momentum": "sample",
    "init_seed": 0,
    "init_final_scale": 0.0,
    "families": list(TRAINING_FAMILIES),
    "held_out": HELD_OUT,
    "checkpoint_every": 10,
    "eval_repeats": 2,
}

#: keys that may change when a run is resumed
RESUMABLE = {"iterations", "checkpoint_every", "eval_repeats"}


# ------------------------------------------------------------------------------ config
def validate_config(config: dict[str, Any]) -> dict[str, Any]:
    """The full settings: defaults updated by ``config``; raises ``ValueError`` naming the key."""
    kernel = config.get("kernel")
    if kernel not in KERNELS:
        raise ValueError(f"config key 'kernel' must be one of {sorted(KERNELS)}; got {kernel!r}.")
    cfg = merge(DEFAULTS, config, where=f"meta-train {kernel}")

    def integer(key: str, minimum: int) -> None:
        v = cfg[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise ValueError(f"config key {key!r} must be an integer >= {minimum}; got {v!r}.")

    def positive(key: str) -> None:
        v = cfg[key]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"config key {key!r} must be a finite number > 0; got {v!r}.")

    for key in ("seed", "init_seed"):
        integer(key, 0)
    for key in ("iterations", "num_pairs", "num_steps", "thin", "checkpoint_every"):
        integer(key, 1)
    for key in ("burn_in", "eval_repeats"):
        integer(key, 0)
    for key in ("sigma", "learning_rate", "clip_norm", "loss_cap"):
        positive(key)
    for key in ("adam_b1", "adam_b2"):
        v = cfg[key]
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < 1:
            raise ValueError(f"config key {key!r} must be in [0, 1); got {v!r}.")
    v = cfg["init_final_scale"]
    if isinstance(v, bool) or not isinstance(v, int | float) or not (math.isfinite(v) and v >= 0):
        raise ValueError(f"config key 'init_final_scale' must be a number >= 0; got {v!r}.")
    if cfg["init_momentum"] not in ("zero", "sample"):
        raise ValueError(
            f"config key 'init_momentum' must be 'zero' or 'sample'; got {cfg['init_momentum']!r}."
        )
    if cfg["burn_in"] >= cfg["num_steps"] or (cfg["num_steps"] - cfg["burn_in"]) < cfg["thin"]:
        raise ValueError(
            "config keys 'num_steps', 'burn_in', 'thin': need burn_in < num_steps and at least "
            f"one kept state; got num_steps={cfg['num_steps']}, burn_in={cfg['burn_in']}, "
            f"thin={cfg['thin']}."
        )
    fams = cfg["families"]
    if not isinstance(fams, list | tuple) or not all(isinstance(f, str) for f in fams):
        raise ValueError(f"config key 'families' must be a list of family names; got {fams!r}.")
    unknown = [f for f in fams if f not in FAMILIES]
    if unknown or not fams:
        raise ValueError(
            f"config key 'families' has unknown names {unknown}; known: {sorted(FAMILIES)}."
        )
    held = cfg["held_out"]
    if held in ("", None):
        cfg["held_out"] = None
    elif held not in FAMILIES:
        raise ValueError(f"config key 'held_out' must be a family name or ''; got {held!r}.")
    elif held in fams:
        raise ValueError(f"config key 'held_out': {held!r} is also listed in 'families'.")
    cfg["families"] = list(fams)
    cfg["kernel"] = kernel
    return cfg


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
    initialisation for ``num_steps`` steps (a ``lax.scan``), keep every ``thin``-th state after
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

    carry = (kernel.init(theta0, k_kernel), model.init_batches(k_batch))
    num_kept = (num_steps - burn_in) // thin
    start = num_steps - num_kept * thin  # the last kept state is the final one
    carry, _ = jax.lax.scan(step, carry, jnp.arange(start))

    def draw(carry: Any, d: jax.Array) -> tuple[Any, jax.Array]:
        carry, _ = jax.lax.scan(step, carry, start + d * thin + jnp.arange(thin))
        theta = kernel.position(carry[0])
        return carry, model.log_likelihood(theta, model.x_test, model.y_test)

    _, log_lik = jax.lax.scan(draw, carry, jnp.arange(num_kept))
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


def make_kernel(settings: InnerSettings, params: MetaParams, task: TaskHyper) -> Kernel:
    """The learned kernel with meta-parameters ``params`` at the task's step size and friction."""
    cls, _ = KERNELS[settings.kernel]
    return cls(
        meta_params=params,
        step_size=task.step_size,
        friction=task.friction,
        init_momentum=settings.init_momentum,
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


@partial(jax.jit, static_argnums=(2, 3))
def _population(
    params: MetaParams, key: jax.Array, num_pairs: int, sigma: float
) -> tuple[MetaParams, MetaParams, jax.Array]:
    """(η, [φ + η_1..N, φ − η_1..N, zero heads], the common chain key repeated 2N + 1 times)."""
    k_eps, k_chain = jax.random.split(key)
    eps = es.perturbations(k_eps, params, num_pairs, sigma)
    population = es.antithetic_population(params, eps)
    baseline = jax.tree.map(lambda x: x[None], zero_heads(params))
    population = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), population, baseline)
    return eps, population, jnp.broadcast_to(k_chain, (2 * num_pairs + 1,))


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
    eps, population, keys = _population(params, key, num_pairs, sigma)
    losses = population_losses(settings, population, task.model, TaskHyper.of(task), keys)
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
    chain keys (the population size 2N + 1 of training, so nothing recompiles). Returns one
    record per task: both mean losses over the N·repeats chains, their paired difference and
    its standard error.
    """
    zero = zero_heads(params)
    population = _stack([params] * num_pairs + [zero] * num_pairs + [params])
    results = []
    for i, task in enumerate(tasks):
        trained, base = [], []
        for r in range(repeats):
            key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), i), r)
            keys = jax.random.split(key, num_pairs)
            keys = jnp.concatenate([keys, keys, keys[:1]])
            losses = np.asarray(
                population_losses(settings, population, task.model, TaskHyper.of(task), keys)
            )
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
class _Progress:
    def __init__(self, total: int, start: int, enabled: bool, label: str):
        self.total, self.start, self.enabled, self.label = total, start, enabled, label
        self.t0 = time.perf_counter()
        self.tty = sys.stderr.isatty()

    def update(self, done: int, loss: float, base: float) -> None:
        if not self.enabled:
            return
        elapsed = max(time.perf_counter() - self.t0, 1e-9)
        rate = (done - self.start) / elapsed
        eta = (self.total - done) / rate if rate > 0 else float("inf")
        line = (
            f"{self.label}: iteration {done}/{self.total}  loss {loss:.4f}  "
            f"(sghmc {base:.4f})  {rate:.3f} it/s  ETA {eta:,.0f} s"
        )
        sys.stderr.write(("\r" + line + "   ") if self.tty else (line + "\n"))
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


def init_params(cfg: dict[str, Any]) -> MetaParams:
    """φ₀: the kernel's random meta-parameters with the output layer scaled by
    ``init_final_scale`` (0: the sampler starts as SGHMC)."""
    _, init = KERNELS[cfg["kernel"]]
    return init(cfg["init_seed"], final_scale=float(cfg["init_final_scale"]))


def make_optimizer(cfg: dict[str, Any]) -> optax.GradientTransformation:
    """Global-norm clipping of the ES estimate, then Adam (Kim et al. 2024, App. I.3)."""
    return _optimizer(
        float(cfg["clip_norm"]),
        float(cfg["learning_rate"]),
        float(cfg["adam_b1"]),
        float(cfg["adam_b2"]),
    )


@functools.cache
def _optimizer(clip: float, lr: float, b1: float, b2: float) -> optax.GradientTransformation:
    # cached: the same settings give the same object, so the jitted update is reused
    return optax.chain(optax.clip_by_global_norm(clip), optax.adam(lr, b1=b1, b2=b2))


def settings_of(cfg: dict[str, Any]) -> InnerSettings:
    """The inner-loop settings (Alg. 2) of a validated config."""
    return InnerSettings(
        cfg["kernel"],
        int(cfg["num_steps"]),
        int(cfg["burn_in"]),
        int(cfg["thin"]),
        float(cfg["loss_cap"]),
        cfg["init_momentum"],
    )


def train(
    config: dict[str, Any],
    out_dir: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
) -> TrainingRun:
    """Meta-train L2E or Kinetic-L2E (``config["kernel"]``) by antithetic ES (Kim et al. 2024,
    Alg. 1, Eq. 7 and 10) and write the run to ``out_dir``.

    Writes ``checkpoint.npz`` and ``history.json`` every ``checkpoint_every`` iterations (and on
    Ctrl-C, before re-raising), then ``<kernel>.npz`` (the final meta-parameters,
    :func:`bdl.kernels.save_meta_params` format), ``loss.png`` (the loss curve) and, when
    ``eval_repeats > 0``, ``eval.json`` (trained vs SGHMC on held-out-seed tasks of every family
    and on the held-out family). ``resume=True`` continues from ``out_dir``'s checkpoint; an
    interrupted and resumed run ends bitwise equal to an uninterrupted one.
    """
    cfg = validate_config(dict(config))
    kernel = cfg["kernel"]
    out_dir = Path(out_dir)
    distribution = TaskDistribution(cfg["families"], cfg["held_out"])
    optimizer = make_optimizer(cfg)
    settings = settings_of(cfg)
    params = init_params(cfg)
    opt_state = optimizer.init(params)
    history: list[dict[str, Any]] = []
    start, wall_before = 0, 0.0

    saved = load_checkpoint(out_dir, {"params": params, "opt_state": opt_state}) if resume else None
    if saved is not None:
        state, start, history, wall_before = saved
        _check_resumable(out_dir, cfg)
        params, opt_state = state["params"], state["opt_state"]
        params = jax.tree.map(jnp.asarray, params)
        opt_state = jax.tree.map(jnp.asarray, opt_state)
    elif (out_dir / "checkpoint.npz").exists() and not resume:
        raise ValueError(
            f"{out_dir} already holds a meta-training checkpoint; pass --resume to continue it "
            "or choose another --out directory."
        )

    meter = _Progress(cfg["iterations"], start, progress, f"meta-train {kernel}")
    t0 = time.perf_counter()
    it = start

    def checkpoint() -> None:
        save_checkpoint(
            out_dir,
            {"params": params, "opt_state": opt_state},
            iteration=it,
            history=history,
            config=cfg,
            wall_time_s=wall_before + time.perf_counter() - t0,
        )

    try:
        while it < cfg["iterations"]:
            task = distribution.sample(cfg["seed"], it)
            key = jax.random.fold_in(jax.random.key(cfg["seed"]), it)
            tic = time.perf_counter()
            new_params, new_opt_state, stats = es_step(
                settings,
                optimizer,
                params,
                opt_state,
                task,
                key,
                num_pairs=int(cfg["num_pairs"]),
                sigma=float(cfg["sigma"]),
            )
            params, opt_state = new_params, new_opt_state
            it += 1
            history.append(
                {"iteration": it, "task": task.name, **stats, "seconds": time.perf_counter() - tic}
            )
            meter.update(it, stats["loss"], stats["sghmc_loss"])
            if it % cfg["checkpoint_every"] == 0:
                checkpoint()
    except KeyboardInterrupt:
        meter.close()
        checkpoint()
        print(
            f"meta-train {kernel}: interrupted; checkpoint at iteration {it} saved in {out_dir} "
            "(continue with --resume).",
            file=sys.stderr,
        )
        raise
    meter.close()
    checkpoint()
    wall = wall_before + time.perf_counter() - t0
    path = save_meta_params(out_dir / f"{kernel}.npz", params)
    plot_history(history, out_dir / "loss.png", title=f"{kernel} meta-training")

    if cfg["eval_repeats"] > 0:
        results = evaluate(
            kernel,
            params,
            distribution.evaluation_tasks(cfg["seed"]),
            settings,
            num_pairs=int(cfg["num_pairs"]),
            repeats=int(cfg["eval_repeats"]),
            seed=cfg["seed"] + 1,
        )
        if cfg["held_out"]:
            results[-1]["held_out"] = True
        (out_dir / "eval.json").write_text(json.dumps(results, indent=1))
        if progress:
            for r in results:
                tag = " (held out)" if r["held_out"] else ""
                print(
                    f"  {r['task']}{tag}: {kernel} {r[kernel]:.4f}  sghmc {r['sghmc']:.4f}  "
                    f"diff {r['difference']:+.4f} ± {r['difference_se']:.4f}",
                    file=sys.stderr,
                )
    return TrainingRun(
        kernel=kernel,
        out_dir=out_dir,
        meta_params_path=path,
        history=history,
        wall_time_s=wall,
        iterations=it,
    )


def _check_resumable(out_dir: Path, cfg: dict[str, Any]) -> None:
    saved = json.loads((out_dir / "history.json").read_text()).get("config", {})
    changed = sorted(
        k for k in set(saved) | set(cfg) if k not in RESUMABLE and saved.get(k) != cfg.get(k)
    )
    if changed:
        raise ValueError(
            f"cannot resume {out_dir}: config keys {changed} differ from the checkpointed run "
            f"(only {sorted(RESUMABLE)} may change)."
        )


def plot_history(history: list[dict[str, Any]], path: Path, *, title: str = "") -> Path:
    """The loss curve: per-iteration meta-loss (Eq. 7) of the ES population and of the zero-head
    sampler (SGHMC) on the same task with the same random numbers, and their difference, with
    running medians (tasks differ in loss level, and a rare diverged chain is an outlier)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    its = np.array([h["iteration"] for h in history])
    loss = np.array([h["loss"] for h in history])
    base = np.array([h["sghmc_loss"] for h in history])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    if len(its):
        w = max(1, min(25, len(its) // 5))

        def running_median(x: np.ndarray) -> np.ndarray:
            return np.array([np.median(x[max(0, i - w + 1) : i + 1]) for i in range(len(x))])

        axes[0].plot(its, loss, ".", alpha=0.35, color="C0")
        axes[0].plot(its, base, ".", alpha=0.35, color="C1")
        axes[0].plot(its, running_median(loss), color="C0", label="learned (ES population mean)")
        axes[0].plot(its, running_median(base), color="C1", label="zero heads = SGHMC")
        d = loss - base
        lo, hi = np.quantile(d, [0.02, 0.98]) if len(d) > 10 else (d.min(), d.max())
        pad = 0.15 * max(hi - lo, 1e-3)
        lo, hi = min(lo - pad, -pad), max(hi + pad, pad)
        inside = (d >= lo) & (d <= hi)
        axes[1].plot(its[inside], d[inside], ".", alpha=0.4, color="C2")
        if not inside.all():
            axes[1].plot(
                its[~inside],
                np.clip(d[~inside], lo, hi),
                "^",
                color="C3",
                label=f"{int((~inside).sum())} outside the axis (clipped)",
            )
        axes[1].plot(its, running_median(d), color="C2", label=f"running median ({w} iterations)")
        axes[1].axhline(0.0, color="k", lw=0.8)
        axes[1].set_ylim(lo, hi)
    axes[0].set(xlabel="outer iteration", ylabel="BMA meta-loss (nats / held-out point)")
    axes[0].legend(fontsize=8)
    axes[1].set(xlabel="outer iteration", ylabel="learned − SGHMC (same task, same noise)")
    axes[1].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

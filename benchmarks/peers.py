"""``bdl.sample`` against what a user would write instead: optax, BlackJAX, per step, one process.

Models (bdl's public API: ``bdl.Model``, ``bdl.Categorical()``, prior ``bdl.Normal(1.0)``,
``bdl.compile``):

* ``digits``: a Flax linen MLP 64→100→10 (ReLU) on scikit-learn's digits (1797 × 64, inputs
  ÷ 16; ``_common.digits_data``), batch size 32: d = 7,510;
* ``wide``: a Flax linen MLP 784→1024→1024→10 (ReLU) on generated data (seed 0: inputs N(0, 1)
  float32 of shape (n, 784), n = ``--wide-n`` = 8,192, labels uniform in 0..9), batch size 128:
  d = 1,863,690;
* ``mlp256``: a Flax linen MLP 784→256→256→10 (ReLU) on the same generated data, batch size
  128: d = 269,322.

Candidates, each called as its user would call it:

  (optax)     a jitted function (the number of steps static) running ``optax.sgd(ℓ,
              momentum=0.9)`` (ℓ = ``--lr``) on the mean minibatch loss Ũ/n in a ``lax.scan``;
              a minibatch of B indices per step from ``jax.random.randint(fold_in(key, t))``;
              the gradient from ``compiled.stochastic_energy_and_grad`` (full-data scale, ÷ n).
  (BlackJAX)  the same kind of jitted scan and minibatches around BlackJAX: ``blackjax.sgld``'s
              ``step`` (h = 1e-5); for SGHMC, BlackJAX's SGHMC integrator
              ``blackjax.sgmcmc.diffusions.sghmc(alpha=1)`` with the momentum in the scan's
              carry (from zero). ``blackjax.sghmc``'s own ``step`` is not used: it redraws the
              momentum at every call and uses one minibatch for all its
              ``num_integration_steps`` steps, another algorithm; its integrator is the one its
              step scans. The update is bdl's SGHMC with γ = 1 (bdl: r ← r − h∇Ũ − hγr +
              √(2hγ)ξ, θ ← θ + hr; BlackJAX moves θ with the old momentum, then updates it: the
              same cost). The log-density gradient is −∇Ũ from ``compiled.stochastic_energy_and_
              grad``, so every candidate evaluates the same gradient and the figures compare the
              samplers, not two ways to write the network; it is the gradient of BlackJAX's own
              estimator log p(θ) + (n/B) Σ_B log p(y|x, θ) on the same posterior.
              ``--blackjax-grad estimator`` builds it with
              ``blackjax.sgmcmc.gradients.grad_estimator(compiled.log_prior, per-example
              compiled.log_likelihood, n)`` instead (BlackJAX ``vmap``s the likelihood over the
              examples).
  (bdl)       ``bdl.sample(compiled, bdl.kernels.get("sgld", step_size=1e-5), num_steps=N,
              burn_in=b, thin=k, num_chains=C, seed=0)`` (and ``"sghmc"``, friction at its
              default γ = 1): the whole call, host side included. On a terminal bdl reports its
              progress on stderr (``--quiet-bdl`` passes ``progress=False``).

With 8 chains the optax and BlackJAX scans run their chains under ``jax.vmap`` (starts from
``compiled.init_positions``); ``bdl.sample`` runs its own. Paths of ``bdl.sample``:

* ``burn-in``: every step but the last is burn-in (``burn_in = N − 1, thin = 1``): one draw kept;
* ``thin 10``, ``thin 100``, ``thin 1000``: ``burn_in = 0``, every 10th / 100th / 1000th state
  kept. bdl stops at the last kept draw, so these paths run N rounded to a multiple of the
  thinning (at least one thinning apart: ``wide`` on a CPU runs 1,000 and 2,000 steps on
  ``thin 1000``).

A per-step figure is (t(N_long) − t(N_short)) / (N_long − N_short): every call's fixed cost
cancels. Each t is the median of one call per round in interleaved rounds
(``_common.time_interleaved``, one call of every candidate and length of a model and chain count
per round, ``--repeats`` rounds, after one warm-up call of each, which compiles), and a ratio
the ratio of two such figures; the range is that of the rounds' own ratios (each a difference
of two single calls, far noisier on a shared CPU). ``cpu`` is the ratio in process CPU time
(all threads), which waiting for a busy core does not inflate; ``whole`` the ratio of the
median long calls themselves, where both run the same number of steps (bdl's fixed costs
counted against it: conservative, and steadier than a difference); ``best`` the per-step ratio
from each candidate's fastest long and short calls (min t(long) − min t(short)), the estimate
to read where other tenants only ever add time to a call (the verdict stays on the medians).
Defaults: N_long / N_short = 10,000 / 2,000 (on a CPU ``wide`` 1,200 / 400, ``mlp256``
2,000 / 400); ``--long`` / ``--short`` set every model's.

It prints the environment, a rough estimate of the run's length, then one row per cell (model ×
chains × kernel × path): µs per step of optax, BlackJAX and ``bdl.sample``, bdl ÷ BlackJAX
[range over the rounds], ``cpu``, ``best``, ``whole``, bdl ÷ optax, the number of XLA programs
the cell's first long and first short ``bdl.sample`` calls compiled, and PASS/MISS against the
target bdl ÷ BlackJAX ≤ 1.05.
Per model, chain count and kernel, for the paths that keep draws: bdl's per-step time on the path ÷
on the burn-in path, in this process (target ≤ 1.03: keeping draws costs what burn-in costs per
step, plus the copy of each kept draw), from the median calls, in process CPU time, from the
fastest calls, and without the checks every run ends with (the run-away, convergence and bias
checks, whose host statistics grow with the draws they read: their seconds, measured around
``bdl.sampling.sample``'s calls of them, are subtracted from each call). Then what keeping a draw
costs, (bdl per step on the thin path − on the burn-in path) × thin, against the time to copy one
draw of all chains' θ (C × d float32) off the device (``jax.device_get`` of a fresh device array,
median of several); the target is "keeping a draw costs no more than copying it". The difference
also holds the checks every run ends with wherever they read more draws on the long path than on
the short: the run-away check computes a full-data energy and gradient (n/B minibatch gradients
each) at up to 16 kept draws per chain (none below 4), so paths that keep fewer than 16 draws on
the short call (``wide`` on a CPU: 12 against 4 on thin 100; thin 1000 everywhere: 10 against 2)
charge those gradients to the kept draws. ``--long`` / ``--short`` with at least 16 draws on both
(e.g. ``--long 3200 --short 1600`` for ``wide`` on thin 100) leave the loop's own cost.

Compilations (``jax.monitoring``, ``_common.CompileCounter``: XLA backend compilations) of one
``bdl.sample`` call in a fresh process (a subprocess, no persistent cache), on digits, 4 chains,
2,000 steps, burn-in 1,000, thin 100: fixed-step SGHMC (h = 1e-5) and adapted SGHMC
(``bdl.kernels.get("sghmc")``: warm-up adapts h, M and γ during burn-in), each followed by a
second identical call; targets ≤ 2 and ≤ 3 programs of the run. The checks that follow every
run compile their own programs once per model and process, printed apart: the one the run-away
and bias checks share (``full_data_at``: U, (θ − c)·∇U and some of ∇U at some draws) and, for a
network, the convergence check's (``function_values``: its predictions on held-out inputs, per
draw).

    python benchmarks/peers.py [--models digits,wide,mlp256] [--paths burn-in,thin10,...]
        [--chains 1,8] [--kernels sgld,sghmc] [--skip wide:8] [--long N] [--short N]
        [--repeats 5] [--lr 0.05] [--blackjax-grad bdl|estimator] [--quiet-bdl]
        [--no-compile-check | --compile-check-only] [--dry-run] [--json PATH]

The ``wide`` model with 8 chains on a 2-core CPU takes hours (``--skip wide:8``); the printed
estimate (the calibrated time of one chain-step × chain-steps, compilation roughly added)
is an upper bound on an accelerator, where chains share the device.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    BACKEND_COMPILE_EVENT,
    CompileCounter,
    digits_data,
    environment,
    load_average,
    time_interleaved,
)

import bdl

try:
    import blackjax
except ImportError:  # an optional benchmark dependency (pip install -e .[bench])
    blackjax = None

H = 1e-5  # every sampler's step size
FRICTION = 1.0  # SGHMC's γ: bdl's default friction, BlackJAX's alpha
TARGET = 1.05  # bdl.sample ÷ BlackJAX per step
COMPILE_TARGETS = {"fixed": 2, "adapted": 3}  # XLA programs of a first bdl.sample call
#: the programs of the checks after a run (a network's predictions per draw for the convergence
#: check; U, (θ − c)·∇U and some of ∇U at some draws for the run-away and bias checks), compiled
#: once per model and counted apart from the run's own
CHECK_PROGRAMS = ("function_values", "full_data_at")
MODELS = ("digits", "wide", "mlp256")
KERNELS = ("sgld", "sghmc")
#: path name -> thinning (1: the burn-in path, every step but the last discarded)
PATHS = {"burn-in": 1, "thin 10": 10, "thin 100": 100, "thin 1000": 1000}
CPU_STEPS = {"digits": (10_000, 2_000), "wide": (1_200, 400), "mlp256": (2_000, 400)}
#: the kept paths' target: bdl per step on a thin path ÷ on the burn-in path, same process
KEPT_TARGET = 1.03
ACCELERATOR_STEPS = (10_000, 2_000)
COPY_REPEATS = 9
#: the fresh-process compile check's run (on digits)
CHECK_RUN = {"num_steps": 2000, "burn_in": 1000, "thin": 100, "num_chains": 4}

PyTree = Any


# ---------------------------------------------------------------------------- models
class MLP(nn.Module):
    """Dense layers of ``hidden`` widths with ReLU, then 10 logits."""

    hidden: tuple[int, ...]

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for width in self.hidden:
            x = nn.relu(nn.Dense(width)(x))
        return nn.Dense(10)(x)


def build_model(name: str, wide_n: int = 8192) -> Any:
    """The compiled ``digits`` or ``wide`` model (module docstring)."""
    if name == "digits":
        data, hidden, batch_size = digits_data(), (100,), 32
    elif name in ("wide", "mlp256"):
        rng = np.random.default_rng(0)
        x = rng.standard_normal((wide_n, 784), dtype=np.float32)
        y = rng.integers(0, 10, size=wide_n).astype(np.int32)
        width = 1024 if name == "wide" else 256
        data, hidden, batch_size = (x, y), (width, width), 128
    else:
        raise ValueError(f"unknown model {name!r}; one of {', '.join(MODELS)}")
    model = bdl.Model(network=MLP(hidden), likelihood=bdl.Categorical(), prior=bdl.Normal(1.0))
    return bdl.compile(model, data, batch_size=batch_size)


# ---------------------------------------------------------------------------- the peers
Chain = Callable[[Any, PyTree, jax.Array, int], PyTree]


def random_batch(compiled: Any, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """B examples drawn uniformly with replacement: the minibatch a user writes in a scan."""
    idx = jax.random.randint(key, (compiled.batch_size,), 0, compiled.n)
    return compiled.x_train[idx], compiled.y_train[idx]


def optax_chain(lr: float) -> Chain:
    """One chain of ``optax.sgd(lr, momentum=0.9)`` on Ũ/n, ``num_steps`` steps in a scan."""
    optimiser = optax.sgd(lr, momentum=0.9)

    def chain(compiled: Any, theta: PyTree, key: jax.Array, num_steps: int) -> PyTree:
        def step(carry: tuple, t: jax.Array) -> tuple:
            theta, state = carry
            batch = random_batch(compiled, jax.random.fold_in(key, t))
            _, grad = compiled.stochastic_energy_and_grad(theta, batch)
            grad = jax.tree.map(lambda g: g / compiled.n, grad)
            updates, state = optimiser.update(grad, state, theta)
            return (optax.apply_updates(theta, updates), state), None

        init = (theta, optimiser.init(theta))
        (theta, _), _ = jax.lax.scan(step, init, jnp.arange(num_steps))
        return theta

    return chain


def log_density_grad(compiled: Any, how: str) -> Callable[[PyTree, tuple], PyTree]:
    """∇ log p̃(θ | minibatch) = −∇Ũ for BlackJAX: from bdl's compiled gradient (``"bdl"``), or
    BlackJAX's ``grad_estimator`` on bdl's log-prior and per-example log-likelihood."""
    if how == "bdl":

        def grad(theta: PyTree, batch: tuple) -> PyTree:
            _, g = compiled.stochastic_energy_and_grad(theta, batch)
            return jax.tree.map(jnp.negative, g)

        return grad

    def log_likelihood(theta: PyTree, example: tuple) -> jax.Array:
        x, y = example
        return compiled.log_likelihood(theta, x[None], y[None])[0]

    return blackjax.sgmcmc.gradients.grad_estimator(compiled.log_prior, log_likelihood, compiled.n)


def blackjax_chain(kernel: str, how: str) -> Chain:
    """One chain of BlackJAX's SGLD step (or SGHMC integrator), ``num_steps`` steps in a scan."""

    def chain(compiled: Any, theta: PyTree, key: jax.Array, num_steps: int) -> PyTree:
        grad = log_density_grad(compiled, how)

        def keys(t: jax.Array) -> tuple[jax.Array, jax.Array]:
            k_batch, k_noise = jax.random.split(jax.random.fold_in(key, t))
            return k_noise, random_batch(compiled, k_batch)

        if kernel == "sgld":
            sgld = blackjax.sgld(grad)

            def sgld_step(theta: PyTree, t: jax.Array) -> tuple:
                k_noise, batch = keys(t)
                return sgld.step(k_noise, theta, batch, H), None

            theta, _ = jax.lax.scan(sgld_step, theta, jnp.arange(num_steps))
            return theta

        integrator = blackjax.sgmcmc.diffusions.sghmc(alpha=FRICTION, beta=0.0)

        def sghmc_step(carry: tuple, t: jax.Array) -> tuple:
            theta, momentum = carry
            k_noise, batch = keys(t)
            return integrator(k_noise, theta, momentum, grad(theta, batch), H), None

        init = (theta, jax.tree.map(jnp.zeros_like, theta))
        (theta, _), _ = jax.lax.scan(sghmc_step, init, jnp.arange(num_steps))
        return theta

    return chain


def jitted(chain: Chain, num_chains: int) -> Callable[..., PyTree]:
    """``jit(run)(compiled, start, key, num_steps=N)``, N static; several chains under vmap."""

    def run(compiled: Any, start: PyTree, key: jax.Array, num_steps: int) -> PyTree:
        if num_chains == 1:
            return chain(compiled, start, key, num_steps)
        keys = jax.random.split(key, num_chains)
        return jax.vmap(lambda theta, k: chain(compiled, theta, k, num_steps))(start, keys)

    return jax.jit(run, static_argnames="num_steps")


class CheckClock:
    """Wall seconds spent in the checks every ``bdl.sample`` call ends with (the run-away check,
    ``flag_runaway``; the convergence and bias checks, ``checked``), summed while installed:
    what a per-step figure without them subtracts."""

    seconds = 0.0

    @classmethod
    def install(cls) -> None:
        module = importlib.import_module("bdl.sampling.sample")
        for name in ("flag_runaway", "checked"):
            original = getattr(module, name)
            if getattr(original, "clocked", False):
                continue

            def clocked(*args: Any, _original: Callable = original, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return _original(*args, **kwargs)
                finally:
                    cls.seconds += time.perf_counter() - start

            clocked.clocked = True  # type: ignore[attr-defined]
            setattr(module, name, clocked)


def bdl_call(
    compiled: Any,
    kernel: Any,
    num_chains: int,
    num_steps: int,
    thin: int,
    quiet: bool,
    checks: list[float] | None = None,
) -> Callable[[], PyTree]:
    """A ``bdl.sample`` call as a user writes it; ``thin == 1``: the burn-in path. With
    ``checks``, each call appends the seconds its checks took (:class:`CheckClock`)."""
    burn_in = num_steps - 1 if thin == 1 else 0
    extra = {"progress": False} if quiet else {}

    def call() -> PyTree:
        before = CheckClock.seconds
        samples = bdl.sample(
            compiled,
            kernel,
            num_steps=num_steps,
            burn_in=burn_in,
            thin=thin,
            num_chains=num_chains,
            seed=0,
            **extra,
        )
        if checks is not None:
            checks.append(CheckClock.seconds - before)
        return samples.positions

    return call


# ---------------------------------------------------------------------------- bookkeeping
class NamedCompileCounter(CompileCounter):
    """:class:`CompileCounter` that also keeps the names of the programs it counts."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def _listen(self, event: str, duration: float, **kwargs: Any) -> None:
        super()._listen(event, duration, **kwargs)
        if event == BACKEND_COMPILE_EVENT:
            self.names.append(str(kwargs.get("fun_name", "?")))


@dataclass
class Cell:
    """One row: a model, chain count, kernel and path, with the per-step seconds of each
    candidate (the difference of the medians of its long and short calls) and of each round."""

    model: str
    d: int
    chains: int
    kernel: str
    path: str
    thin: int
    steps: tuple[int, int]  # bdl's (long, short)
    peer_steps: tuple[int, int]  # optax's and BlackJAX's
    optax: list[float]
    blackjax: list[float]
    bdl: list[float]
    medians: dict[str, float] = field(default_factory=dict)  # wall, per candidate
    cpu_medians: dict[str, float] = field(default_factory=dict)  # process CPU time
    fastest: dict[str, float] = field(default_factory=dict)  # from the fastest calls, wall
    whole: float = math.nan  # median long call of bdl ÷ of BlackJAX, fixed costs included
    compiles: dict[str, int] = field(default_factory=dict)  # first long / short call
    compile_names: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ratios(self) -> list[float]:
        return [a / b for a, b in zip(self.bdl, self.blackjax, strict=True)]

    @property
    def ratio(self) -> float:
        """bdl ÷ BlackJAX per step, from the medians of the calls (the rounds' own ratios, a
        difference of two calls each, are far noisier)."""
        return self.medians["bdl"] / self.medians["blackjax"]

    @property
    def cpu_ratio(self) -> float:
        return self.cpu_medians["bdl"] / self.cpu_medians["blackjax"]

    @property
    def best_ratio(self) -> float:
        return self.fastest["bdl"] / self.fastest["blackjax"]

    @property
    def verdict(self) -> str:
        return "PASS" if self.ratio <= TARGET else "MISS"

    def record(self) -> dict[str, Any]:
        out = asdict(self)
        out["median_us"] = {k: v * 1e6 for k, v in self.medians.items()}
        out["cpu_median_us"] = {k: v * 1e6 for k, v in self.cpu_medians.items()}
        out["fastest_us"] = {k: v * 1e6 for k, v in self.fastest.items()}
        out.update(ratio=self.ratio, cpu_ratio=self.cpu_ratio, ratios=self.ratios)
        out.update(best_ratio=self.best_ratio)
        out.update(verdict=self.verdict, ratio_optax=self.medians["bdl"] / self.medians["optax"])
        return out


def path_steps(thin: int, long: int, short: int) -> tuple[int, int]:
    """The (long, short) steps of a path: multiples of ``thin``, at least one ``thin`` apart."""
    if thin == 1:
        return long, short
    s = max(thin, math.ceil(short / thin) * thin)
    return max(s + thin, long // thin * thin), s


def per_step(wall: dict[str, list[float]], name: str, steps: tuple[int, int]) -> list[float]:
    """Each round's (t(long) − t(short)) / (long − short) of candidate ``name``."""
    long, short = steps
    pairs = zip(wall[f"{name} L"], wall[f"{name} S"], strict=True)
    return [(a - b) / (long - short) for a, b in pairs]


def step_time(
    times: dict[str, list[float]],
    name: str,
    steps: tuple[int, int],
    of: Callable[[list[float]], float] = statistics.median,
) -> float:
    """(of t(long) − of t(short)) / (long − short) of candidate ``name``: from the median calls,
    or with ``of=min`` from the fastest."""
    long, short = steps
    t_long, t_short = (of(times[f"{name} {tag}"]) for tag in "LS")
    return (t_long - t_short) / (long - short)


def copy_seconds(num_chains: int, dim: int) -> float:
    """Median seconds of ``jax.device_get`` of a fresh (C, d) float32 device array: copying one
    draw of all chains' θ off the device (a fresh array each time: JAX keeps an array's host
    copy once made)."""
    base = jax.block_until_ready(jnp.zeros((num_chains, dim), jnp.float32))
    times = []
    for i in range(COPY_REPEATS):
        fresh = jax.block_until_ready(base + i)
        start = time.perf_counter()
        jax.device_get(fresh)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def names(text: str, valid: Sequence[str], what: str) -> list[str]:
    """Comma-separated names, each checked against ``valid`` (spaces ignored)."""
    chosen = [s.strip() for s in text.split(",") if s.strip()]
    compact = {v.replace(" ", ""): v for v in valid}
    out = []
    for s in chosen:
        key = s.replace(" ", "")
        if key not in compact:
            raise SystemExit(f"unknown {what} {s!r}; valid: {', '.join(valid)}")
        out.append(compact[key])
    return out


# ---------------------------------------------------------------------------- one group
def time_group(
    model: str, compiled: Any, num_chains: int, steps: tuple[int, int], args: argparse.Namespace
) -> tuple[list[Cell], list[dict[str, Any]]]:
    """Every kernel and path of one model and chain count, timed in the same interleaved
    rounds; returns the cells and the keep-a-draw comparisons."""
    counter = NamedCompileCounter.install()
    CheckClock.install()
    long, short = steps
    kernels = {k: bdl.kernels.get(k, step_size=H) for k in args.kernels}
    fns: dict[str, Callable[[], Any]] = {}
    compiles: dict[str, tuple[int, list[str]]] = {}
    checks: dict[str, list[float]] = {}
    # bdl.sample first: its first calls' compilations are not helped by the peers'
    for k, kernel in kernels.items():
        for path in args.paths:
            thin = PATHS[path]
            for tag, n in zip("LS", path_steps(thin, long, short), strict=True):
                name = f"bdl {k} {path} {tag}"
                checks[name] = []
                fns[name] = bdl_call(
                    compiled, kernel, num_chains, n, thin, args.quiet_bdl, checks[name]
                )
                before, names_before = counter.count, len(counter.names)
                jax.block_until_ready(fns[name]())
                compiles[name] = (counter.count - before, counter.names[names_before:])
    start = compiled.init_positions(jax.random.key(0), num_chains)
    if num_chains == 1:
        start = jax.tree.map(lambda a: a[0], start)
    key = jax.random.key(1)
    peers: dict[str, Chain] = {"optax": optax_chain(args.lr)}
    for k in args.kernels:
        peers[f"blackjax {k}"] = blackjax_chain(k, args.blackjax_grad)
    for label, chain in peers.items():
        run = jitted(chain, num_chains)
        for tag, n in zip("LS", steps, strict=True):
            fns[f"{label} {tag}"] = _bind(run, compiled, start, key, n)
            jax.block_until_ready(fns[f"{label} {tag}"]())  # compiles
    wall, cpu = time_interleaved(fns, args.repeats)
    # the calls without the checks they end with (the first call of each, which compiled, apart)
    unchecked = {
        name: [w - c for w, c in zip(wall[name], checks[name][1:], strict=True)] for name in checks
    }
    cells, keeps = [], []
    copy = copy_seconds(num_chains, compiled.dim) if "burn-in" in args.paths else math.nan
    optax_ps = per_step(wall, "optax", steps)
    for k in args.kernels:
        bjx = per_step(wall, f"blackjax {k}", steps)
        by_path = {}
        for path in args.paths:
            thin = PATHS[path]
            bsteps = path_steps(thin, long, short)
            name = f"bdl {k} {path}"
            medians, cpu_medians, fastest = (
                {
                    "optax": step_time(times, "optax", steps, of),
                    "blackjax": step_time(times, f"blackjax {k}", steps, of),
                    "bdl": step_time(times, name, bsteps, of),
                }
                for times, of in ((wall, statistics.median), (cpu, statistics.median), (wall, min))
            )
            whole = math.nan
            if bsteps[0] == steps[0]:  # the same long call: bdl's fixed costs counted against it
                long_bdl = statistics.median(wall[f"{name} L"])
                whole = long_bdl / statistics.median(wall[f"blackjax {k} L"])
            cell = Cell(
                model, compiled.dim, num_chains, k, path, thin, bsteps, steps,
                optax_ps, bjx, per_step(wall, name, bsteps), medians, cpu_medians, fastest, whole,
                {t: compiles[f"{name} {t}"][0] for t in "LS"},
                {t: compiles[f"{name} {t}"][1] for t in "LS"},
            )  # fmt: skip
            cells.append(cell)
            by_path[path] = cell
            print_row(cell)
        if "burn-in" not in by_path:
            continue
        burn = by_path["burn-in"]
        loop_burn = step_time(unchecked, f"bdl {k} burn-in", burn.steps)
        for path, cell in by_path.items():
            if cell.thin == 1:
                continue
            pairs = zip(cell.bdl, burn.bdl, strict=True)
            costs = [(a - b) * cell.thin for a, b in pairs]
            keep = (cell.medians["bdl"] - burn.medians["bdl"]) * cell.thin
            name = f"bdl {k} {path}"
            loop = step_time(unchecked, name, cell.steps)
            kept = cell.medians["bdl"] / burn.medians["bdl"]
            keeps.append(
                {
                    "model": model, "chains": num_chains, "kernel": k, "path": path,
                    "thin": cell.thin, "keep_seconds": keep,
                    "keep_rounds": costs, "copy_seconds": copy,
                    "verdict": "PASS" if keep <= copy else "MISS",
                    "kept_ratio": kept,
                    "kept_ratio_cpu": cell.cpu_medians["bdl"] / burn.cpu_medians["bdl"],
                    "kept_ratio_best": cell.fastest["bdl"] / burn.fastest["bdl"],
                    "kept_ratio_unchecked": loop / loop_burn,
                    "checks_seconds": {
                        t: statistics.median(checks[f"{name} {t}"][1:]) for t in "LS"
                    },
                    "kept_verdict": "PASS" if kept <= KEPT_TARGET else "MISS",
                }
            )  # fmt: skip
    return cells, keeps


def _bind(run: Callable[..., PyTree], compiled: Any, start: PyTree, key: jax.Array, n: int) -> Any:
    return lambda: run(compiled, start, key, num_steps=n)


HEADER = (
    f"{'model':<7}{'C':>2} {'kernel':<6} {'path':<10}{'bdl L/S':>12}{'peers L/S':>12}"
    f"{'optax µs':>10}{'bjx µs':>10}{'bdl µs':>10}{'bdl/bjx':>9}{'range':>15}{'cpu':>8}{'best':>7}"
    f"{'whole':>8}"
    f"{'bdl/optax':>10}{'XLA L/S':>8}  verdict"
)


def print_row(cell: Cell) -> None:
    med = {k: v * 1e6 for k, v in cell.medians.items()}
    ratios = cell.ratios
    compiles = f"{cell.compiles['L']}/{cell.compiles['S']}"
    print(
        f"{cell.model:<7}{cell.chains:>2} {cell.kernel:<6} {cell.path:<10}"
        f"{'/'.join(map(str, cell.steps)):>12}{'/'.join(map(str, cell.peer_steps)):>12}"
        f"{med['optax']:>10.1f}{med['blackjax']:>10.1f}{med['bdl']:>10.1f}{cell.ratio:>9.3f}"
        f"{f'[{min(ratios):.3f}, {max(ratios):.3f}]':>15}{cell.cpu_ratio:>8.3f}"
        f"{cell.best_ratio:>7.3f}{cell.whole:>8.3f}"
        f"{med['bdl'] / med['optax']:>10.3f}{compiles:>8}  {cell.verdict} (≤ {TARGET})",
        flush=True,
    )


def print_keeps(keeps: list[dict[str, Any]]) -> None:
    if not keeps:
        return
    print(
        "# kept ÷ burn-in: bdl per step on the thin path ÷ on the burn-in path, this process "
        "(median calls; cpu: process CPU time; best: the fastest calls; without checks: the "
        "checks after each run subtracted, their median seconds on the long/short call)"
    )
    for k in keeps:
        check = k["checks_seconds"]
        print(
            f"kept   {k['model']:<7}{k['chains']:>2} {k['kernel']:<6} {k['path']:<10} "
            f"{k['kept_ratio']:.3f} (cpu {k['kept_ratio_cpu']:.3f}, best "
            f"{k['kept_ratio_best']:.3f}); without checks {k['kept_ratio_unchecked']:.3f} "
            f"(checks {check['L'] * 1e3:.0f}/{check['S'] * 1e3:.0f} ms)  "
            f"{k['kept_verdict']} (≤ {KEPT_TARGET})",
            flush=True,
        )
    print("# keeping a draw: (bdl µs/step on the thin path − on burn-in) × thin, against "
          "jax.device_get of one draw of all chains' θ (C × d float32)")  # fmt: skip
    for k in keeps:
        rounds = ", ".join(f"{c * 1e3:.3f}" for c in k["keep_rounds"])
        print(
            f"keep   {k['model']:<7}{k['chains']:>2} {k['kernel']:<6} {k['path']:<10} "
            f"keep {k['keep_seconds'] * 1e3:8.3f} ms [{rounds}]  copy "
            f"{k['copy_seconds'] * 1e3:8.3f} ms  {k['verdict']} (keep ≤ copy)",
            flush=True,
        )


# ---------------------------------------------------------------------------- estimate
def calibrate(compiled: Any) -> tuple[float, float]:
    """(seconds per chain-step, seconds to compile a scan): BlackJAX's SGLD scan of one chain,
    a call of 8 steps against one of about 0.3 s, each after the call that compiles it."""
    start = jax.tree.map(lambda a: a[0], compiled.init_positions(jax.random.key(0), 1))
    chain = blackjax_chain("sgld", "bdl") if blackjax is not None else optax_chain(0.05)
    run = jitted(chain, 1)
    key = jax.random.key(0)

    def timed(n: int) -> float:
        t0 = time.perf_counter()
        jax.block_until_ready(run(compiled, start, key, num_steps=n))
        return time.perf_counter() - t0

    first = timed(8)
    short = timed(8)
    more = int(min(max(0.3 / max(short / 8, 1e-7), 32), 4000))
    timed(8 + more)  # compiles
    per_step = max((timed(8 + more) - short) / more, 1e-7)
    return per_step, max(first - short, 0.0)


def estimate(
    plan: list[tuple[str, int]],
    steps: dict[str, tuple[int, int]],
    calibration: dict[str, tuple[float, float]],
    args: argparse.Namespace,
) -> float:
    """Rough seconds of the timed part: chain-steps × the calibrated time of a chain-step, and
    per candidate and length a compilation of bdl's (×3 for bdl's calls)."""
    total = 0.0
    for model, chains in plan:
        long, short = steps[model]
        per_step, compile_s = calibration[model]
        peer = (long + short) * (1 + len(args.kernels))
        own = sum(sum(path_steps(PATHS[p], long, short)) for p in args.paths) * len(args.kernels)
        total += per_step * chains * (peer + own) * (args.repeats + 1)
        total += compile_s * 2 * (1 + len(args.kernels) + 3 * len(args.kernels) * len(args.paths))
    return total


# ---------------------------------------------------------------------------- compile check
def compile_count_child(which: str) -> None:
    """In a fresh process: the XLA programs of one ``bdl.sample`` call on digits (and of a
    second identical call), printed as one JSON line."""
    jax.config.update("jax_enable_compilation_cache", False)  # no persistent cache
    counter = NamedCompileCounter.install()
    compiled = build_model("digits")
    out: dict[str, Any] = {"which": which, "run": CHECK_RUN}
    for call in ("first", "second"):
        kernel = (
            bdl.kernels.get("sghmc")
            if which == "adapted"
            else bdl.kernels.get("sghmc", step_size=H)
        )
        count, seconds = counter.snapshot()
        known = len(counter.names)
        t0 = time.perf_counter()
        samples = bdl.sample(compiled, kernel, **CHECK_RUN)
        jax.block_until_ready(samples.positions)
        out[call] = {
            "programs": counter.count - count,
            "compile_seconds": counter.seconds - seconds,
            "call_seconds": time.perf_counter() - t0,
            "names": counter.names[known:],
        }
    print(json.dumps(out))


def compile_check() -> dict[str, Any]:
    """Runs :func:`compile_count_child` for a fixed-step and an adapted SGHMC in subprocesses."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    results: dict[str, Any] = {}
    for which in ("fixed", "adapted"):
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--compile-count-only", which],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if proc.returncode != 0:
            print(f"# compile check {which}: the subprocess failed:\n{proc.stderr[-3000:]}")
            results[which] = {"error": proc.stderr[-3000:]}
            continue
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        results[which] = result
        first, second = result["first"], result["second"]
        target = COMPILE_TARGETS[which]
        check = sum(any(p in name for p in CHECK_PROGRAMS) for name in first["names"])
        run = first["programs"] - check
        kernel = 'get("sghmc")' if which == "adapted" else f'get("sghmc", step_size={H})'
        print(
            f"compile {which:<8} bdl.kernels.{kernel}, fresh process: first call "
            f"{run} XLA programs of the run + {check} of the checks after it "
            f"({first['compile_seconds']:.2f} s compiling, {first['call_seconds']:.2f} s call), "
            f"second call {second['programs']}  {'PASS' if run <= target else 'MISS'} (≤ {target})",
            flush=True,
        )
        print(f"         programs: {', '.join(first['names'])}", flush=True)
    return results


# ---------------------------------------------------------------------------- main
def arguments(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="digits,wide", help="comma-separated: digits, wide, mlp256")
    p.add_argument("--paths", default=",".join(PATHS), help="burn-in, thin10, thin100, thin1000")
    p.add_argument("--chains", default="1,8", help="comma-separated chain counts")
    p.add_argument("--kernels", default=",".join(KERNELS), help="sgld, sghmc")
    p.add_argument(
        "--skip", default="", help="model:chains pairs to leave out, e.g. wide:8 (slow on a CPU)"
    )
    p.add_argument("--long", type=int, help="N_long for every model (default: see docstring)")
    p.add_argument("--short", type=int, help="N_short for every model")
    p.add_argument("--repeats", type=int, default=5, help="interleaved rounds")
    p.add_argument("--lr", type=float, default=0.05, help="optax.sgd's learning rate")
    p.add_argument("--wide-n", type=int, default=8192, help="examples of the wide model's data")
    p.add_argument(
        "--blackjax-grad",
        choices=("bdl", "estimator"),
        default="bdl",
        help="BlackJAX's gradient: bdl's compiled −∇Ũ, or BlackJAX's grad_estimator",
    )
    p.add_argument("--quiet-bdl", action="store_true", help="bdl.sample(..., progress=False)")
    check = p.add_mutually_exclusive_group()
    check.add_argument("--no-compile-check", action="store_true", help="skip the fresh processes")
    check.add_argument(
        "--compile-check-only", action="store_true", help="only the fresh-process compile counts"
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan and estimate, stop")
    p.add_argument("--json", type=Path, help="write every figure to this file")
    p.add_argument(
        "--compile-count-only",
        choices=("fixed", "adapted"),
        help="(internal) count one call's compilations in this process and print JSON",
    )
    args = p.parse_args(argv)
    args.models = names(args.models, MODELS, "model")
    args.kernels = names(args.kernels, KERNELS, "kernel")
    args.paths = names(args.paths, list(PATHS), "path")
    args.chains = [int(c) for c in args.chains.split(",") if c.strip()]
    args.skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if (args.long is None) != (args.short is None):
        p.error("give --long and --short together")
    if args.long is not None and not args.long > args.short > 0:
        p.error("need --long > --short > 0")
    return args


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    if args.compile_count_only:
        compile_count_child(args.compile_count_only)
        return
    print(f"# peers: {environment()}", flush=True)
    load_before = load_average()
    payload: dict[str, Any] = {
        "environment": environment(),
        "load_before": load_before,
        "settings": {k: (sorted(v) if isinstance(v, set) else v) for k, v in vars(args).items()},
        "step_size": H,
        "friction": FRICTION,
        "target": TARGET,
    }
    cells: list[Cell] = []
    keeps: list[dict[str, Any]] = []
    if not args.compile_check_only:
        if blackjax is None:
            raise SystemExit("blackjax is not installed: pip install -e .[bench]")
        accelerator = jax.default_backend() != "cpu"
        steps = {
            m: (args.long, args.short)
            if args.long is not None
            else (ACCELERATOR_STEPS if accelerator else CPU_STEPS[m])
            for m in args.models
        }
        plan = [(m, c) for m in args.models for c in args.chains if f"{m}:{c}" not in args.skip]
        compiled = {m: build_model(m, args.wide_n) for m in dict.fromkeys(m for m, _ in plan)}
        calibration = {m: calibrate(compiled[m]) for m in compiled}
        print(
            f"# h = {H}, SGHMC γ = {FRICTION}, optax.sgd(lr={args.lr}, momentum=0.9); "
            f"BlackJAX gradient: {args.blackjax_grad}; {args.repeats} interleaved rounds"
        )
        for m in compiled:
            per, comp = calibration[m]
            print(
                f"# {m}: d = {compiled[m].dim:,}, n = {compiled[m].n:,}, B = "
                f"{compiled[m].batch_size}; steps long/short {steps[m][0]}/{steps[m][1]}; "
                f"calibration: {per * 1e6:.1f} µs per chain-step, {comp:.1f} s to compile"
            )
        seconds = estimate(plan, steps, calibration, args)
        est = f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"
        print(
            f"# plan: {', '.join(f'{m}×{c}' for m, c in plan)}; kernels {', '.join(args.kernels)}"
            f"; paths {', '.join(args.paths)}; estimated {est}"
            + ("" if accelerator else " (chains cost linearly on a CPU)")
            + ("" if args.no_compile_check else ", plus about 1 min for the compile check"),
            flush=True,
        )
        payload.update(plan=plan, steps=steps, calibration=calibration, estimate_s=seconds)
        if args.dry_run:
            return
        print(HEADER, flush=True)
        for m, c in plan:
            group_cells, group_keeps = time_group(m, compiled[m], c, steps[m], args)
            cells += group_cells
            keeps += group_keeps
            print(f"# {m}×{c} done, {load_average()}", flush=True)
        print_keeps(keeps)
        if cells:
            worst = max(cells, key=lambda c: c.ratio)
            firsts = max(  # the run's own programs: the checks after it compile their own
                sum(not any(p in n for p in CHECK_PROGRAMS) for n in c.compile_names["L"])
                for c in cells
            )
            print(
                f"# worst bdl/BlackJAX {worst.ratio:.3f} ({worst.model}×{worst.chains} "
                f"{worst.kernel} {worst.path}); {sum(c.verdict == 'PASS' for c in cells)}/"
                f"{len(cells)} PASS (≤ {TARGET}); most XLA programs of the run in a cell's first "
                f"call in this process: {firsts}, the checks' apart (fixed steps, target ≤ "
                f"{COMPILE_TARGETS['fixed']})",
                flush=True,
            )
    payload["cells"] = [c.record() for c in cells]
    payload["keeps"] = keeps
    if not args.no_compile_check:
        payload["compile_check"] = compile_check()
    payload["load_after"] = load_average()
    print(f"# load before: {load_before}; after: {payload['load_after']}", flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(payload, indent=1, default=str))
        print(f"# wrote {args.json}")


if __name__ == "__main__":
    main()

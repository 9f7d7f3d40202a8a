"""Held-out evaluation of meta-trained NNSGHMC against SGHMC: the Gaussian toy of Gong, Li &
Hernández-Lobato (2019), Sec. 5.1 and App. F.1.

Target: a 20-D Gaussian with a dense covariance (:func:`bdl.data.synthetic_energies.
correlated_gaussian`, eigenvalues log-uniform in [0.1, 1], seed 0), never seen in meta-training
(which uses 10-D diagonal Gaussians), with energy U(θ) = ½(θ − μ)ᵀΣ⁻¹(θ − μ) and unit Gaussian
noise injected into every gradient (``bdl.Potential(grad_noise=1)``). 50 chains start at
θ ~ μ + U(−3, 3)²⁰ (the paper's U([0, 6]ᵈ) around a mean of 3) with r = 0 and run 12,000 steps of

* SGHMC, h = 0.025, friction C = 1 (App. F.1);
* NNSGHMC with the trained meta-parameters (default: the ones shipped in the package), the same
  h = 0.025, the hyper-parameters it was trained with (α, β₀, c, …) and the input statistics
  stored with the meta-parameters (App. E); its untrained start is SGHMC with friction ≈ 1, so
  the friction is matched.

Reported, per sampler:

* **KL(t)**: the moment-matched KL divergence KL(N(m̂, Σ̂) ‖ N(μ, Σ)) of the Gaussian fitted to all
  draws of all chains up to step t (no burn-in discarded, as the paper's Fig. 2 which plots the
  bias from step 0), at t = 100, …, 12,000; and the same over steps 1,200–12,000 (10 % burn-in
  discarded). Closed form: ½[tr(Σ⁻¹Σ̂) + (μ − m̂)ᵀΣ⁻¹(μ − m̂) − d + log det Σ − log det Σ̂].
* **ESS** of each coordinate after the burn-in (multi-chain Geyer ESS,
  :func:`bdl.diagnostics.effective_sample_size`): minimum, median, and per 1,000 steps per chain;
* the wall time of each run (compilation included).

A finite-sample note: a Gaussian fitted to N effectively independent draws in d = 20 has an
expected KL of about d(d + 3)/(4N) ≈ 115/N from estimation noise alone, so at these sample sizes
the KL measures mixing (effective sample size) as much as the sampler's asymptotic bias.

Run: ``python benchmarks/gong_toy.py [--meta-params PATH] [--seeds 1] [--steps 12000]
[--out DIR] [--plot PNG]``; prints a table and writes ``gong_toy.json`` and ``gong_toy.png``
(KL against step) to ``--out`` (default ``bdl-output/benchmarks/gong_toy``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment

import bdl
from bdl.data.synthetic_energies import correlated_gaussian
from bdl.diagnostics import effective_sample_size
from bdl.meta.config import load_config, parse_config
from bdl.meta.nnsghmc_config import NNSGHMCConfig, kernel_hyper

DIM = 20
CHAINS = 50
STEPS = 12_000
STEP_SIZE = 0.025
FRICTION = 1.0
INIT_RANGE = 3.0
CHECKPOINTS = (100, 200, 500, 1000, 2000, 4000, 8000, 12_000)


def make_target(seed: int = 0) -> tuple[Any, np.ndarray, np.ndarray]:
    """The compiled 20-D potential with unit gradient noise, and its (μ, Σ) in float64."""
    mean, cov = correlated_gaussian(DIM, seed=seed)
    mean64, cov64 = np.asarray(mean, np.float64), np.asarray(cov, np.float64)
    precision = jnp.asarray(np.linalg.inv(cov64), jnp.float32)

    def log_density(theta: jax.Array) -> jax.Array:
        diff = theta - mean
        return -0.5 * diff @ precision @ diff

    def init(key: jax.Array) -> jax.Array:
        return mean + INIT_RANGE * jax.random.uniform(key, (DIM,), minval=-1.0, maxval=1.0)

    potential = bdl.Potential(
        log_density=log_density, init=init, grad_noise=1.0, name=f"gong-toy-{DIM}d"
    )
    return bdl.compile(potential), mean64, cov64


def gaussian_kl(m: np.ndarray, s: np.ndarray, mean: np.ndarray, cov: np.ndarray) -> float:
    """KL(N(m, s) ‖ N(mean, cov)) in float64."""
    d = mean.shape[0]
    prec = np.linalg.inv(cov)
    diff = mean - m
    _, logdet_cov = np.linalg.slogdet(cov)
    sign, logdet_s = np.linalg.slogdet(s)
    if sign <= 0:
        return float("inf")
    return float(0.5 * (np.trace(prec @ s) + diff @ prec @ diff - d + logdet_cov - logdet_s))


def kl_curve(
    draws: np.ndarray, mean: np.ndarray, cov: np.ndarray, checkpoints: tuple[int, ...]
) -> dict[int, float]:
    """Moment-matched KL of all chains' draws [0, t) for each t (draws: (chains, steps, d))."""
    x = draws.astype(np.float64)
    s1 = np.cumsum(x.sum(axis=0), axis=0)  # (steps, d)
    s2 = np.cumsum(np.einsum("cti,ctj->tij", x, x), axis=0)  # (steps, d, d)
    out = {}
    for t in checkpoints:
        if t > x.shape[1]:
            continue
        n = x.shape[0] * t
        m = s1[t - 1] / n
        s = (s2[t - 1] - n * np.outer(m, m)) / (n - 1)
        out[t] = gaussian_kl(m, s, mean, cov)
    return out


def fit_kl(draws: np.ndarray, mean: np.ndarray, cov: np.ndarray) -> float:
    x = draws.reshape(-1, draws.shape[-1]).astype(np.float64)
    return gaussian_kl(x.mean(0), np.cov(x, rowvar=False), mean, cov)


def run_one(
    name: str, kernel: Any, target: Any, mean: np.ndarray, cov: np.ndarray, seed: int, steps: int
) -> dict[str, Any]:
    t0 = time.perf_counter()
    samples = bdl.sample(target, kernel, num_steps=steps, num_chains=CHAINS, seed=seed)
    wall = time.perf_counter() - t0
    draws = np.asarray(samples.positions)  # (chains, steps, d)
    burn = steps // 10
    kept = draws[:, burn:]
    finite = bool(np.all(np.isfinite(draws)))
    ess = np.asarray(effective_sample_size(kept)) if finite else np.full(DIM, np.nan)
    checkpoints = tuple(t for t in CHECKPOINTS if t <= steps) or (steps,)
    return {
        "sampler": name,
        "seed": seed,
        "finite": finite,
        "kl_curve": kl_curve(draws, mean, cov, checkpoints) if finite else {},
        "kl_after_burn_in": fit_kl(kept, mean, cov) if finite else float("inf"),
        "ess_min": float(np.min(ess)),
        "ess_median": float(np.median(ess)),
        "ess_median_per_1000_steps_per_chain": float(
            np.median(ess) / CHAINS / (kept.shape[1] / 1000)
        ),
        "wall_s": wall,
    }


def nnsghmc_kernel(meta_params: str | None, q_bound: float | None) -> tuple[Any, dict]:
    """NNSGHMC with the shipped config's training hyper-parameters at h = 0.025 (matched)."""
    cfg = parse_config(NNSGHMCConfig, load_config(None, "nnsghmc"), "nnsghmc config")
    hyper = kernel_hyper(cfg)
    hyper["step_size"] = STEP_SIZE
    if q_bound is not None:
        hyper["q_bound"] = q_bound
    kernel = bdl.kernels.get("nnsghmc", meta_params=meta_params, **hyper)
    return kernel, hyper


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--meta-params", default=None, help="NNSGHMC .npz (default: shipped)")
    p.add_argument("--q-bound", type=float, default=None, help="bound on net_Q (default: none)")
    p.add_argument("--seeds", type=int, default=1, help="independent repetitions")
    p.add_argument("--steps", type=int, default=STEPS)
    p.add_argument("--task-seed", type=int, default=0, help="seed of the 20-D target")
    p.add_argument("--out", default="bdl-output/benchmarks/gong_toy")
    p.add_argument("--plot", default=None, help="also save the KL plot here")
    args = p.parse_args(argv)

    print(environment())
    target, mean, cov = make_target(args.task_seed)
    nn_kernel, hyper = nnsghmc_kernel(args.meta_params, args.q_bound)
    sghmc = bdl.kernels.get("sghmc", step_size=STEP_SIZE, friction=FRICTION)
    source = args.meta_params or "shipped (bdl/kernels/meta_params/nnsghmc.npz)"
    print(
        f"target: {DIM}-D correlated Gaussian (task seed {args.task_seed}), grad noise N(0, I);"
        f" {CHAINS} chains x {args.steps} steps, h = {STEP_SIZE}"
    )
    print(f"SGHMC: friction {FRICTION}.  NNSGHMC: meta-parameters {source}; hyper {hyper}")

    results = []
    for seed in range(args.seeds):
        for name, kernel in (("SGHMC", sghmc), ("NNSGHMC", nn_kernel)):
            res = run_one(name, kernel, target, mean, cov, seed, args.steps)
            results.append(res)
            print(f"  seed {seed} {name:8s} done in {res['wall_s']:.1f} s", flush=True)

    table = summarise(results)
    print()
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gong_toy.json").write_text(
        json.dumps({"hyper": hyper, "meta_params": source, "results": results}, indent=1)
    )
    plot(results, out / "gong_toy.png")
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot(results, Path(args.plot))
    print(f"\nwrote {out / 'gong_toy.json'} and {out / 'gong_toy.png'}")
    return 0


def _stat(values: list[float]) -> str:
    v = np.asarray(values, float)
    if len(v) == 1:
        return f"{v[0]:.4g}"
    return f"{v.mean():.4g} ± {v.std(ddof=1):.2g}"


def summarise(results: list[dict[str, Any]]) -> str:
    names = list(dict.fromkeys(r["sampler"] for r in results))  # in order of first appearance
    by = {n: [r for r in results if r["sampler"] == n] for n in names}
    checkpoints = sorted({int(t) for r in results for t in r["kl_curve"]})
    rows = [("step t", *names)]
    for t in checkpoints:
        rows.append(
            (
                f"KL(q̂_[0,t) ‖ π), t = {t}",
                *(_stat([r["kl_curve"][t] for r in by[n]]) for n in names),
            )
        )
    rows.append(
        ("KL after 10 % burn-in", *(_stat([r["kl_after_burn_in"] for r in by[n]]) for n in names))
    )
    rows.append(("ESS min over coords", *(_stat([r["ess_min"] for r in by[n]]) for n in names)))
    rows.append(
        ("ESS median over coords", *(_stat([r["ess_median"] for r in by[n]]) for n in names))
    )
    rows.append(
        (
            "ESS median /chain/1000 steps",
            *(_stat([r["ess_median_per_1000_steps_per_chain"] for r in by[n]]) for n in names),
        )
    )
    rows.append(("wall time (s)", *(_stat([r["wall_s"] for r in by[n]]) for n in names)))
    w = [max(len(str(row[i])) for row in rows) for i in range(len(names) + 1)]
    lines = [" | ".join(str(c).ljust(w[i]) for i, c in enumerate(row)) for row in rows]
    lines.insert(1, "-+-".join("-" * x for x in w))
    return "\n".join(lines)


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    names = list(dict.fromkeys(r["sampler"] for r in results))
    colors = {"SGHMC": "C0", "NNSGHMC": "C3"}
    others = iter(f"C{i}" for i in (1, 2, 4, 5, 6, 7, 8, 9))
    colors.update({n: next(others) for n in names if n not in colors})
    for r in results:
        if not r["kl_curve"]:
            continue
        t = sorted(int(k) for k in r["kl_curve"])
        ax.plot(
            t,
            [r["kl_curve"][k] for k in t],
            "o-",
            color=colors[r["sampler"]],
            alpha=0.8,
            label=r["sampler"] if r["seed"] == 0 else None,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("step t")
    ax.set_ylabel("KL(Gaussian fit of draws [0, t) ‖ π)")
    ax.set_title(f"{DIM}-D correlated Gaussian, noisy gradients, {CHAINS} chains")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())

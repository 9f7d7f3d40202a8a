"""Held-out evaluation of the meta-learned kernels: BMA accuracy and NLL against the number of
samples (the analogue of Kim et al. 2024, Fig. 1), predictive diversity and ESS per second.

Task: the family kept out of every meta-training run, ``breast-cancer-mlp-24``
(:data:`bdl.meta.tasks.HELD_OUT`): scikit-learn's breast cancer (455 training / 114 held-out
points, a fresh stratified split per data seed), an MLP 30-24-2 (ReLU) that no training family
uses, N(0, 1) prior, T = 1, batch 32. Its SG-MCMC step comes from the family's deep-learning
parameterisation (ℓ = 0.05, β = 0.9): h = √(ℓ/n), C = (1 − β)√(n/ℓ) (docs/design.md,
*The deep-learning parameterisation*).

Samplers, each with 4 chains × ``--steps`` steps (2,000 of burn-in, then one draw every 100):

* ``sghmc`` (h, C);
* ``cyclical``: cyclical SGHMC (Zhang et al. 2020), peak step 2h (mean h over a cycle), friction
  C, cycles of 200 steps with the first half exploring at T = 0, a draw every 50 steps of the
  sampling half (so as many draws as the others);
* ``l2e`` and ``kinetic-l2e`` with the shipped meta-parameters and (h, C), as in meta-training;
  ``l2e-paper``: L2E's paper form (``form="paper"``, its shipped ``l2e-paper.npz``);
  ``l2e-v1``: the residual form with the parameters trained on the first eight families
  (``experiments/meta_params/l2e-families-v1.npz``, the default before the family was widened);
* ``nnsghmc`` with the shipped meta-parameters, step h and its training hyper-parameters
  (α = 1, β₀ = 1, c = 0.01, q_bound = 4); and ``nnsghmc-h/2``, the same at step h/2 with twice
  the steps (and thinning), because at h it can diverge on this task;
* ``ensemble``: a deep ensemble (Lakshminarayanan et al. 2017) of independently initialised
  networks, each trained by Adam (lr 1e-3, 2,000 steps of batch 32) on the same minibatch MAP
  objective Ũ/n; "number of samples" is the number of members.

Reported per sampler, mean ± sd over data seeds × chains (each chain a separate ensemble of
members): held-out BMA accuracy and NLL after k = 1, 2, 5, 10, 20, 40 samples (curves for every
k), ECE (15 bins) at k = 40, the mean pairwise KL between the 40 samples' predictives (diversity),
the median bulk ESS over held-out points of the per-sample log predictive log p(y*|x*, θ) (4
chains × 40 draws), the sampling wall time (a second call with the same shapes: compilation
excluded) and ESS per second. Paired differences to SGHMC in NLL at k = 40 (same seeds and
chains) with their standard error say whether a learned kernel beats SGHMC. A chain whose
predictive is not finite has diverged: it is counted and left out of every mean (and its pair).

Run: ``python benchmarks/heldout_eval.py [--seeds 3] [--first-seed 0] [--steps 6000]
[--samplers sghmc,l2e,…] [--nnsghmc-params NPZ] [--out DIR] [--plot PNG]`` (``--samplers`` takes
names separated by commas or spaces);
prints the tables and writes ``heldout_eval.json`` to ``--out``
(default ``bdl-output/benchmarks/heldout_eval``).
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
import optax

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment

import bdl
from bdl import metrics
from bdl.diagnostics import ess_bulk
from bdl.meta.tasks import HELD_OUT, Task, make_task
from bdl.optimise import minimise
from bdl.validation.compare import predictive_per_sample

CHAINS = 4
BURN_IN = 2_000
THIN = 100
DRAWS = 40
REPORT_K = (1, 2, 5, 10, 20, 40)
SAMPLERS = (
    "sghmc",
    "cyclical",
    "l2e",
    "l2e-paper",
    "l2e-v1",
    "kinetic-l2e",
    "nnsghmc",
    "nnsghmc-h/2",
    "ensemble",
)
#: L2E's parameters trained on the first eight task families (the default before the widening)
L2E_V1 = Path(__file__).resolve().parents[1] / "experiments/meta_params/l2e-families-v1.npz"
ENSEMBLE_STEPS = 2_000
ENSEMBLE_LR = 1e-3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=3, help="data seeds (fresh splits)")
    p.add_argument(
        "--first-seed", type=int, default=0, help="index of the first data seed (5001 + 2·index)"
    )
    p.add_argument("--steps", type=int, default=BURN_IN + DRAWS * THIN)
    p.add_argument(
        "--samplers",
        nargs="+",
        default=list(SAMPLERS),
        help=f"samplers, separated by commas or spaces, from {', '.join(SAMPLERS)}",
    )
    p.add_argument(
        "--nnsghmc-params",
        default=None,
        help="NNSGHMC meta-parameter file (default: the shipped one), with its input statistics",
    )
    p.add_argument("--out", type=Path, default=Path("bdl-output/benchmarks/heldout_eval"))
    p.add_argument("--plot", type=Path, default=None, help="figure path (default: in --out)")
    args = p.parse_args(argv)
    args.samplers = [n for item in args.samplers for n in item.split(",") if n]
    unknown = [n for n in args.samplers if n not in SAMPLERS]
    if unknown or not args.samplers:
        p.error(f"--samplers: unknown {unknown}; choose from {', '.join(SAMPLERS)}.")
    if args.steps < BURN_IN + DRAWS * THIN:
        p.error(f"--steps must be >= {BURN_IN + DRAWS * THIN} to collect {DRAWS} draws.")
    return args


def kernel_for(name: str, task: Task, nnsghmc_params: str | None = None) -> tuple[Any, int, int]:
    """The kernel, its thinning and its multiple of the run length on ``task``."""
    h, c = task.step_size, task.friction
    if name == "cyclical":
        kernel = bdl.kernels.get(
            "cyclical",
            base="sghmc",
            step_size=2.0 * h,
            friction=c,
            cycle_length=200,
            exploration=0.5,
        )
        return kernel, THIN // 2, 1
    if name.startswith("nnsghmc"):
        hyper = {"alpha": 1.0, "beta0": 1.0, "c": 0.01, "meta_params": nnsghmc_params}
        if name.endswith("h/2"):  # half the step, twice the steps between draws
            return bdl.kernels.get("nnsghmc", step_size=h / 2, **hyper), 2 * THIN, 2
        return bdl.kernels.get("nnsghmc", step_size=h, **hyper), THIN, 1
    if name == "l2e-paper":
        return bdl.kernels.get("l2e", step_size=h, friction=c, form="paper"), THIN, 1
    if name == "l2e-v1":
        return bdl.kernels.get("l2e", step_size=h, friction=c, meta_params=L2E_V1), THIN, 1
    return bdl.kernels.get(name, step_size=h, friction=c), THIN, 1


def per_sample_probs(model: Any, positions: Any) -> jax.Array:
    """Predictive probabilities of every draw on the held-out inputs: ``(chains, draws, n, K)``."""
    chains, draws = jax.tree.leaves(positions)[0].shape[:2]
    probs = predictive_per_sample(model, positions, num=model.x_test.shape[0])
    return probs.reshape(chains, draws, *probs.shape[1:])


def run_sampler(
    name: str, task: Task, steps: int, seed: int, nnsghmc_params: str | None = None
) -> tuple[jax.Array, float]:
    """(probs (chains, DRAWS, n, K), seconds of the timed call)."""
    kernel, thin, factor = kernel_for(name, task, nnsghmc_params)
    burn_in, steps = BURN_IN * factor, steps * factor
    kwargs = dict(burn_in=burn_in, thin=thin, num_chains=CHAINS, seed=seed, progress=False)
    bdl.sample(task.model, kernel, num_steps=burn_in + thin, **kwargs)  # compile
    start = time.perf_counter()
    samples = bdl.sample(task.model, kernel, num_steps=steps, **kwargs)
    seconds = time.perf_counter() - start
    if samples.num_draws < DRAWS:
        raise RuntimeError(f"{name}: {samples.num_draws} draws < {DRAWS}.")
    positions = jax.tree.map(lambda a: a[:, :DRAWS], samples.positions)
    return per_sample_probs(task.model, positions), seconds


def train_ensemble(task: Task, seed: int) -> tuple[jax.Array, float]:
    """CHAINS independent ensembles of DRAWS members: MAP by Adam on Ũ/n."""
    model = task.model
    members = CHAINS * DRAWS
    key = jax.random.key(seed)
    params = model.init_positions(jax.random.fold_in(key, 0), members)
    opt = optax.adam(ENSEMBLE_LR)
    keys = jax.random.split(jax.random.fold_in(key, 1), members)
    run = jax.jit(jax.vmap(lambda p, k: minimise(model, opt, p, k, ENSEMBLE_STEPS)))
    jax.block_until_ready(run(params, keys))  # compile (and a first run)
    start = time.perf_counter()
    trained = jax.block_until_ready(run(params, keys))
    seconds = time.perf_counter() - start
    trained = jax.tree.map(lambda a: a.reshape(CHAINS, DRAWS, *a.shape[1:]), trained)
    return per_sample_probs(model, trained), seconds


def curves(probs: jax.Array, labels: jax.Array) -> dict[str, np.ndarray]:
    """BMA accuracy and NLL after the first k draws, k = 1..DRAWS: ``(chains, DRAWS)`` each."""
    cum = jnp.cumsum(probs, axis=1) / jnp.arange(1, probs.shape[1] + 1)[None, :, None, None]
    acc = jax.vmap(jax.vmap(lambda p: metrics.accuracy(p, labels)))(cum)
    nll = jax.vmap(jax.vmap(lambda p: metrics.nll(p, labels)))(cum)
    return {"accuracy": np.asarray(acc), "nll": np.asarray(nll)}


def summarise(name: str, probs: jax.Array, labels: jax.Array, seconds: float) -> dict[str, Any]:
    """Every reported number of one sampler on one task, per chain. A chain whose predictive is
    not finite (it diverged) gets NaN everywhere and is counted in ``diverged``."""
    finite = np.isfinite(np.asarray(probs)).reshape(probs.shape[0], -1).all(axis=1)
    nan_rows = np.where(finite[:, None], 0.0, np.nan)
    safe = jnp.where(finite[:, None, None, None], probs, 1.0 / probs.shape[-1])
    c = curves(safe, labels)
    bma = safe.mean(axis=1)
    ece = [float(metrics.expected_calibration_error(b, labels)) for b in bma]
    pkl = [float(metrics.mean_pairwise_kl(p)) for p in safe]
    out: dict[str, Any] = {
        "accuracy": (c["accuracy"] + nan_rows).tolist(),
        "nll": (c["nll"] + nan_rows).tolist(),
        "ece": (np.asarray(ece) + nan_rows[:, 0]).tolist(),
        "pairwise_kl": (np.asarray(pkl) + nan_rows[:, 0]).tolist(),
        "seconds": seconds,
        "diverged": int((~finite).sum()),
    }
    if name != "ensemble" and finite.sum() >= 2:
        kept = probs[np.flatnonzero(finite)]
        true_class = jnp.take_along_axis(kept, labels[None, None, :, None], axis=-1)[..., 0]
        log_p = jnp.log(jnp.clip(true_class, 1e-12))  # (chains, draws, n)
        ess = ess_bulk(np.asarray(log_p))  # ArviZ, on the host
        out["ess_median"] = float(np.median(ess))
    return out


def mean_sd(values: Any) -> str:
    a = np.asarray(values, float)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return "—"
    return f"{a.mean():.4f} ± {a.std(ddof=1):.4f}" if a.size > 1 else f"{a.mean():.4f}"


def tables(results: dict[str, list[dict[str, Any]]]) -> str:
    """Markdown tables: metrics per sampler, and paired NLL differences to SGHMC."""
    lines = [
        "| sampler | diverged chains | "
        + " | ".join(f"acc k={k}" for k in (1, 10, 40))
        + " | "
        + " | ".join(f"NLL k={k}" for k in REPORT_K)
        + " | ECE k=40 | pairwise KL | ESS (median) | s | ESS/s |",
        "|---" * (4 + len(REPORT_K) + 6) + "|",
    ]
    for name, runs in results.items():
        acc = np.concatenate([np.asarray(r["accuracy"]) for r in runs])  # (seeds·chains, DRAWS)
        nll = np.concatenate([np.asarray(r["nll"]) for r in runs])
        row = [name, f"{sum(r['diverged'] for r in runs)} / {acc.shape[0]}"]
        row += [mean_sd(acc[:, k - 1]) for k in (1, 10, 40)]
        row += [mean_sd(nll[:, k - 1]) for k in REPORT_K]
        row.append(mean_sd([e for r in runs for e in r["ece"]]))
        row.append(mean_sd([e for r in runs for e in r["pairwise_kl"]]))
        secs = [r["seconds"] for r in runs]
        if name == "ensemble":
            row += ["— (independent)", f"{np.mean(secs):.1f}", "—"]
        else:
            ess = [r["ess_median"] for r in runs if "ess_median" in r]
            rate = [r["ess_median"] / r["seconds"] for r in runs if "ess_median" in r]
            row += [f"{np.mean(ess):.0f}", f"{np.mean(secs):.1f}", f"{np.mean(rate):.0f}"]
        lines.append("| " + " | ".join(row) + " |")
    if "sghmc" in results:
        lines += [
            "",
            "| sampler | ΔNLL vs SGHMC, k=10 | ΔNLL vs SGHMC, k=40 | lower NLL than SGHMC? |",
            "|---|---|---|---|",
        ]
        base = np.concatenate([np.asarray(r["nll"]) for r in results["sghmc"]])
        for name, runs in results.items():
            if name == "sghmc":
                continue
            nll = np.concatenate([np.asarray(r["nll"]) for r in runs])
            cells = []
            verdict = "—"
            for k in (10, 40):
                d = nll[:, k - 1] - base[:, k - 1]
                d = d[np.isfinite(d)]  # pairs where neither chain diverged
                se = d.std(ddof=1) / np.sqrt(d.size)
                cells.append(f"{d.mean():+.4f} ± {se:.4f}")
                if d.mean() < -2 * se:
                    verdict = "yes"
                elif d.mean() > 2 * se:
                    verdict = "no (worse)"
                else:
                    verdict = "no (within 2 se)"
            lines.append(f"| {name} | {cells[0]} | {cells[1]} | {verdict} |")
    return "\n".join(lines)


def plot(results: dict[str, list[dict[str, Any]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    k = np.arange(1, DRAWS + 1)
    for name, runs in results.items():
        for ax, key in zip(axes, ("accuracy", "nll"), strict=True):
            a = np.concatenate([np.asarray(r[key]) for r in runs])
            a = a[np.isfinite(a).all(axis=1)]  # diverged chains are left out
            m, se = a.mean(0), a.std(0, ddof=1) / np.sqrt(a.shape[0])
            ax.plot(k, m, label=name)
            ax.fill_between(k, m - se, m + se, alpha=0.2)
    axes[0].set(xlabel="number of samples (ensemble members)", ylabel="BMA accuracy")
    axes[1].set(xlabel="number of samples (ensemble members)", ylabel="BMA NLL (nats)")
    axes[1].set_xscale("log")
    axes[0].set_xscale("log")
    axes[1].legend(fontsize=8)
    fig.suptitle(f"held-out task {HELD_OUT} (mean ± se over seeds × chains)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(environment(), flush=True)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in args.samplers}
    for s in range(args.first_seed, args.first_seed + args.seeds):
        data_seed = 5001 + 2 * s
        task = make_task(HELD_OUT, data_seed)
        labels = task.model.y_test
        print(f"task {task.name}: h = {task.step_size:.4g}, C = {task.friction:.4g}", flush=True)
        for name in args.samplers:
            if name == "ensemble":
                probs, seconds = train_ensemble(task, seed=s)
            else:
                probs, seconds = run_sampler(
                    name, task, args.steps, seed=s, nnsghmc_params=args.nnsghmc_params
                )
            summary = summarise(name, probs, labels, seconds)
            summary["data_seed"] = data_seed
            results[name].append(summary)
            nll40 = np.nanmean(np.asarray(summary["nll"])[:, -1])
            print(
                f"  {name}: NLL@{DRAWS} {nll40:.4f}  diverged {summary['diverged']}  "
                f"{seconds:.1f} s",
                flush=True,
            )
    table = tables(results)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {
        "environment": environment(),
        "steps": args.steps,
        "nnsghmc_params": args.nnsghmc_params or "shipped",
        "results": results,
        "table": table,
    }
    (args.out / "heldout_eval.json").write_text(json.dumps(payload))
    plot(results, args.plot or args.out / "heldout_eval.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Time to fidelity: how long an exact SG-MCMC kernel takes to match NUTS's predictive.

On the prior-data MLP (bdl/models/mlp_prior_data.py: depth 1–3, ``n_train`` training points,
T = 1, minibatch 100), for each configuration it

1. times NumPyro NUTS to a *trusted* reference (docs/design.md, *Validation*: 4 chains,
   1,000 + 1,000 iterations, float64, function-space R̂ < 1.01 and bulk ESS ≥ 400; when the
   gate refuses, warm-up and samples are doubled and the time of every attempt is counted);
2. runs each exact kernel with its adapted defaults (``bdl.kernels.get(name)``, adaptation during
   burn-in) for doubling budgets S = 500, 1000, 2000, … steps (burn-in S/2, 8 chains, about
   100 draws per chain), and records the symmetrised predictive KL of its BMA to NUTS's BMA on
   500 held-out inputs (Wenzel et al. 2020, App. O.3) and the wall time of the call.

Every time is kept twice: wall-clock and the process's CPU time (all threads). On a shared
machine the CPU times are the steadier comparison; the table prints both ratios.

The time to a KL level is the wall time of the first budget whose draws reach it — an upper
bound, since a budget is a whole run from the start (at most twice the shortest sufficient run).
"Compile excluded" is the call's time once compiled (the fastest of two calls); "compile included"
adds the kernel's one-off compile time (its first call minus its second, on the first budget).
The goal (docs/design.md, *Performance targets*): the best kernel at KL ≤ 1e-3 in ≤ 0.01×
NUTS's wall time at n = 10,000, compile included.

    python benchmarks/time_to_fidelity.py [--depths 1 2 3] [--n 1000 10000]
        [--kernels sgld sghmc sgnht] [--max-steps 128000] [--out FILE.json] [--plot FILE.png]
        [--reference-dir DIR [--nuts-at-least WALL CPU]]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment, load_average

import bdl
from bdl.model_files import load_spec
from bdl.validation.compare import predictive_per_sample
from bdl.validation.reference import nuts_reference

LEVELS = (1e-3, 1e-4)
EVAL_INPUTS = 500
FIRST_BUDGET = 500
DRAWS_PER_CHAIN = 100


def bma(target: Any, positions: Any) -> jax.Array:
    """The BMA predictive probabilities on the first EVAL_INPUTS held-out inputs."""
    return jnp.mean(predictive_per_sample(target, positions, EVAL_INPUTS), axis=0)


def clock() -> np.ndarray:
    """(wall seconds, process CPU seconds) now."""
    return np.array([time.perf_counter(), time.process_time()])


def nuts_to_trusted(target: Any, attempts: int = 3) -> tuple[np.ndarray, Any, dict]:
    """(wall, CPU) seconds of NUTS until its reference passes the trust gate (every attempt
    counted)."""
    warmup = samples = 1_000
    seconds = np.zeros(2)
    for _ in range(attempts):
        start = clock()
        ref = nuts_reference(
            target,
            num_warmup=warmup,
            num_samples=samples,
            space="function",
            use_cache=False,
            require_trusted=False,
        )
        seconds += clock() - start
        if ref.trusted:
            break
        warmup, samples = 2 * warmup, 2 * samples
    gate = {
        "trusted": bool(ref.trusted),
        "max_rhat": ref.max_rhat,
        "min_ess": ref.min_ess,
        "warmup": warmup,
        "samples": samples,
    }
    return seconds, ref.positions, gate


class InterruptedRunError(Exception):
    """``bdl.sample`` returned early (Ctrl-C, or a time cap's SIGTERM)."""


def run_budget(target: Any, kernel: Any, steps: int, chains: int) -> tuple[np.ndarray, Any]:
    burn_in = steps // 2
    thin = max(1, (steps - burn_in) // DRAWS_PER_CHAIN)
    start = clock()
    s = bdl.sample(
        target,
        kernel,
        num_steps=steps,
        burn_in=burn_in,
        thin=thin,
        num_chains=chains,
        seed=0,
        progress=False,
    )
    jax.block_until_ready(s.positions)
    if s.interrupted:  # a partial run is no data point: stop the benchmark here
        raise InterruptedRunError(
            f"the {steps}-step run was interrupted after {s.steps_done} steps"
        )
    return clock() - start, s


def kernel_curve(
    target: Any, name: str, reference_bma: jax.Array, chains: int, max_steps: int
) -> dict[str, Any]:
    kernel = bdl.kernels.get(name)
    budgets, seconds, cpu, kls, healthy = [], [], [], [], []
    compile_s = None
    steps = FIRST_BUDGET
    interrupted = False
    while steps <= max_steps:
        try:
            first, s = run_budget(target, kernel, steps, chains)
            second, s = run_budget(target, kernel, steps, chains)
        except InterruptedRunError as stop:
            print(f"    {name:6s} stopped: {stop}", flush=True)
            interrupted = True
            break
        if compile_s is None:
            compile_s = np.maximum(first - second, 0.0)
            print(
                f"    {name:6s} compilation {compile_s[0]:.2f} s ({compile_s[1]:.2f} s CPU)",
                flush=True,
            )
        wall, cpu_s = np.minimum(first, second)
        ok = ~np.asarray(s.diverged).reshape(-1)
        kl = float("inf")
        if ok.any():
            kept = jax.tree.map(lambda a, keep=ok: a[keep], s.positions)
            kl = float(bdl.metrics.symmetrised_kl(bma(target, kept), reference_bma))
        budgets.append(steps)
        seconds.append(float(wall))
        cpu.append(float(cpu_s))
        kls.append(kl)
        healthy.append(int(ok.sum()))
        print(
            f"    {name:6s} S={steps:7d}  {wall:7.2f} s ({cpu_s:.2f} s CPU)  KL {kl:.2e}  "
            f"healthy {ok.sum()}/{chains}",
            flush=True,
        )
        if kl <= min(LEVELS):
            break
        steps *= 2
    if compile_s is None:
        compile_s = np.full(2, np.nan)
    reached = {}
    for level in LEVELS:
        hit = next((i for i, kl in enumerate(kls) if kl <= level), None)
        reached[f"{level:g}"] = (
            None
            if hit is None
            else {
                "steps": budgets[hit],
                "excl": seconds[hit],
                "incl": seconds[hit] + float(compile_s[0]),
                "cpu_excl": cpu[hit],
                "cpu_incl": cpu[hit] + float(compile_s[1]),
            }
        )
    return {
        "budgets": budgets,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "kl": kls,
        "healthy_chains": healthy,
        "compile": float(compile_s[0]),
        "cpu_compile": float(compile_s[1]),
        "reached": reached,
        "interrupted": interrupted,
    }


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.6), squeeze=False)
    for ax, r in zip(axes[0], results, strict=True):
        for name, c in r["kernels"].items():
            t = np.asarray(c["seconds"]) + c["compile"]
            ax.loglog(t, c["kl"], "o-", label=name, ms=3)
        ax.axvline(r["nuts_seconds"], color="k", ls="--", lw=1, label="NUTS (trusted)")
        ax.axvline(0.01 * r["nuts_seconds"], color="grey", ls=":", lw=1, label="0.01 × NUTS")
        for level in LEVELS:
            ax.axhline(level, color="grey", lw=0.5)
        ax.set_title(f"depth {r['depth']}, n = {r['n']:,}")
        ax.set_xlabel("wall time, compile included (s)")
        ax.set_ylabel("symmetrised KL to NUTS")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--n", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--kernels", nargs="+", default=["sgld", "sghmc", "sgnht"])
    parser.add_argument("--chains", type=int, default=8)
    parser.add_argument("--max-steps", type=int, default=128_000)
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    parser.add_argument("--plot", type=Path, default=None, help="write the KL-vs-time figure")
    parser.add_argument(
        "--reference-dir",
        type=Path,
        default=None,
        help="keep each NUTS reference (its BMA, wall and CPU seconds, trust gate) here and reuse "
        "it on a later run instead of running NUTS again",
    )
    parser.add_argument(
        "--nuts-at-least",
        type=float,
        nargs=2,
        metavar=("WALL", "CPU"),
        default=None,
        help="NUTS's wall and CPU seconds on this machine are at least these (a run stopped "
        "before its first trust check); the reference BMA comes from --reference-dir (e.g. "
        "computed on another machine), and the ratios printed are upper bounds",
    )
    args = parser.parse_args()
    if args.nuts_at_least is not None and args.reference_dir is None:
        parser.error("--nuts-at-least needs --reference-dir (the reference BMA)")
    print(environment(), flush=True)
    results = []
    for depth, n in itertools.product(args.depths, args.n):
        spec = load_spec("mlp_prior_data", depth=depth, n_train=n, batch_size=min(n, 100))
        target = spec.compile()
        saved = (
            None if args.reference_dir is None else args.reference_dir / f"nuts_d{depth}_n{n}.npz"
        )
        if saved is not None and saved.exists():
            with np.load(saved) as f:
                reference_bma = jnp.asarray(f["bma"])
                nuts_s, nuts_cpu = (float(v) for v in f["seconds"])
                gate = json.loads(str(f["gate"]))
            print(f"depth {depth}, n = {n:,}: NUTS reference from {saved}", flush=True)
        else:
            print(f"depth {depth}, n = {n:,}: NUTS ...", flush=True)
            (nuts_s, nuts_cpu), ref_positions, gate = nuts_to_trusted(target)
            reference_bma = bma(target, ref_positions)
            if saved is not None:
                saved.parent.mkdir(parents=True, exist_ok=True)
                np.savez(saved, bma=np.asarray(reference_bma), seconds=[nuts_s, nuts_cpu],
                         gate=json.dumps(gate))  # fmt: skip
        print(
            f"  NUTS {nuts_s:.1f} s ({nuts_cpu:.1f} s CPU), {gate}  ({load_average()})",
            flush=True,
        )
        if args.nuts_at_least is not None:
            nuts_s, nuts_cpu = args.nuts_at_least
            print(
                f"  NUTS on this machine: at least {nuts_s:.1f} s ({nuts_cpu:.1f} s CPU); "
                "the ratios below are upper bounds",
                flush=True,
            )
        r = {
            "depth": depth,
            "n": n,
            "nuts_seconds": float(nuts_s),
            "nuts_cpu_seconds": float(nuts_cpu),
            "nuts_gate": gate,
            "nuts_seconds_are_lower_bounds": args.nuts_at_least is not None,
            "load": load_average(),
            "kernels": {},
        }
        for name in args.kernels:
            r["kernels"][name] = kernel_curve(
                target, name, reference_bma, args.chains, args.max_steps
            )
            if r["kernels"][name]["interrupted"]:
                break
        best = min(
            (
                (c["reached"]["0.001"]["incl"], name)
                for name, c in r["kernels"].items()
                if c["reached"]["0.001"]
            ),
            default=None,
        )
        r["best"] = None
        if best is not None:
            c = r["kernels"][best[1]]["reached"]["0.001"]
            r["best"] = {
                "kernel": best[1],
                "ratio": best[0] / nuts_s,
                "cpu_ratio": c["cpu_incl"] / nuts_cpu,
            }
        print(f"  best at KL ≤ 1e-3: {r['best']}  ({load_average()})", flush=True)
        results.append(r)
        if args.out:
            args.out.write_text(json.dumps(results, indent=1))
        if any(c["interrupted"] for c in r["kernels"].values()):
            break
    print(
        "\n| depth | n | NUTS (s) | kernel | KL ≤ 1e-3: excl / incl (s) | ratio incl "
        "| CPU-time ratio incl | KL ≤ 1e-4 incl (s) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        for name, c in r["kernels"].items():
            a, b = c["reached"]["0.001"], c["reached"]["0.0001"]
            cell = "not reached" if a is None else f"{a['excl']:.2f} / {a['incl']:.2f}"
            ratio = "—" if a is None else f"{a['incl'] / r['nuts_seconds']:.4f}"
            cpu_ratio = "—" if a is None else f"{a['cpu_incl'] / r['nuts_cpu_seconds']:.4f}"
            cell4 = "not reached" if b is None else f"{b['incl']:.2f}"
            print(
                f"| {r['depth']} | {r['n']:,} | {r['nuts_seconds']:.1f} | {name} | {cell} | "
                f"{ratio} | {cpu_ratio} | {cell4} |"
            )
    print(load_average())
    if args.plot:
        plot(results, args.plot)


if __name__ == "__main__":
    main()

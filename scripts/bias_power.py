"""The bias check's power and false alarms, measured on targets whose law is known in closed form
(docs/troubleshooting.md, "The draws are biased", shows the result).

Each case runs a kernel on a target for 20,000 steps (burn-in 2,000, thin 10) with 4 chains, as
a user would, ``--runs`` times with different seeds (one call of ``bdl.sample`` with
4 × runs chains, split into runs of 4), and compares the draws with the truth: per coordinate the
ratio of the draws' sd to the target's (the half-interquartile range for the Student-t, whose sd
is no summary of its spread) and the mean's error in sds. A run's *error* is the largest over its
coordinates. It is then checked as ``bdl.sample`` checks it: the bias part
(:func:`bdl.sampling.check_bias`), the mixing part (:func:`bdl.sampling.check_convergence`) and
the run-away flags; power and false alarms are stated for the bias part alone and for the whole
verdict.

    python scripts/bias_power.py --rows runs.jsonl    # every case, 4 runs each (about an hour)
    python scripts/bias_power.py --quick              # a few cases, for a smoke test
    python scripts/bias_power.py --rows runs.jsonl --out docs/bias_power.json \
        --plot docs/img/bias_power.png

Targets: isotropic Gaussians (d = 2, 5, 20, 100, 1,000), a Gaussian with scales from 0.3 to 3
(d = 10), an equicorrelated Gaussian (ρ = 0.9, d = 5), iid Student-t with 3 degrees of freedom
(d = 5), a Gaussian with injected gradient noise (d = 10, noise sd 3), and a conjugate linear
regression (n = 200, d = 5, minibatches of 20). Kernels: SGLD, SGHMC, SGNHT and pSGLD over a
range of fixed step sizes, and each adapted (``bdl.kernels.get(name)``).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import os
import time
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import bdl
from bdl.data.synthetic import linear_regression, linear_regression_posterior
from bdl.sampling import check_bias

STEPS, BURN_IN, THIN, CHAINS = 20_000, 2_000, 10, 4
#: the errors that must be flagged, and those that must not (module docstring)
FLAG_SCALE, FLAG_MEAN = 0.10, 0.20
ACCURATE_SCALE, ACCURATE_MEAN = 0.03, 0.06
_HALF_IQR = 0.6744897501960817  # of N(0, 1)


@dataclasses.dataclass(frozen=True)
class Truth:
    mean: np.ndarray
    sd: np.ndarray
    half_iqr: np.ndarray
    robust: bool  # judge the spread by the half-IQR (heavy tails)


def gaussian(d: int, scales: Any = None, noise: float = 0.0) -> tuple[Any, Truth, float]:
    s = np.ones(d) if scales is None else np.asarray(scales, np.float64)
    s32 = jnp.asarray(s, jnp.float32)
    potential = bdl.Potential(
        lambda t: -0.5 * jnp.sum((t / s32) ** 2),
        init=lambda k: jax.random.normal(k, (d,)) * s32,
        grad_noise=noise,
        name=f"gaussian{d}",
    )
    return bdl.compile(potential), Truth(np.zeros(d), s, s * _HALF_IQR, False), float(s.min())


def correlated(d: int, rho: float) -> tuple[Any, Truth, float]:
    cov = (1 - rho) * np.eye(d) + rho * np.ones((d, d))
    prec = jnp.asarray(np.linalg.inv(cov), jnp.float32)
    potential = bdl.Potential(
        lambda t: -0.5 * t @ prec @ t, init=lambda k: jax.random.normal(k, (d,)), name="corr"
    )
    sd = np.sqrt(np.diag(cov))
    return bdl.compile(potential), Truth(np.zeros(d), sd, sd * _HALF_IQR, False), math.sqrt(1 - rho)


def student_t(d: int, nu: float) -> tuple[Any, Truth, float]:
    from scipy import stats

    potential = bdl.Potential(
        lambda t: -0.5 * (nu + 1) * jnp.sum(jnp.log1p(t**2 / nu)),
        init=lambda k: jax.random.normal(k, (d,)),
        name="student_t",
    )
    half_iqr = float(stats.t(nu).ppf(0.75))
    sd = math.sqrt(nu / (nu - 2)) if nu > 2 else math.inf
    truth = Truth(np.zeros(d), np.full(d, sd), np.full(d, half_iqr), True)
    return bdl.compile(potential), truth, 1.0


def regression(n: int, d: int, batch: int) -> tuple[Any, Truth, float]:
    data = linear_regression(n=n, dim=d, noise_sd=0.5, seed=0)
    model = bdl.Model(
        network=lambda p, x: x @ p["w"],
        params={"w": jnp.zeros(d)},
        likelihood=bdl.Gaussian(scale=0.5),
        prior=bdl.Normal(1.0),
    )
    x = np.asarray(data.x_train, np.float64)
    y = np.asarray(data.y_train, np.float64)
    mu, sigma = linear_regression_posterior(x, y, 0.5, 1.0)
    sd = np.sqrt(np.diag(sigma))
    smallest = float(np.sqrt(1 / np.linalg.eigvalsh(np.linalg.inv(sigma)).max()))
    truth = Truth(mu, sd, sd * _HALF_IQR, False)
    return bdl.compile(model, data, batch_size=batch), truth, smallest


TARGETS = {
    "gaussian d=2": lambda: gaussian(2),
    "gaussian d=5": lambda: gaussian(5),
    "gaussian d=20": lambda: gaussian(20),
    "gaussian d=100": lambda: gaussian(100),
    "gaussian d=1000": lambda: gaussian(1000),
    "gaussian scales 0.3-3 d=10": lambda: gaussian(10, np.geomspace(0.3, 3.0, 10)),
    "gaussian rho=0.9 d=5": lambda: correlated(5, 0.9),
    "student-t nu=3 d=5": lambda: student_t(5, 3.0),
    "gaussian grad noise 3 d=10": lambda: gaussian(10, noise=3.0),
    "linear regression n=200 B=20": lambda: regression(200, 5, 20),
}
#: step sizes relative to the target's smallest sd σ: SGLD's h in units of σ², the momentum
#: kernels' h in units of σ
GRIDS = {
    "sgld": (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.8),
    "psgld": (0.02, 0.05, 0.1, 0.2, 0.35, 0.5),
    "sghmc": (0.05, 0.1, 0.2, 0.35, 0.5, 0.8),
    "sgnht": (0.05, 0.1, 0.2, 0.35, 0.5, 0.8),
}
FEW_KERNELS = ("gaussian d=20", "gaussian d=100", "gaussian d=1000", "gaussian d=5")


def kernels(name: str, sigma: float) -> list[tuple[str, Any]]:
    out = []
    chosen = ("sgld", "sghmc") if name in FEW_KERNELS else tuple(GRIDS)
    for kernel in chosen:
        for rel in GRIDS[kernel]:
            if kernel in ("sgld", "psgld"):
                h = rel * sigma**2
                out.append((f"{kernel}(h={h:.3g})", bdl.kernels.get(kernel, step_size=h)))
            elif kernel == "sghmc":
                h = rel * sigma
                k = bdl.kernels.sghmc(step_size=h, friction=1.0 / sigma)
                out.append((f"sghmc(h={h:.3g}, C={1 / sigma:.3g})", k))
            else:
                h = rel * sigma
                out.append((f"sgnht(h={h:.3g})", bdl.kernels.sgnht(step_size=h)))
        out.append((f"{kernel} adapted", bdl.kernels.get(kernel)))
    return out


def chains(samples: Any, lo: int, hi: int) -> Any:
    """The chains lo..hi of a run, as a run of their own."""

    def part(a: Any) -> Any:
        return None if a is None else np.asarray(a)[lo:hi]

    adapted = None
    if samples.adapted is not None:
        adapted = {k: jax.tree.map(part, v) for k, v in samples.adapted.items()}
    return dataclasses.replace(
        samples,
        positions=jax.tree.map(part, samples.positions),
        extra={k: jax.tree.map(part, v) for k, v in samples.extra.items()},
        info={k: part(v) for k, v in samples.info.items()},
        diverged=part(samples.diverged),
        divergence_step=part(samples.divergence_step),
        runaway=part(samples.runaway),
        runaway_step=part(samples.runaway_step),
        runaway_reason=list(samples.runaway_reason[lo:hi]),
        adapted=adapted,
        convergence=None,
    )


def errors(samples: Any, truth: Truth) -> dict[str, float]:
    """The run's largest errors over its coordinates (healthy chains)."""
    x = np.concatenate(
        [
            np.asarray(a, np.float64)[samples.healthy_chains].reshape(-1, int(np.prod(a.shape[2:])))
            for a in jax.tree.leaves(samples.positions)
        ],
        axis=-1,
    )
    sd = x.std(axis=0)
    q1, q3 = np.percentile(x, [25, 75], axis=0)
    spread = (q3 - q1) / 2 / truth.half_iqr if truth.robust else sd / truth.sd
    unit = truth.half_iqr / _HALF_IQR if truth.robust else truth.sd
    mean = (x.mean(axis=0) - truth.mean) / unit
    return {
        "scale": float(np.max(np.abs(spread - 1))),
        "scale_rms": float(np.sqrt(np.mean((spread - 1) ** 2))),
        "scale_signed": float(np.mean(spread - 1)),
        "mean": float(np.max(np.abs(mean))),
    }


def run_case(
    target_name: str, runs: int, seed: int, done: set[tuple[str, str]], sink: Any = None
) -> list[dict[str, Any]]:
    """Every kernel of :func:`kernels` on one target; rows of kernels in ``done`` are skipped,
    and each row is written to ``sink`` (a text file, one JSON line per run) as it is made."""
    target, truth, sigma = TARGETS[target_name]()
    rows = []
    todo = [(lab, k) for lab, k in kernels(target_name, sigma) if (target_name, lab) not in done]
    for label, kernel in todo:
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                samples = bdl.sample(
                    target, kernel, num_steps=STEPS, burn_in=BURN_IN, thin=THIN,
                    num_chains=CHAINS * runs, seed=seed,
                )  # fmt: skip
            except ValueError as err:
                print(f"{target_name} {label}: refused ({err})", flush=True)
                continue
        seconds = time.perf_counter() - start
        for r in range(runs):
            part = chains(samples, CHAINS * r, CHAINS * (r + 1))
            row = {"target": target_name, "kernel": label, "run": r}
            if np.any(part.diverged):
                row.update(diverged=True, flagged_any=True)
            else:
                row.update(checked(part, target, truth))
                row["run_seconds"] = seconds / runs
            rows.append(row)
            if sink is not None:
                sink.write(json.dumps(row) + "\n")
                sink.flush()
            if not row.get("diverged"):
                print(
                    f"{target_name:30s} {label:28s} run {r}: error {row['scale']:.3f} (mean "
                    f"{row['mean']:.3f}) bias {row['flagged']} mixing {row['unmixed']} "
                    f"spread {row['spread']}",
                    flush=True,
                )
        del samples
        jax.clear_caches()  # every kernel compiles its own programs: a process holds them all
    return rows


def checked(part: Any, target: Any, truth: Truth) -> dict[str, Any]:
    """The run's errors against the truth and what bdl's verdict says of it: its bias part, its
    mixing part (R̂, ESS, stuck chains) and its run-away flags."""
    from bdl.sampling import check_convergence

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        verdict = check_bias(part, target)
    check_seconds = time.perf_counter() - t0
    mixing = check_convergence(part, target)
    flagged = bool(verdict is not None and not verdict.ok)
    unmixed = bool(mixing is not None and not mixing.mixing_ok)
    runaway = bool(np.any(part.runaway))
    return {
        "diverged": False, **errors(part, truth),
        "flagged": flagged, "unmixed": unmixed, "runaway": runaway,
        "flagged_any": flagged or unmixed or runaway,
        "spread": None if verdict is None else verdict.spread,
        "spread_se": None if verdict is None else verdict.spread_se,
        "worst_spread": None if verdict is None else verdict.worst_spread,
        "worst_mean": None if verdict is None else verdict.worst_mean,
        "resolution": None if verdict is None else verdict.resolution,
        "max_rhat": None if mixing is None else mixing.max_rhat,
        "min_ess_bulk": None if mixing is None else mixing.min_ess_bulk,
        "findings": [] if verdict is None else [str(f) for f in verdict.findings[:2]],
        "check_seconds": check_seconds,
    }  # fmt: skip


def classify(row: dict[str, Any]) -> str:
    if row["scale"] >= FLAG_SCALE or row["mean"] >= FLAG_MEAN:
        return "biased"
    if row["scale"] <= ACCURATE_SCALE and row["mean"] <= ACCURATE_MEAN:
        return "accurate"
    return "between"


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Power and false alarms of the bias part alone and of the whole verdict (bias, mixing,
    run-away), and the share flagged by error size."""
    ok = [r for r in rows if not r.get("diverged")]
    groups = {"biased": [], "accurate": [], "between": []}
    for r in ok:
        groups[classify(r)].append(r)

    def rate(group: list[dict[str, Any]], key: str) -> float:
        return float(np.mean([r[key] for r in group])) if group else math.nan

    edges = [0.0, 0.03, 0.05, 0.075, 0.10, 0.15, 0.25, 0.5, math.inf]
    curve = []
    for lo, hi in itertools.pairwise(edges):
        inside = [r for r in ok if lo <= r["scale"] < hi and r["mean"] < FLAG_MEAN]
        if inside:
            curve.append({
                "from": lo, "to": hi, "runs": len(inside),
                "flagged": rate(inside, "flagged"), "flagged_any": rate(inside, "flagged_any"),
            })  # fmt: skip
    misses = [r for r in groups["biased"] if not r["flagged_any"]]
    alarms_rows = [r for r in groups["accurate"] if r["flagged_any"]]
    return {
        "runs": len(ok),
        "diverged": len(rows) - len(ok),
        "biased": len(groups["biased"]),
        "accurate": len(groups["accurate"]),
        "between": len(groups["between"]),
        "power_bias": rate(groups["biased"], "flagged"),
        "power_any": rate(groups["biased"], "flagged_any"),
        "false_alarms_bias": rate(groups["accurate"], "flagged"),
        "false_alarms_any": rate(groups["accurate"], "flagged_any"),
        "curve": curve,
        "missed": [(r["target"], r["kernel"], r["run"], r["scale"], r["mean"]) for r in misses],
        "false_alarm_runs": [
            (r["target"], r["kernel"], r["run"], r["scale"], r["findings"]) for r in alarms_rows
        ],
    }


def plot(summary: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = summary["curve"]
    labels = [
        f"{c['from']:.0%}–{c['to']:.0%}" if math.isfinite(c["to"]) else f"≥ {c['from']:.0%}"
        for c in curve
    ]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    x = np.arange(len(curve))
    ax.bar(x - 0.2, [c["flagged"] for c in curve], 0.4, color="#4a7ab5", label="bias check")
    ax.bar(x + 0.2, [c["flagged_any"] for c in curve], 0.4, color="#9bb7dc",
           label="whole verdict (bias, mixing, run-away)")  # fmt: skip
    for i, c in enumerate(curve):
        top = max(c["flagged"], c["flagged_any"])
        ax.text(i, top + 0.02, f"n={c['runs']}", ha="center", fontsize=8)
    ax.axhline(0.9, color="#1a7f37", lw=1, ls="--", label="90 % (errors ≥ 10 %)")
    ax.axhline(0.05, color="#c0392b", lw=1, ls="--", label="5 % (errors ≤ 3 %)")
    ax.set_xticks(range(len(curve)), labels, rotation=30, ha="right")
    ax.set_ylim(0, 1.1)
    ax.set_xlabel("largest spread error over the run's coordinates (sd or half-IQR)")
    ax.set_ylabel("runs flagged")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=4, help="runs of 4 chains per case")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--targets", default=None, help="comma-separated target names")
    p.add_argument("--quick", action="store_true", help="two targets, 2 runs each")
    p.add_argument("--rows", default=None,
                   help="a JSON-lines file the runs are appended to as they are made; kernels "
                   "already in it are not run again (an interrupted study goes on)")  # fmt: skip
    p.add_argument("--out", default=None, help="write the rows and summary (JSON)")
    p.add_argument("--plot", default=None, help="write the power curve (PNG)")
    args = p.parse_args()
    names = list(TARGETS) if args.targets is None else args.targets.split(",")
    runs = args.runs
    if args.quick:
        names, runs = ["gaussian d=2", "linear regression n=200 B=20"], 2
    rows: list[dict[str, Any]] = []
    if args.rows and os.path.exists(args.rows):
        with open(args.rows) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    done = {(r["target"], r["kernel"]) for r in rows}
    sink = open(args.rows, "a") if args.rows else None  # noqa: SIM115
    try:
        for name in names:
            rows += run_case(name, runs, args.seed, done, sink)
    finally:
        if sink is not None:
            sink.close()
    summary = summarise(rows)
    print(json.dumps({k: v for k, v in summary.items() if k != "curve"}, indent=1))
    for c in summary["curve"]:
        print(
            f"  error {c['from']:.3f}–{c['to']:.3f}: bias {c['flagged']:.2f}, whole verdict "
            f"{c['flagged_any']:.2f} of {c['runs']}"
        )
    if args.out:
        with open(args.out, "w") as f:
            settings = {
                "steps": STEPS, "burn_in": BURN_IN, "thin": THIN, "chains": CHAINS,
                "runs": runs, "seed": args.seed,
            }  # fmt: skip
            kept = [
                {k: round(v, 5) if isinstance(v, float) else v for k, v in r.items()
                 if k != "findings"}
                for r in rows
            ]  # fmt: skip
            json.dump({"summary": summary, "settings": settings, "rows": kept}, f)
    if args.plot:
        plot(summary, args.plot)


if __name__ == "__main__":
    main()

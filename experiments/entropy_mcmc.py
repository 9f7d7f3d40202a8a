"""Entropy-MCMC (Li & Zhang 2024, Sec. 6): does the guide θ_a sit in flatter regions, and does
that buy anything measurable?

For every method and seed one run samples the posterior of the configured model: SGHMC with a
constant step, cyclical SGHMC, Entropy-MCMC around SGHMC (joint variant, Eq. 4–5) and its
cyclical form, all with the same (ℓ, β), epochs and number of draws. The Bayesian model average
is scored on the test split (accuracy, NLL, ECE) and against out-of-distribution inputs (AUROC of
the predictive entropy, Sec. 6.5); for Entropy-MCMC the BMA over θ, over θ_a and over both (the
paper's choice, App. E.3). Flatness of the last draws of θ and θ_a: the mean increase of the
training NLL per example under random weight perturbations of fixed relative norm,

    Δ(ρ) = E_u[L(θ + ρ‖θ‖·u/‖u‖)] − L(θ),   u ~ N(0, I),

averaged over a few directions u (the random-direction interpolation of Sec. 6.3, Eq. 10, at
fixed distances).

    python experiments/entropy_mcmc.py [--quick | --smoke] [--fresh | --page-only] [--config FILE]

Settings are fixed in ``experiments/entropy_mcmc.toml`` before the run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from _harness import (
    Paired,
    Progress,
    Results,
    bma_metrics,
    command_line,
    compile_model,
    environment,
    finished,
    load_config,
    main_guard,
    mean_se,
    parse_args,
    pm,
    provenance,
    results_path,
    suffix,
    write_page,
)
from _harness import paired as paired_by_seed

NAME = "entropy_mcmc"
LABELS = {
    "sghmc": "SGHMC",
    "csghmc": "cyclical SGHMC",
    "emcmc": "Entropy-MCMC",
    "cemcmc": "cyclical Entropy-MCMC",
}
ENTROPY = ("emcmc", "cemcmc")
BASELINE = {"emcmc": "sghmc", "cemcmc": "csghmc"}


def build_target(config: dict[str, Any]) -> Any:
    """The compiled model of ``[model]``: its name, options, temperature and minibatch size."""
    return compile_model(config["model"], temperature=config["model"].get("temperature", 1.0))


def schedule(config: dict[str, Any], target: Any) -> dict[str, int]:
    """Steps, cycle length, and burn-in/thin of the constant and cyclical methods (in steps)."""
    s = config["sampler"]
    epoch = target.num_batches
    steps = s["epochs"] * epoch
    cycle = s["cycle_length"] * epoch
    cycles = max(steps // cycle, 1)
    draws = cycles * s["draws_per_cycle"]
    sampling_steps = cycle - math.ceil(round(s["exploration"] * cycle, 9))
    burn_in = int(steps * s["burn_in_fraction"])
    return {
        "steps": steps,
        "cycle": cycle,
        "draws": draws,
        "cyclical_thin": max(sampling_steps // s["draws_per_cycle"], 1),
        "constant_burn_in": burn_in,
        "constant_thin": max((steps - burn_in) // draws, 1),
    }


def make_kernel(config: dict[str, Any], method: str, plan: dict[str, int]) -> Any:
    from bdl.kernels import cyclical, entropy, sghmc

    s = config["sampler"]
    base = {"learning_rate": s["learning_rate"], "momentum": s["momentum"]}
    inner = entropy("sghmc", eta=s["eta"], **base) if method in ENTROPY else sghmc(**base)
    if method in ("csghmc", "cemcmc"):
        return cyclical(inner, cycle_length=plan["cycle"], exploration=s["exploration"])
    return inner


def ood_inputs(config: dict[str, Any], target: Any, seed: int) -> Any:
    """``[ood]``: Gaussian noise with the training inputs' per-feature mean and standard
    deviation (``kind = "noise"``)."""
    import jax
    import jax.numpy as jnp

    o = config["ood"]
    if o["kind"] != "noise":
        raise SystemExit(f"[ood] kind must be 'noise'; got {o['kind']!r}.")
    x = jnp.asarray(target.x_train)
    mean, sd = jnp.mean(x, axis=0), jnp.std(x, axis=0)
    z = jax.random.normal(jax.random.key(10_000 + seed), (o["size"], *x.shape[1:]), x.dtype)
    return mean + sd * z


def bma_scores(target: Any, positions: Any, x_ood: Any) -> dict[str, float]:
    """BMA accuracy, NLL, ECE on the test split and the OOD AUROC of the predictive entropy."""
    import bdl

    out = bma_metrics(target, positions)
    probs = target.predict(positions, target.x_test)
    probs_ood = target.predict(positions, x_ood)
    out["ood_auroc"] = float(bdl.metrics.ood_auroc(probs, probs_ood, score="entropy"))
    return out


def flatness(config: dict[str, Any], target: Any, positions: Any, seed: int) -> dict[str, Any]:
    """Training NLL per example L(θ) and Δ(ρ) for each radius ρ, averaged over the draws and
    directions; ``positions`` has one leading draw axis."""
    import jax
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree

    f = config["flatness"]
    n = min(f["train_examples"], target.n)
    x, y = jnp.asarray(target.x_train[:n]), jnp.asarray(target.y_train[:n])
    radii = jnp.asarray(f["radii"], jnp.float32)
    _, unravel = ravel_pytree(jax.tree.map(lambda a: a[0], positions))

    def loss(flat: jax.Array) -> jax.Array:
        return -jnp.mean(target.log_likelihood(unravel(flat), x, y))

    def one(position: Any, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        flat, _ = ravel_pytree(position)
        base = loss(flat)
        u = jax.random.normal(key, (f["directions"], flat.size), flat.dtype)
        u = u / jnp.linalg.norm(u, axis=1, keepdims=True)
        step = radii[:, None, None] * jnp.linalg.norm(flat) * u[None]  # (radii, dirs, d)
        moved = jax.lax.map(jax.vmap(loss), flat + step)
        return base, jnp.mean(moved, axis=1) - base

    keys = jax.random.split(jax.random.key(20_000 + seed), jax.tree.leaves(positions)[0].shape[0])
    base, rise = jax.jit(jax.vmap(one))(positions, keys)
    return {"train_nll": float(jnp.mean(base)), "rise": [float(v) for v in jnp.mean(rise, 0)]}


def run_unit(config: dict[str, Any], target: Any, method: str, seed: int) -> dict[str, Any]:
    import jax
    import numpy as np

    import bdl

    plan = schedule(config, target)
    cyclic = method in ("csghmc", "cemcmc")
    start = time.perf_counter()
    samples = finished(
        bdl.sample(
            target,
            make_kernel(config, method, plan),
            num_steps=plan["steps"],
            burn_in=0 if cyclic else plan["constant_burn_in"],
            thin=plan["cyclical_thin"] if cyclic else plan["constant_thin"],
            num_chains=config["sampler"]["num_chains"],
            seed=seed,
            progress=False,
        )
    )
    seconds = time.perf_counter() - start
    healthy = samples.healthy_chains
    if healthy.size == 0:
        return {"diverged": True, "seconds": seconds}

    def flat(tree: Any) -> Any:
        return jax.tree.map(lambda a: np.asarray(a)[healthy].reshape(-1, *a.shape[2:]), tree)

    theta = flat(samples.positions)
    x_ood = ood_inputs(config, target, seed)
    last = config["flatness"]["draws"]
    tail = lambda tree: jax.tree.map(lambda a: a[-last:], tree)  # noqa: E731
    record: dict[str, Any] = {
        "draws": int(jax.tree.leaves(theta)[0].shape[0]),
        "dim": int(target.dim),
        "diverged_chains": int(np.asarray(samples.diverged).sum()),
        "seconds": seconds,
        "bma": {"theta": bma_scores(target, theta, x_ood)},
        "flatness": {"theta": flatness(config, target, tail(theta), seed)},
    }
    if method in ENTROPY:
        guide = flat(samples.extra["guide"])
        both = jax.tree.map(lambda a, b: np.concatenate([a, b]), theta, guide)
        record["bma"]["guide"] = bma_scores(target, guide, x_ood)
        record["bma"]["both"] = bma_scores(target, both, x_ood)
        record["flatness"]["guide"] = flatness(config, target, tail(guide), seed)
        record["guide_distance"] = float(
            np.mean(
                np.sqrt(
                    sum(
                        np.sum((np.asarray(a) - np.asarray(b)) ** 2, axis=tuple(range(1, a.ndim)))
                        for a, b in zip(jax.tree.leaves(theta), jax.tree.leaves(guide), strict=True)
                    )
                )
            )
        )
    return record


def run(argv: Sequence[str] | None = None) -> int:
    args = parse_args(NAME, __doc__.split("\n\n")[0], argv)
    config = load_config(args.config, args.quick, args.smoke)
    e = config["experiment"]
    unknown = [m for m in e["methods"] if m not in LABELS]
    if unknown:
        raise SystemExit(f"[experiment] methods: unknown {unknown}; choose from {list(LABELS)}.")
    results = Results(results_path(args, NAME), config, fresh=args.fresh, create=not args.page_only)
    units = [(method, seed) for method in e["methods"] for seed in e["seeds"]]
    progress = Progress(len(units))
    target = None
    for method, seed in [] if args.page_only else units:
        key = f"{method}/{seed}"
        if key in results:
            progress.step(key, skipped=True)
            continue
        target = target if target is not None else build_target(config)
        record = run_unit(config, target, method, seed)
        results.add(key, {"method": method, "seed": seed, **record})
        progress.step(f"{key}: {summary(record)}")
    records = page_records(config, results.records)
    figure = args.pages / "img" / f"{NAME}{suffix(args)}.png"
    plot(config, records, figure)
    write_page(args, NAME, page(args, config, records, figure.name))
    return 0


def page_records(config: dict[str, Any], records: dict[str, dict[str, Any]]) -> list[dict]:
    """The records the page shows: every record of the results file."""
    return list(records.values())


def summary(record: dict) -> str:
    if record.get("diverged"):
        return "all chains diverged"
    b = record["bma"].get("both", record["bma"]["theta"])
    return (
        f"acc {b['accuracy']:.3f}, NLL {b['nll']:.3f}, OOD AUROC {b['ood_auroc']:.3f}, "
        f"{record['seconds']:.0f} s"
    )


def rows(records: list[dict], method: str) -> list[dict]:
    return [r for r in records if r["method"] == method and not r.get("diverged")]


def headline(record: dict) -> dict:
    """The method's own BMA: θ for SGHMC, θ and θ_a together for Entropy-MCMC (App. E.3)."""
    return record["bma"].get("both", record["bma"]["theta"])


def paired(records: list[dict], a: Any, b: Any) -> Paired:
    """Mean ± se over seeds of a(r) − b(r') for the seeds both have (paired by seed); a, b:
    (method, getter)."""
    (ma, ga), (mb, gb) = a, b
    return paired_by_seed(
        {r["seed"]: ga(r) for r in rows(records, ma)},
        {r["seed"]: gb(r) for r in rows(records, mb)},
    )


def verdict(config: dict, records: list[dict]) -> str:
    """Flatter: Δ at the middle radius lower for θ_a than for θ of the same run, and lower than
    for θ of the matching SGHMC run, beyond 2 se (paired over seeds). Buys something: the
    Entropy-MCMC BMA beats its SGHMC counterpart in NLL, accuracy or OOD AUROC beyond 2 se."""
    radii = config["flatness"]["radii"]
    mid = len(radii) // 2
    methods = [m for m in ENTROPY if m in config["experiment"]["methods"]]
    flat_claims, gain_claims, parts = [], [], []
    for m in methods:
        if not rows(records, m):
            continue
        own = paired(
            records,
            (m, lambda r: r["flatness"]["guide"]["rise"][mid]),
            (m, lambda r: r["flatness"]["theta"]["rise"][mid]),
        )
        flat = own.side() < 0
        text = f"{LABELS[m]}: Δ(ρ = {radii[mid]:g}) of θ_a − θ = {own.text()}" + (
            " (flatter)" if flat else " (not flatter beyond 2 se)"
        )
        base = BASELINE[m]
        gains, losses = [], []
        if rows(records, base):
            vs = paired(
                records,
                (m, lambda r: r["flatness"]["guide"]["rise"][mid]),
                (base, lambda r: r["flatness"]["theta"]["rise"][mid]),
            )
            flat = flat and vs.side() < 0
            text += f", θ_a − {LABELS[base]} θ = {vs.text()}"
            for metric, sign in (("nll", -1), ("accuracy", 1), ("ood_auroc", 1)):
                d = paired(
                    records,
                    (m, lambda r, k=metric: headline(r)[k]),
                    (base, lambda r, k=metric: headline(r)[k]),
                )
                side = d.side()
                if side:
                    (gains if side == sign else losses).append(f"{metric} {d.text()}")
            text += "; better than " + LABELS[base] + " in " + (", ".join(gains) or "nothing")
            text += ", worse in " + (", ".join(losses) or "nothing")
        flat_claims.append(flat)
        gain_claims.append(bool(gains))
        parts.append(text)
    if not parts:
        return "**not enough runs** for a verdict."
    flat_all, gain_all = all(flat_claims), all(gain_claims)
    some = any(flat_claims) or any(gain_claims)
    word = "reproduced" if flat_all and gain_all else "partly" if some else "not reproduced"
    return (
        f"**{word}** at this scale — θ_a "
        + ("is" if flat_all else "is not consistently")
        + " flatter, and "
        + ("it buys" if gain_all else "it does not consistently buy")
        + " a measurable gain: "
        + "; ".join(parts)
        + " (paired differences over seeds, mean ± se)."
    )


def plot(config: dict, records: list[dict], path: Any) -> None:
    """Δ(ρ) of θ and θ_a per method, and the BMA NLL and OOD AUROC per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = config["experiment"]["methods"]
    radii = config["flatness"]["radii"]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for i, m in enumerate(methods):
        rs = rows(records, m)
        for which, style in (("theta", "-"), ("guide", "--")):
            stats = [
                mean_se(r["flatness"][which]["rise"][j] for r in rs if which in r["flatness"])
                for j in range(len(radii))
            ]
            if not rs or math.isnan(stats[0][0]):
                continue
            ms = [s[0] for s in stats]
            ses = [0.0 if math.isnan(s[1]) else s[1] for s in stats]
            name = LABELS[m] + (" θ_a" if which == "guide" else " θ")
            axes[0].errorbar(radii, ms, yerr=ses, ls=style, color=f"C{i}", marker="o", ms=3,
                             capsize=2, label=name)  # fmt: skip
    axes[0].set_xscale("log")
    axes[0].set_xlabel("relative perturbation ρ")
    axes[0].set_ylabel("training NLL increase Δ(ρ)")
    axes[0].legend(fontsize=6)
    for ax, metric, label in ((axes[1], "nll", "test NLL"), (axes[2], "ood_auroc", "OOD AUROC")):
        names, ms, ses = [], [], []
        for m in methods:
            for which in ("theta", "guide", "both"):
                vals = [r["bma"][which][metric] for r in rows(records, m) if which in r["bma"]]
                if not vals:
                    continue
                mean, se = mean_se(vals)
                names.append(LABELS[m].replace("cyclical ", "c") + {"theta": "", "guide": " θ_a",
                             "both": " θ+θ_a"}[which])  # fmt: skip
                ms.append(mean)
                ses.append(0.0 if math.isnan(se) else se)
        ax.bar(range(len(ms)), ms, yerr=ses, capsize=2, color="C7")
        ax.set_xticks(range(len(ms)), names, rotation=60, ha="right", fontsize=6)
        ax.set_ylabel(label)
        if ms:
            lo, hi = min(ms), max(ms)
            ax.set_ylim(lo - (hi - lo + 1e-3), hi + (hi - lo + 1e-3))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def page(args: Any, config: dict, records: list[dict], figure: str) -> str:
    e, s, o, f, m = (config[k] for k in ("experiment", "sampler", "ood", "flatness", "model"))
    total_min = sum(r.get("seconds", 0.0) for r in records) / 60
    title = " (quick run)" if args.quick else " (smoke run)" if args.smoke else ""
    code = provenance(records, command_line(NAME, args, fresh=True))
    lines = [
        "# Entropy-MCMC" + title,
        "",
        *code.header(),
        "Li & Zhang (2024, Sec. 6) report that Entropy-MCMC, which couples θ to a guiding "
        "variable θ_a drawn from the posterior smoothed by N(0, ηT·I), samples from flatter "
        "basins and thereby improves accuracy, calibration and OOD detection over SG-MCMC. This "
        "experiment measures the flatness of θ and θ_a and the BMA's test metrics against SGHMC "
        "and cyclical SGHMC with the same step sizes, epochs and number of draws.",
        "",
        f"**Verdict:** {code.verdict(verdict(config, records))}",
        "",
        "## Setup",
        "",
        f"- Model: `{m['name']}` (options {m.get('options', {})}), minibatch {m['batch_size']}, "
        f"T = {m.get('temperature', 1.0):g}.",
        f"- Samplers: SGHMC in the (ℓ, β) form, ℓ = {s['learning_rate']}, β = {s['momentum']}; "
        f"Entropy-MCMC (`entropy('sghmc', eta={s['eta']:g})`, joint variant); the cyclical "
        f"forms with cosine cycles of {s['cycle_length']} epochs, the first "
        f"{s['exploration']:.0%} of each at T = 0, {s['draws_per_cycle']} draws from each "
        f"sampling stage; the constant-step forms discard the first "
        f"{s['burn_in_fraction']:.0%} and keep the same number of draws evenly spaced. "
        f"{s['epochs']} epochs, {s['num_chains']} chain(s) per seed.",
        "- BMA: over θ for SGHMC; for Entropy-MCMC over θ, over θ_a, and over both (the "
        "paper's, App. E.3; twice the draws). Comparisons use the method's own BMA.",
        f"- OOD set: {o['size']} Gaussian-noise inputs with the training inputs' per-feature "
        "mean and standard deviation; AUROC of the BMA's predictive entropy (1 = perfect).",
        f"- Flatness: Δ(ρ) = mean training NLL per example (first {f['train_examples']} "
        f"training examples) at θ + ρ‖θ‖u/‖u‖ minus at θ, averaged over {f['directions']} "
        f"directions u ~ N(0, I) and the last {f['draws']} draws; ρ ∈ {f['radii']}.",
        f"- Seeds {e['seeds']}; tables give mean ± standard error over seeds; differences "
        "between methods are paired by seed (mean ± se of the per-seed differences).",
        f"- Command: `{command_line(NAME, args)}`; {total_min:.1f} min of runs; "
        f"{environment(args.page_only, records)}.",
        f"- Code: {code.code}.",
        "",
        "## Results",
        "",
        f"![flatness, NLL and OOD AUROC](img/{figure})",
        "",
        "### Bayesian model average",
        "",
        "| method | draws | accuracy | NLL | ECE | OOD AUROC |",
        "|---|---|---|---|---|---|",
    ]
    for method in e["methods"]:
        rs = rows(records, method)
        for which in ("theta", "guide", "both"):
            vals = [r["bma"][which] for r in rs if which in r["bma"]]
            if not vals:
                continue
            label = LABELS[method] + {"theta": ", θ", "guide": ", θ_a", "both": ", θ + θ_a"}[which]
            draws = sum(r["draws"] for r in rs) // len(rs) * (2 if which == "both" else 1)
            lines.append(
                f"| {label} | {draws} | {pm(v['accuracy'] for v in vals)} | "
                f"{pm(v['nll'] for v in vals)} | {pm(v['ece'] for v in vals)} | "
                f"{pm(v['ood_auroc'] for v in vals)} |"
            )
    radii = f["radii"]
    lines += [
        "",
        "### Flatness",
        "",
        "| method | training NLL L(θ) | " + " | ".join(f"Δ(ρ = {r:g})" for r in radii) + " |",
        "|---|---|" + "---|" * len(radii),
    ]
    for method in e["methods"]:
        rs = rows(records, method)
        for which in ("theta", "guide"):
            vals = [r["flatness"][which] for r in rs if which in r["flatness"]]
            if not vals:
                continue
            label = LABELS[method] + (", θ_a" if which == "guide" else ", θ")
            cells = " | ".join(pm((v["rise"][j] for v in vals), 4) for j in range(len(radii)))
            lines.append(f"| {label} | {pm(v['train_nll'] for v in vals)} | {cells} |")
    dist = [(mm, [r["guide_distance"] for r in rows(records, mm) if "guide_distance" in r])
            for mm in e["methods"]]  # fmt: skip
    dist = [(mm, d) for mm, d in dist if d]
    if dist:
        lines += [
            "",
            "Mean distance ‖θ − θ_a‖ of the kept draws: "
            + "; ".join(f"{LABELS[mm]} {pm(d)}" for mm, d in dist)
            + f" (the smoothing scale √(ηT·d) is {smoothing(config, records):.3f}).",
        ]
    diverged = sum(r.get("diverged_chains", 0) for r in records)
    lines += [
        "",
        f"Diverged chains: {diverged}. Δ compares the curvature around each point; θ_a and θ "
        "differ in L itself too, so read Δ together with the L column.",
        "",
        "## The paper's setting",
        "",
        "`experiments/entropy_mcmc_cifar10.toml` holds the CIFAR-10 configuration (its comments "
        "give the paper's values and where this one differs); the expected wall time per device "
        "is in [full-scale runs](full-scale.md).",
        "",
    ]
    return "\n".join(lines)


def smoothing(config: dict, records: list[dict]) -> float:
    """√(ηT·d): the root-mean-square ‖θ − θ_a‖ at equilibrium, d = the number of parameters."""
    dim = next((r["dim"] for r in records if "dim" in r), None)
    if dim is None:
        return math.nan
    return math.sqrt(config["sampler"]["eta"] * config["model"].get("temperature", 1.0) * dim)


if __name__ == "__main__":
    main_guard(run)

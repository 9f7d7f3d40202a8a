"""Cold posteriors (Wenzel et al. 2020, Fig. 1 and Sec. 5): does T = 1 lose to a cold T?

For every augmentation setting, temperature T and seed, the SG-MCMC posterior of the model is
sampled with the paper's kernel (``wenzel``: symplectic-Euler Langevin, layerwise
preconditioning, cosine cycles with one draw per cycle) and its Bayesian model average is scored
on the test split: accuracy, NLL and ECE. The same for an SGD point estimate (``optax.sgd`` with
momentum on the mean minibatch loss, the same epochs). Every sampling run also reports its
kinetic temperatures (share of the per-layer T̂_K inside their 99 % χ² band, ideally ≈ 0.99) and
its configurational temperature T̂_C / T (ideally ≈ 1): the evidence that the run simulated the
posterior at T accurately (App. I).

    python experiments/cold_posterior.py [--quick | --smoke] [--fresh | --page-only] [--config FILE]

Settings are fixed in ``experiments/cold_posterior.toml`` before the run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from _harness import (
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
    paired,
    parse_args,
    pm,
    provenance,
    results_path,
    suffix,
    write_page,
)

NAME = "cold_posterior"


def build_target(config: dict[str, Any], augmentation: str, temperature: float | None) -> Any:
    """The compiled model for one augmentation setting at temperature T (None: the file's)."""
    return compile_model(config["model"], config["augmentation"][augmentation], temperature)


def sampling_run(config: dict[str, Any], target: Any, temperature: float, seed: int) -> dict:
    import jax
    import numpy as np

    import bdl
    from bdl.diagnostics.temperatures import temperature_report

    s = config["sampler"]
    epoch = target.num_batches
    kernel = bdl.kernels.get(
        "wenzel",
        learning_rate=s["learning_rate"],
        momentum=s["momentum"],
        cycle_length=s["cycle_length"],
        sampling_start=s["sampling_start"],
        collect_momentum=True,
    )
    start = time.perf_counter()
    samples = finished(
        bdl.sample(
            target,
            kernel,
            num_steps=s["epochs"] * epoch,
            num_chains=s["num_chains"],
            seed=seed,
            progress=False,
        )
    )
    seconds = time.perf_counter() - start
    healthy = samples.healthy_chains
    if healthy.size == 0:
        return {"diverged": True, "seconds": seconds}
    keep = lambda tree: jax.tree.map(lambda a: np.asarray(a)[healthy], tree)  # noqa: E731
    positions = keep(samples.positions)
    flat = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), positions)
    grads = jax.vmap(lambda p: target.energy_and_grad(p)[1])(flat)
    report = temperature_report(
        momentum=jax.tree.map(
            lambda a: a.reshape(-1, *a.shape[2:]), keep(samples.extra["momentum"])
        ),
        mass=jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), keep(samples.extra["mass"])),
        position=flat,
        grad=jax.device_get(grads),
        temperature=temperature,
        batch_ndim=1,
    )
    return {
        **bma_metrics(target, flat),
        "draws": int(jax.tree.leaves(flat)[0].shape[0]),
        "diverged_chains": int(np.asarray(samples.diverged).sum()),
        "kinetic_inside": report.fraction_inside,
        "configurational_ratio": report.mean_configurational / temperature,
        "seconds": seconds,
    }


def sgd_run(config: dict[str, Any], target: Any, seed: int) -> dict:
    import jax
    import optax

    from bdl.optimise import minimise

    g = config["sgd"]
    optimizer = optax.sgd(g["learning_rate"], momentum=g["momentum"])
    key_init, key_run = jax.random.split(jax.random.key(seed))
    start_position = jax.tree.map(lambda a: a[0], target.init_positions(key_init, 1))
    begin = time.perf_counter()
    steps = g["epochs"] * target.num_batches
    params = jax.jit(lambda p, k: minimise(target, optimizer, p, k, steps))(start_position, key_run)
    seconds = time.perf_counter() - begin
    return {**bma_metrics(target, jax.tree.map(lambda a: a[None], params)), "seconds": seconds}


def run(argv: Sequence[str] | None = None) -> int:
    args = parse_args(NAME, __doc__.split("\n\n")[0], argv)
    config = load_config(args.config, args.quick, args.smoke)
    e = config["experiment"]
    results = Results(results_path(args, NAME), config, fresh=args.fresh, create=not args.page_only)
    units = [
        (aug, t, seed)
        for aug in e["augmentations"]
        for t in [*e["temperatures"], "sgd"]
        for seed in e["seeds"]
    ]
    progress = Progress(len(units))
    targets: dict[tuple[str, Any], Any] = {}
    for aug, t, seed in [] if args.page_only else units:
        key = f"{aug}/{t}/{seed}"
        if key in results:
            progress.step(key, skipped=True)
            continue
        temperature = 1.0 if t == "sgd" else float(t)
        if (aug, temperature) not in targets:
            targets[(aug, temperature)] = build_target(config, aug, temperature)
        target = targets[(aug, temperature)]
        if t == "sgd":
            record = sgd_run(config, target, seed)
        else:
            record = sampling_run(config, target, temperature, seed)
        results.add(key, {"augmentation": aug, "temperature": t, "seed": seed, **record})
        progress.step(f"{key}: {summary(record)}")
    records = page_records(config, results.records)
    figure = figure_path(args)
    plot(config, records, figure)
    write_page(args, NAME, page(args, config, records, figure.name))
    return 0


def page_records(config: dict[str, Any], records: dict[str, dict[str, Any]]) -> list[dict]:
    """The records the page shows: every record of the results file."""
    return list(records.values())


def figure_path(args: Any) -> Any:
    return args.pages / "img" / f"{NAME}{suffix(args)}.png"


def plot(config: dict, records: list[dict], path: Any) -> None:
    """Accuracy and NLL against T (log scale) per augmentation, SGD as a horizontal line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    e = config["experiment"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, metric in zip(axes, ("accuracy", "nll"), strict=True):
        for i, aug in enumerate(e["augmentations"]):
            rows = [
                (
                    t,
                    mean_se(
                        r[metric]
                        for r in records
                        if r["augmentation"] == aug
                        and r["temperature"] == t
                        and not r.get("diverged")
                    ),
                )
                for t in e["temperatures"]
            ]
            rows = [(t, m, se) for t, (m, se) in rows if not math.isnan(m)]
            if rows:
                ts, ms, ses = zip(*rows, strict=True)
                ses = [0.0 if math.isnan(v) else v for v in ses]
                ax.errorbar(ts, ms, yerr=ses, marker="o", ms=3, capsize=2, label=f"SG-MCMC, {aug}")
            sgd, _ = mean_se(
                r[metric] for r in records if r["augmentation"] == aug and r["temperature"] == "sgd"
            )
            if not math.isnan(sgd):
                ax.axhline(sgd, color=f"C{i}", ls="--", lw=1, label=f"SGD, {aug}")
        ax.set_xscale("log")
        ax.set_xlabel("temperature T")
        ax.set_ylabel("test " + ("accuracy" if metric == "accuracy" else "NLL"))
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary(record: dict) -> str:
    if record.get("diverged"):
        return "all chains diverged"
    return f"acc {record['accuracy']:.3f}, NLL {record['nll']:.3f}, {record['seconds']:.0f} s"


def nll_by_seed(records: list[dict], aug: str, t: Any) -> dict[int, float]:
    """Test NLL per seed of the runs at augmentation ``aug`` and temperature ``t`` (``"sgd"``:
    the SGD runs) that did not diverge."""
    return {
        r["seed"]: r["nll"]
        for r in records
        if r["augmentation"] == aug and r["temperature"] == t and not r.get("diverged")
    }


def lowest(records: list[dict], aug: str, temps: list[Any]) -> tuple[Any, dict[int, float]] | None:
    """The temperature of ``temps`` whose runs have the lowest mean NLL, and its NLL per seed."""
    runs = [(t, v) for t in temps if (v := nll_by_seed(records, aug, t))]
    if not runs:
        return None
    return min(runs, key=lambda run: mean_se(run[1].values())[0])


def mean_of(values: dict[int, float]) -> float:
    """The mean of the values per seed."""
    return mean_se(values.values())[0]


def verdict(config: dict, records: list[dict]) -> str:
    """One sentence: is T = 1 worse than the best cold T (the lowest mean NLL) by more than two
    standard errors of the differences paired by seed? And SGD against each setting's
    posterior of lowest NLL, paired likewise."""
    e = config["experiment"]
    temps = [t for t in e["temperatures"] if t < 1.0]
    sentences, sgd_parts = [], []
    for aug in e["augmentations"]:
        warm = nll_by_seed(records, aug, 1.0)
        cold = lowest(records, aug, temps)
        if not warm or cold is None:
            sentences.append(f"{aug}: not enough runs")
        else:
            best_t, best = cold
            gap = paired(warm, best)
            numbers = (
                f"NLL {mean_of(warm):.3f} vs {mean_of(best):.3f}, gap {gap.text()} over "
                f"{gap.n} seeds"
            )
            if gap.side() > 0:
                sentences.append(f"{aug}: T = 1 loses to T = {best_t:g} ({numbers})")
            else:
                sentences.append(
                    f"{aug}: no cold posterior effect beyond two standard errors (T = 1 against "
                    f"the best cold T = {best_t:g}: {numbers})"
                )
        sgd = nll_by_seed(records, aug, "sgd")
        posterior = lowest(records, aug, e["temperatures"])
        if sgd and posterior is not None:
            t, nll = posterior
            d = paired(sgd, nll)
            side = d.side()
            word = "beats it" if side < 0 else "is worse" if side > 0 else "does not differ"
            sgd_parts.append(
                f"{aug}: SGD {word}{' beyond 2 se' if side == 0 else ''} (NLL "
                f"{mean_of(sgd):.3f} vs {mean_of(nll):.3f} at T = {t:g}, difference {d.text()})"
            )
    effect = [("loses" in s) for s in sentences]
    word = "reproduced" if all(effect) else "partly" if any(effect) else "not reproduced"
    sgd_text = (
        " SGD against each setting's posterior of lowest NLL: " + "; ".join(sgd_parts) + "."
        if sgd_parts
        else ""
    )
    return (
        f"**{word}** at this scale — "
        + "; ".join(sentences)
        + " (differences paired by seed, mean ± se)."
        + sgd_text
        + accuracy_caveat(records)
    )


def accuracy_caveat(records: list[dict]) -> str:
    """A sentence naming the temperatures whose runs the diagnostics show were not simulated
    accurately: kinetic temperatures inside their 99 % band for under half of the layers and
    draws, or a configurational temperature off T by more than 50 % (Wenzel et al. App. I)."""
    off = sorted(
        {
            r["temperature"]
            for r in records
            if "kinetic_inside" in r
            and (r["kinetic_inside"] < 0.5 or abs(r["configurational_ratio"] - 1.0) > 0.5)
        },
        key=float,
    )
    if not off:
        return ""
    shown = ", ".join(f"{float(t):g}" for t in off)
    return (
        f" The temperature diagnostics show that the runs at T = {shown} did not simulate the "
        "posterior at their T accurately (see the table), so the comparison is between what the "
        "sampler produced, not between exact tempered posteriors."
    )


def page(args: Any, config: dict, records: list[dict], figure: str) -> str:
    e, s, g = config["experiment"], config["sampler"], config["sgd"]
    total_min = sum(r.get("seconds", 0.0) for r in records) / 60
    code = provenance(records, command_line(NAME, args, fresh=True))
    lines = [
        "# Cold posteriors"
        + (" (quick run)" if args.quick else " (smoke run)" if args.smoke else ""),
        "",
        *code.header(),
        "Wenzel et al. (2020, Fig. 1 and Sec. 5) report that the SG-MCMC posterior of deep "
        "networks predicts better when tempered to T ≪ 1, and discuss data augmentation as one "
        "cause. This experiment samples the posterior at each T with and without augmentation.",
        "",
        f"**Verdict:** {code.verdict(verdict(config, records))}",
        "",
        "## Setup",
        "",
        f"- Model: `{config['model']['name']}` (options {config['model'].get('options', {})}), "
        f"minibatch {config['model']['batch_size']}; augmentation settings "
        + ", ".join(f"`{a}` = {config['augmentation'][a]}" for a in e["augmentations"])
        + ".",
        f"- Sampler: `wenzel` (ℓ = {s['learning_rate']}, β = {s['momentum']}, layerwise "
        f"preconditioner, cosine cycles of {s['cycle_length']} epochs from epoch "
        f"{s['sampling_start']}, one draw per cycle), {s['epochs']} epochs, "
        f"{s['num_chains']} chain(s) per seed.",
        f"- SGD: `optax.sgd({g['learning_rate']}, momentum={g['momentum']})` on the mean "
        f"minibatch loss, {g['epochs']} epochs, T = 1 model.",
        f"- Seeds {e['seeds']}; tables give mean ± standard error over seeds; differences "
        "between settings are paired by seed (mean ± se of the per-seed differences).",
        f"- Command: `{command_line(NAME, args)}`; {total_min:.1f} min of runs; "
        f"{environment(args.page_only, records)}.",
        f"- Code: {code.code}.",
        "",
        "## Results",
        "",
        f"![accuracy and NLL against T](img/{figure})",
        "",
    ]
    for aug in e["augmentations"]:
        lines += [
            f"### Augmentation: `{aug}`",
            "",
            "| T | accuracy | NLL | ECE | T̂_K in 99 % band | T̂_C / T | draws | diverged |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for t in [*e["temperatures"], "sgd"]:
            rs = [
                r
                for r in records
                if r["augmentation"] == aug and r["temperature"] == t and not r.get("diverged")
            ]
            if not rs:
                continue
            label = "SGD" if t == "sgd" else f"{t:g}"
            kin = pm((r["kinetic_inside"] for r in rs if "kinetic_inside" in r), 2)
            conf = pm((r["configurational_ratio"] for r in rs if "configurational_ratio" in r), 2)
            draws = sum(r.get("draws", 1) for r in rs)
            div = sum(r.get("diverged_chains", 0) for r in rs)
            lines.append(
                f"| {label} | {pm(r['accuracy'] for r in rs)} | {pm(r['nll'] for r in rs)} | "
                f"{pm(r['ece'] for r in rs)} | {kin} | {conf} | {draws} | {div} |"
            )
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main_guard(run)

"""Learned samplers on a task they have not seen (Kim et al. 2024, Fig. 1; Gong et al. 2019,
Sec. 5): do L2E, Kinetic-L2E and NNSGHMC with their meta-trained parameters beat SGHMC, cyclical
SGHMC and a deep ensemble of the same size?

For every sampler of the configuration and every seed, one run of several chains samples the
posterior of the configured model, all with the same step, burn-in, thinning and number of draws.
The step is the model file's deep-learning parameterisation (ℓ, β) turned into the SG-MCMC step
h and friction C that every kernel takes (docs/design.md, *The deep-learning parameterisation*),

    h = √(ℓ/n),   C = (1 − β)·√(n/ℓ),

as in meta-training: SGHMC, L2E and Kinetic-L2E run at (h, C); NNSGHMC at step h with its
training hyper-parameters (α, β₀, c); cyclical SGHMC at peak step 2h (mean h over a cosine cycle)
with friction C. A learned kernel's meta-parameters are a file named in the configuration (the
package's shipped file by default), so a retrained family is compared with the previous one by
naming both. The deep ensemble (Lakshminarayanan et al. 2017) has as many members as a sampler
has draws, each trained by Adam from its own initialisation on the minibatch MAP objective Ũ/n.

Scored on the test split, against the number of models in the Bayesian model average (the first
k draws of every chain that did not diverge; the first members of the ensemble): accuracy, NLL
and ECE. Diversity of the draws' predictives p_i: the mean KL over ordered pairs,
(1/S(S−1))·Σ_{i≠j} KL(p_i‖p_j) averaged over inputs, and the disagreement (the share of inputs on
which two draws' top classes differ, over pairs). Mixing: the bulk ESS over chains (split,
rank-normalised; Vehtari et al. 2021) of the log predictive log p(y*|x*, θ) of every test point,
its median over test points, and that per second of sampling (compilation excluded).

    python experiments/learned_samplers.py [--quick | --smoke] [--fresh | --page-only]
        [--config FILE]

Settings are fixed in ``experiments/learned_samplers.toml`` before the run.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _harness import (
    ROOT,
    Paired,
    Progress,
    Results,
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

NAME = "learned_samplers"
KERNELS = ("sghmc", "cyclical", "l2e", "kinetic-l2e", "nnsghmc", "ensemble")
LEARNED = ("l2e", "kinetic-l2e", "nnsghmc")
BASELINES = ("sghmc", "cyclical", "ensemble")
SHIPPED = "shipped"


def build_target(config: dict[str, Any]) -> Any:
    """The compiled model of ``[model]``: its name, options, temperature and minibatch size."""
    return compile_model(config["model"], temperature=config["model"].get("temperature", 1.0))


def check_config(config: dict[str, Any]) -> None:
    """Every sampler named in ``[experiment] samplers`` is a table of ``[samplers]`` with a known
    kernel, and every meta-parameter file named exists; before anything is compiled."""
    tables = config["samplers"]
    for name in config["experiment"]["samplers"]:
        if name not in tables:
            raise SystemExit(
                f"[experiment] samplers: {name!r} has no [samplers.{name}] table; "
                f"the configuration has {sorted(tables)}."
            )
        kernel = tables[name].get("kernel")
        if kernel not in KERNELS:
            raise SystemExit(
                f"[samplers.{name}] kernel = {kernel!r}: choose one of {list(KERNELS)}."
            )
        if kernel in LEARNED:
            meta_params_file(tables[name], name)
        if kernel == "ensemble" and tables[name].get("optimizer") not in ("adam", "sgd"):
            raise SystemExit(
                f"[samplers.{name}] optimizer = {tables[name].get('optimizer')!r}: choose "
                "'adam' or 'sgd'."
            )


def meta_params_file(entry: dict[str, Any], name: str = "?") -> Path:
    """The meta-parameter file of a learned sampler's table: ``meta_params`` (a path relative to
    the repository root), or the package's shipped file for ``"shipped"`` (the default)."""
    from bdl.kernels.elementwise_mlp import shipped_meta_params_path

    given = entry.get("meta_params", SHIPPED)
    path = shipped_meta_params_path(entry["kernel"]) if given == SHIPPED else ROOT / given
    if path is None or not Path(path).is_file():
        raise SystemExit(
            f"[samplers.{name}] meta_params = {given!r}: no such file"
            + (f" ({path})" if path is not None else " (the package ships none)")
            + "; name a file written by bdl.kernels.save_meta_params, relative to the "
            "repository root."
        )
    return Path(path)


def digest(path: Path) -> str:
    """The first 12 hex digits of the file's SHA-256: which parameters a result was run with."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]


def unit_key(config: dict[str, Any], name: str, seed: int) -> str:
    """``<sampler>/<seed>``, and for a learned sampler the digest of its meta-parameter file, so
    that a result run with other parameters (a retrained shipped file) is never reused."""
    entry = config["samplers"][name]
    if entry["kernel"] in LEARNED:
        return f"{name}/{seed}/{digest(meta_params_file(entry, name))}"
    return f"{name}/{seed}"


def plan(config: dict[str, Any], target: Any) -> dict[str, Any]:
    """Steps, burn-in and thinning of the runs (in steps), and the (h, C) of (ℓ, β)."""
    s = config["sampling"]
    epoch = target.num_batches
    thin = max(round(s["thin_epochs"] * epoch), 1)
    burn_in = round(s["burn_in_epochs"] * epoch)
    n, lr, beta = target.n, s["learning_rate"], s["momentum"]
    return {
        "burn_in": burn_in,
        "thin": thin,
        "steps": burn_in + s["draws"] * thin,
        "step_size": math.sqrt(lr / n),
        "friction": (1.0 - beta) * math.sqrt(n / lr),
    }


def make_kernel(entry: dict[str, Any], p: dict[str, Any], name: str) -> tuple[Any, int, int]:
    """The kernel of a sampler's table, its thinning and its multiple of the run's steps
    (``steps_factor``: burn-in, thinning and steps all that many times longer, for a smaller
    ``step_factor``·h over the same time span)."""
    import bdl

    h, c = p["step_size"] * entry.get("step_factor", 1.0), p["friction"]
    kind = entry["kernel"]
    factor = int(entry.get("steps_factor", 1))
    thin = p["thin"] * factor
    if kind == "sghmc":
        return bdl.kernels.get("sghmc", step_size=h, friction=c), thin, factor
    if kind == "cyclical":
        per_cycle, exploration = entry["draws_per_cycle"], entry["exploration"]
        cycle = per_cycle * thin  # as many steps per draw as the constant-step samplers
        kernel = bdl.kernels.get(
            "cyclical",
            base="sghmc",
            step_size=entry["peak_step"] * h,
            friction=c,
            cycle_length=cycle,
            exploration=exploration,
        )
        sampling = cycle - math.ceil(round(exploration * cycle, 9))
        return kernel, max(sampling // per_cycle, 1), factor
    path = str(meta_params_file(entry, name))
    if kind == "nnsghmc":
        kernel = bdl.kernels.get(
            "nnsghmc",
            step_size=h,
            alpha=entry["alpha"],
            beta0=entry["beta0"],
            c=entry["c"],
            meta_params=path,
        )
        return kernel, thin, factor
    return bdl.kernels.get(kind, step_size=h, friction=c, meta_params=path), thin, factor


def per_draw_probs(target: Any, positions: Any) -> Any:
    """Test-split class probabilities of every draw: ``(draws, n, K)``; one leading draw axis."""
    import jax

    x = target.x_test

    def one(position: Any) -> jax.Array:
        return target.predict(jax.tree.map(lambda a: a[None], position), x)

    return jax.lax.map(one, positions)


def sampling_run(
    config: dict[str, Any], target: Any, name: str, seed: int
) -> tuple[Any, float, int]:
    """(probs ``(chains, draws, n, K)`` with NaN for diverged chains, seconds, diverged)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import bdl

    p = plan(config, target)
    s = config["sampling"]
    kernel, thin, factor = make_kernel(config["samplers"][name], p, name)
    burn_in = p["burn_in"] * factor
    draws = s["draws"]
    common = dict(num_chains=s["num_chains"], seed=seed, progress=False)
    # a short call with as many draws (the compiled loop's shape) compiles what the timed call
    # below then reuses: one burn-in step and one step per draw
    finished(bdl.sample(target, kernel, num_steps=1 + draws, burn_in=1, thin=1, **common))
    start = time.perf_counter()
    samples = finished(
        bdl.sample(
            target, kernel, num_steps=p["steps"] * factor, burn_in=burn_in, thin=thin, **common
        )
    )
    seconds = time.perf_counter() - start
    if samples.num_draws < draws:
        raise RuntimeError(f"{name}: {samples.num_draws} draws per chain < {draws}.")
    positions = jax.tree.map(lambda a: a[:, :draws], samples.positions)
    flat = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), positions)
    probs = per_draw_probs(target, flat)
    probs = probs.reshape(s["num_chains"], draws, *probs.shape[1:])
    finite = jnp.all(jnp.isfinite(probs), axis=(1, 2, 3)) & ~jnp.asarray(samples.diverged)
    probs = jnp.where(finite[:, None, None, None], probs, jnp.nan)
    return probs, seconds, int(np.sum(~np.asarray(finite)))


def ensemble_optimizer(entry: dict[str, Any], steps: int) -> Any:
    """``optax.adam`` or ``optax.sgd`` (with ``momentum``) at ``learning_rate``, constant or
    with ``schedule = "cosine"`` decay to zero over the member's ``steps``."""
    import optax

    lr = entry["learning_rate"]
    if entry.get("schedule", "constant") == "cosine":
        lr = optax.cosine_decay_schedule(lr, steps)
    if entry["optimizer"] == "adam":
        return optax.adam(lr)
    return optax.sgd(lr, momentum=entry.get("momentum"))


def ensemble_run(config: dict[str, Any], target: Any, name: str, seed: int) -> tuple[Any, float]:
    """A deep ensemble with as many members as a sampling run has draws: probs
    ``(chains, draws, n, K)`` (member c·draws + k at [c, k]) and the seconds of training
    (compilation excluded). Members are trained ``parallel`` at a time (default: all)."""
    import jax
    import jax.numpy as jnp

    from bdl.optimise import minimise_many

    e, s = config["samplers"][name], config["sampling"]
    members = s["num_chains"] * s["draws"]
    steps = (
        round(e["epochs"] * target.num_batches) if "epochs" in e else plan(config, target)["steps"]
    )
    optimizer = ensemble_optimizer(e, steps)
    key_init, key_run = jax.random.split(jax.random.key(seed))
    starts = target.init_positions(key_init, members)
    keys = jax.random.split(key_run, members)
    group = min(e.get("parallel", members), members)
    train = jax.jit(lambda q, k: minimise_many(target, optimizer, q, k, steps))
    compiled: dict[int, Any] = {}  # by group size: the last group may be shorter
    seconds, probs = 0.0, []
    for lo in range(0, members, group):
        part = jax.tree.map(lambda a, lo=lo: a[lo : lo + group], (starts, keys))
        size = jax.tree.leaves(part)[0].shape[0]
        if size not in compiled:
            compiled[size] = train.lower(*part).compile()
        begin = time.perf_counter()
        trained = jax.block_until_ready(compiled[size](*part))
        seconds += time.perf_counter() - begin
        probs.append(per_draw_probs(target, trained))
    probs = jnp.concatenate(probs)
    return probs.reshape(s["num_chains"], s["draws"], *probs.shape[1:]), seconds


def _summaries(kept: Any, labels: Any) -> tuple[Any, Any, Any, Any]:
    """(curve ``(draws, 3)`` of BMA accuracy, NLL, ECE after k draws of every chain; mean
    pairwise KL; disagreement; log p(y*|x*, θ) ``(chains, draws, n)``) of finite probabilities
    ``(chains, draws, n, K)``; one compiled function."""
    import jax
    import jax.numpy as jnp

    from bdl import metrics

    chains, draws = kept.shape[:2]
    cum = jnp.cumsum(kept, axis=1).sum(axis=0) / (
        chains * jnp.arange(1, draws + 1)[:, None, None]
    )  # (draws, n, K): the BMA of the first k draws of every chain

    def point(bma: jax.Array) -> jax.Array:
        return jnp.stack(
            [
                metrics.accuracy(bma, labels),
                metrics.nll(bma, labels),
                metrics.expected_calibration_error(bma, labels),
            ]
        )

    flat = kept.reshape(chains * draws, *kept.shape[2:])
    top = jax.nn.one_hot(jnp.argmax(flat, -1), flat.shape[-1])  # (S, n, K)
    agree = jnp.einsum("ink,jnk->ij", top, top) / flat.shape[1]
    pairs = flat.shape[0] * (flat.shape[0] - 1)
    true_class = jnp.take_along_axis(kept, labels[None, None, :, None], axis=-1)[..., 0]
    return (
        jax.lax.map(point, cum),
        metrics.mean_pairwise_kl(flat),
        1.0 - (jnp.sum(agree) - flat.shape[0]) / pairs,
        jnp.log(jnp.clip(true_class, 1e-12)),
    )


def scores(probs: Any, labels: Any, independent: bool = False) -> dict[str, Any]:
    """BMA curves, diversity and (unless the draws are ``independent``, an ensemble's members)
    ESS of per-draw probabilities ``(chains, draws, n, K)`` whose diverged chains are NaN (left
    out)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from bdl.diagnostics import ess_bulk

    probs = np.asarray(probs)
    healthy = np.flatnonzero(np.isfinite(probs).reshape(probs.shape[0], -1).all(axis=1))
    if healthy.size == 0:
        return {"healthy_chains": 0}
    kept = jnp.asarray(probs[healthy])
    chains, draws = kept.shape[:2]
    if chains * draws < 2:
        raise ValueError("scores: at least two draws are needed for the pairwise diversity.")
    curve, kl, disagreement, log_p = jax.device_get(jax.jit(_summaries)(kept, jnp.asarray(labels)))
    curve = np.asarray(curve)
    out: dict[str, Any] = {
        "healthy_chains": int(chains),
        "models": [int(chains * k) for k in range(1, draws + 1)],
        "accuracy": curve[:, 0].tolist(),
        "nll": curve[:, 1].tolist(),
        "ece": curve[:, 2].tolist(),
        "pairwise_kl": float(kl),
        "disagreement": float(disagreement),
    }
    if independent:
        return out
    if chains >= 2 and draws >= 4:  # split-R̂-style ESS needs two chains of a few draws
        ess = np.asarray(ess_bulk(np.asarray(log_p)))
        total = chains * draws
        cap = total * math.log10(total)  # ArviZ's ceiling on an estimate
        out["ess_median"] = float(np.median(ess))
        out["ess_at_ceiling"] = float(np.mean(ess >= cap * (1 - 1e-6)))
    return out


def run_unit(config: dict[str, Any], target: Any, name: str, seed: int) -> dict[str, Any]:
    entry = config["samplers"][name]
    record: dict[str, Any] = {"sampler": name, "seed": seed, "kernel": entry["kernel"]}
    if entry["kernel"] in LEARNED:
        path = meta_params_file(entry, name)
        record["meta_params"] = {"file": display_path(path), "sha256": digest(path)}
    if entry["kernel"] == "ensemble":
        probs, seconds = ensemble_run(config, target, name, seed)
        diverged = 0
    else:
        probs, seconds, diverged = sampling_run(config, target, name, seed)
    p = plan(config, target)
    record["step"] = {"step_size": p["step_size"], "friction": p["friction"]}
    record.update({"seconds": seconds, "diverged_chains": diverged})
    record.update(scores(probs, target.y_test, independent=entry["kernel"] == "ensemble"))
    if record["healthy_chains"] == 0:
        record["diverged"] = True
    if "ess_median" in record:
        record["ess_per_second"] = record["ess_median"] / seconds
    return record


def display_path(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def run(argv: Sequence[str] | None = None) -> int:
    args = parse_args(NAME, __doc__.split("\n\n")[0], argv)
    config = load_config(args.config, args.quick, args.smoke)
    check_config(config)
    e = config["experiment"]
    results = Results(results_path(args, NAME), config, fresh=args.fresh, create=not args.page_only)
    units = [(name, seed) for name in e["samplers"] for seed in e["seeds"]]
    progress = Progress(len(units))
    target = None
    for name, seed in [] if args.page_only else units:
        key = unit_key(config, name, seed)
        if key in results:
            progress.step(key, skipped=True)
            continue
        target = target if target is not None else build_target(config)
        record = run_unit(config, target, name, seed)
        results.add(key, record)
        progress.step(f"{key}: {summary(record)}")
    current = page_records(config, results.records)
    figure = args.pages / "img" / f"{NAME}{suffix(args)}.png"
    plot(config, current, figure)
    write_page(args, NAME, page(args, config, current, figure.name))
    return 0


def page_records(config: dict[str, Any], records: dict[str, dict[str, Any]]) -> list[dict]:
    """The records the page shows, of the results file's records by key: this configuration's
    units with the meta-parameter files as they are now (results of earlier files stay in the
    results file but are not shown)."""
    e = config["experiment"]
    keys = [unit_key(config, name, seed) for name in e["samplers"] for seed in e["seeds"]]
    return [records[k] for k in keys if k in records]


def summary(record: dict) -> str:
    if record.get("diverged"):
        return f"all chains diverged, {record['seconds']:.0f} s"
    ess = record.get("ess_median")
    return (
        f"acc {record['accuracy'][-1]:.3f}, NLL {record['nll'][-1]:.3f}, "
        f"ECE {record['ece'][-1]:.3f}, KL {record['pairwise_kl']:.3f}"
        + (f", ESS {ess:.1f}" if ess is not None else "")
        + f", {record['diverged_chains']} diverged, {record['seconds']:.0f} s"
    )


def rows(records: list[dict], name: str) -> list[dict]:
    return [r for r in records if r["sampler"] == name and not r.get("diverged")]


def final(record: dict, metric: str) -> float:
    """The metric of the BMA over every kept draw (the last point of its curve)."""
    value = record[metric]
    return value[-1] if isinstance(value, list) else value


def paired(records: list[dict], a: str, b: str, metric: str) -> Paired:
    """Mean ± se over seeds of metric(a) − metric(b) (paired by seed), over the seeds where
    neither diverged."""

    def by_seed(name: str) -> dict[int, float]:
        return {r["seed"]: final(r, metric) for r in rows(records, name) if metric in r}

    return paired_by_seed(by_seed(a), by_seed(b))


def label(config: dict, name: str) -> str:
    return config["samplers"][name].get("label", name)


def roles(config: dict) -> tuple[list[str], list[str]]:
    """(learned samplers, baselines) among the configured samplers."""
    names = config["experiment"]["samplers"]
    kinds = {n: config["samplers"][n]["kernel"] for n in names}
    return [n for n in names if kinds[n] in LEARNED], [n for n in names if kinds[n] in BASELINES]


OUTCOME = {
    "better": "beats",
    "worse": "is worse than",
    "better nll": "has a lower NLL but a lower accuracy than",
    "better accuracy": "has a higher accuracy but a higher NLL than",
    "even": "does not differ beyond 2 se from",
}


def outcome(records: list[dict], a: str, b: str) -> tuple[str | None, str]:
    """How ``a``'s BMA (all draws) compares with ``b``'s, paired over seeds: ``"better"`` (a
    lower NLL or a higher accuracy beyond 2 se, and neither worse beyond 2 se), ``"worse"`` (the
    reverse), ``"better nll"`` / ``"better accuracy"`` (better in that one, worse in the other),
    ``"even"`` (neither beyond 2 se), ``None`` without a pair (keys of :data:`OUTCOME`); and the
    differences as text."""
    nll = paired(records, a, b, "nll")
    acc = paired(records, a, b, "accuracy")
    if nll.n == 0:
        return None, "no pair (diverged)"
    better = nll.side() < 0 or acc.side() > 0
    worse = nll.side() > 0 or acc.side() < 0
    if better and worse:
        kind = "better nll" if nll.side() < 0 else "better accuracy"
    else:
        kind = "better" if better else "worse" if worse else "even"
    return kind, f"NLL {nll.text()}, acc {acc.text()}"


def beaten(records: list[dict], a: str, b: str) -> tuple[bool, str]:
    """Whether ``a``'s BMA (all draws) beats ``b``'s (:func:`outcome` ``"better"``), and the
    differences as text."""
    kind, text = outcome(records, a, b)
    return kind == "better", text


def listing(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def verdict(config: dict, records: list[dict]) -> str:
    """Reproduced: every learned sampler (previous-family entries aside) beats every baseline
    (:func:`outcome`: better BMA NLL or accuracy beyond 2 se, worse in neither, paired over
    seeds); partly: some learned sampler beats some baseline; not reproduced: none does. Each
    learned sampler's outcome against every baseline by the same rule, and whether a retrained
    family changes which baselines it beats (:func:`family_outcome`)."""
    learned, baselines = roles(config)
    primary = [n for n in learned if not config["samplers"][n].get("comparison_only")]
    if not primary or not baselines or not any(rows(records, n) for n in baselines):
        return "**not enough runs** for a verdict."
    wins, phrases = [], []
    for a in primary:
        if not rows(records, a):
            wins.append([False] * len(baselines))
            phrases.append(f"{label(config, a)} diverged in every run")
            continue
        kinds = {b: outcome(records, a, b)[0] for b in baselines}
        wins.append([kinds[b] == "better" for b in baselines])
        groups = []
        for kind, verb in OUTCOME.items():
            against = [label(config, b) for b in baselines if kinds[b] == kind]
            if against:
                whom = "every baseline" if len(against) == len(baselines) else listing(against)
                groups.append(f"{verb} {whom}")
        unpaired = [label(config, b) for b in baselines if kinds[b] is None]
        if unpaired:
            groups.append(f"has no pair with {listing(unpaired)} (diverged)")
        phrases.append(f"{label(config, a)} " + ", ".join(groups))
    every = all(all(w) for w in wins)
    some = any(any(w) for w in wins)
    word = "reproduced" if every else "partly" if some else "not reproduced"
    families = [
        f"{label(config, new)} against {label(config, old)}: {text}"
        for old, new in family_pairs(config)
        if (text := family_outcome(config, records, old, new)) is not None
    ]
    return (
        f"**{word}** at this scale — "
        + "; ".join(phrases)
        + " (BMA of all draws, paired over seeds: beats = a lower NLL or a higher accuracy beyond "
        "2 se and worse in neither; is worse than = the reverse)."
        + "".join(f" Retrained family, {text}" for text in families)
    )


def verdict_details(config: dict, records: list[dict]) -> str:
    """The differences behind the verdict (paired over seeds) and the ESS per second."""
    learned, baselines = roles(config)
    primary = [n for n in learned if not config["samplers"][n].get("comparison_only")]
    parts = []
    for a in primary:
        if rows(records, a):
            cells = [f"vs {label(config, b)} {outcome(records, a, b)[1]}" for b in baselines]
            parts.append(f"{label(config, a)}: " + "; ".join(cells))
    rates = [
        f"{label(config, n)} {pm(values, 2)}"
        for n in [*[b for b in baselines if b != "ensemble"], *primary]
        if (values := [r["ess_per_second"] for r in rows(records, n) if "ess_per_second" in r])
    ]
    return (
        "Differences of the learned sampler minus the baseline, paired over seeds, mean ± se: "
        + (" — ".join(parts) or "none")
        + "; median ESS per second of the log predictive (mean ± se over seeds): "
        + ("; ".join(rates) or "none")
        + "."
    )


def family_pairs(config: dict) -> list[tuple[str, str]]:
    """(previous family, retrained) pairs of the configuration: each learned sampler with a
    ``compare_with`` entry (the same kernel with the meta-parameters of the other family)."""
    learned, _ = roles(config)
    pairs = []
    for old in learned:
        new = config["samplers"][old].get("compare_with")
        if new is not None and new in config["experiment"]["samplers"]:
            pairs.append((old, new))
    return pairs


def family_outcome(config: dict, records: list[dict], old: str, new: str) -> str | None:
    """Does the retrained family (``new``) change the outcome against the baselines, and its
    NLL against the previous family's (``old``), paired over seeds and beyond 2 se; ``None``
    when the two meta-parameter files are the same or no seed pairs them."""
    _, baselines = roles(config)
    files = [meta_params_file(config["samplers"][n], n) for n in (old, new)]
    if digest(files[0]) == digest(files[1]):
        return None
    d = paired(records, new, old, "nll")
    if d.n == 0:
        return None
    before = {b: beaten(records, old, b)[0] for b in baselines}
    after = {b: beaten(records, new, b)[0] for b in baselines}
    changed = [b for b in baselines if before[b] != after[b]]
    side = d.side()
    return (
        (
            "Yes: against "
            + ", ".join(
                f"{label(config, b)} it now {'wins' if after[b] else 'no longer wins'}"
                for b in changed
            )
            if changed
            else "No: it beats the same baselines ("
            + (", ".join(label(config, b) for b in baselines if after[b]) or "none")
            + ") as before"
        )
        + "; its NLL "
        + ("is lower" if side < 0 else "is higher" if side > 0 else "does not differ beyond 2 se")
        + f" ({d.text(4)})."
    )


def family_comparison(config: dict, records: list[dict]) -> list[str]:
    """Lines comparing each learned sampler with its ``compare_with`` entry (the same kernel
    with the meta-parameters of the previous training family)."""
    lines: list[str] = []
    for old, new in family_pairs(config):
        files = {n: meta_params_file(config["samplers"][n], n) for n in (old, new)}
        same = digest(files[old]) == digest(files[new])
        lines += [
            f"### {label(config, new)} against {label(config, old)}",
            "",
            f"- {label(config, new)}: `{display_path(files[new])}` "
            f"(SHA-256 {digest(files[new])}…); {label(config, old)}: "
            f"`{display_path(files[old])}` (SHA-256 {digest(files[old])}…).",
        ]
        if same:
            lines += [
                "- The two files are byte-identical: no retrained meta-parameters are shipped "
                "yet, so the two rows are the same runs and this comparison is empty. Rerunning "
                "the command after the shipped file changes runs only the changed sampler "
                "(results are keyed by the file's digest) and rewrites this section.",
                "",
            ]
            continue
        lines += [
            "",
            f"| metric (BMA of all draws) | {label(config, new)} − {label(config, old)} |",
            "|---|---|",
        ]
        for metric in ("accuracy", "nll", "ece", "pairwise_kl", "ess_per_second"):
            d = paired(records, new, old, metric)
            cell = "—" if d.n == 0 else f"{d.text(4)} ({d.n} seeds)"
            lines.append(f"| {metric} | {cell} |")
        answer = family_outcome(config, records, old, new)
        lines += [
            "",
            "**Does the retrained family change the outcome?** "
            + (answer or "No seed pairs the two families."),
            "",
        ]
    return lines


def plot(config: dict, records: list[dict], path: Any) -> None:
    """BMA accuracy, NLL and ECE against the models in the BMA; ESS per second per sampler."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = config["experiment"]["samplers"]
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.8))
    for i, name in enumerate(names):
        rs = [r for r in rows(records, name) if "models" in r]
        if not rs:
            continue
        length = min(len(r["models"]) for r in rs)
        x = np.mean([r["models"][:length] for r in rs], axis=0)
        style = "--" if config["samplers"][name]["kernel"] in BASELINES else "-"
        for ax, metric in zip(axes[:3], ("accuracy", "nll", "ece"), strict=True):
            stats = [mean_se(r[metric][j] for r in rs) for j in range(length)]
            m = np.array([s[0] for s in stats])
            se = np.array([0.0 if math.isnan(s[1]) else s[1] for s in stats])
            ax.plot(x, m, style, color=f"C{i}", label=label(config, name))
            ax.fill_between(x, m - se, m + se, color=f"C{i}", alpha=0.2)
    for ax, metric in zip(axes[:3], ("accuracy", "NLL", "ECE"), strict=True):
        ax.set_xlabel("models in the BMA")
        ax.set_ylabel(f"test {metric}")
    axes[0].legend(fontsize=6)
    rates = {n: [r["ess_per_second"] for r in rows(records, n) if "ess_per_second" in r]
             for n in names}  # fmt: skip
    bars = [(label(config, n), mean_se(rates[n])) for n in names]
    bars = [(n, m, 0.0 if math.isnan(se) else se) for n, (m, se) in bars if not math.isnan(m)]
    if bars:
        axes[3].bar(range(len(bars)), [b[1] for b in bars], yerr=[b[2] for b in bars], capsize=2,
                    color="C7")  # fmt: skip
        axes[3].set_xticks(range(len(bars)), [b[0] for b in bars], rotation=50, ha="right",
                           fontsize=6)  # fmt: skip
    axes[3].set_ylabel("ESS/s, median over test points")
    axes[3].set_title("bulk ESS of log p(y*|x*, θ) per second", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def describe(config: dict, name: str, p: dict[str, Any] | None) -> str:
    """One line of the setup: the sampler's kernel and settings."""
    e = config["samplers"][name]
    kind = e["kernel"]
    h = f"h = {p['step_size']:.3g}" if p else "h"
    c = f"C = {p['friction']:.3g}" if p else "C"
    factor = e.get("step_factor", 1.0)
    step = h if factor == 1.0 else f"{factor:g}·h"
    longer = (
        f", {e['steps_factor']}× the steps (burn-in and thinning too)"
        if e.get("steps_factor", 1) != 1
        else ""
    )
    if kind == "sghmc":
        text = f"`sghmc` at {step}, {c}{longer}"
    elif kind == "cyclical":
        text = (
            f"`cyclical(sghmc)` at peak step {e['peak_step']:g}·h, {c}, cosine cycles of "
            f"{e['draws_per_cycle']} thinning intervals with the first {e['exploration']:.0%} at "
            f"T = 0 and {e['draws_per_cycle']} draws from each sampling stage"
        )
    elif kind == "ensemble":
        epochs = f"{e['epochs']:g} epochs" if "epochs" in e else "as many epochs as a chain runs"
        opt = f"`optax.{e['optimizer']}`, learning rate {e['learning_rate']:g}"
        if e["optimizer"] == "sgd" and e.get("momentum"):
            opt += f", momentum {e['momentum']:g}"
        if e.get("schedule", "constant") == "cosine":
            opt += ", cosine decay to 0"
        text = (
            f"one member per draw of a sampler (chains × draws), each trained from its own "
            f"initialisation by {opt} on Ũ/n for {epochs}"
        )
    else:
        path = meta_params_file(e, name)
        extra = (
            f", α = {e['alpha']:g}, β₀ = {e['beta0']:g}, c = {e['c']:g}"
            if kind == "nnsghmc"
            else f", {c}"
        )
        text = (
            f"`{kind}` at {step}{extra}{longer}, meta-parameters `{display_path(path)}` "
            f"(SHA-256 {digest(path)}…)"
        )
    return f"  - {label(config, name)}: {text}."


def page(args: Any, config: dict, records: list[dict], figure: str) -> str:
    e, s, m = (config[k] for k in ("experiment", "sampling", "model"))
    names = e["samplers"]
    total_min = sum(r.get("seconds", 0.0) for r in records) / 60
    title = " (quick run)" if args.quick else " (smoke run)" if args.smoke else ""
    n = next((r for r in records if "models" in r), None)
    epochs = s["burn_in_epochs"] + s["draws"] * s["thin_epochs"]
    p = next((r["step"] for r in records if "step" in r), None)
    code = provenance(records, command_line(NAME, args, fresh=True))
    lines = [
        "# Learned samplers on a task they have not seen" + title,
        "",
        *code.header(),
        "Kim et al. (2024, Fig. 1, Sec. 4) report that L2E, meta-trained on other tasks, gives "
        "a more accurate BMA for the number of samples than cyclical SG-MCMC and a deep ensemble "
        "on data sets and architectures it never saw (only on one data set does the ensemble "
        "come close), collects more diverse functions (Fig. 2) and mixes better (ESS per second, "
        "Table 4); Gong et al. (2019, Sec. 5) that NNSGHMC, meta-trained on "
        "small networks, generalises to new architectures and data sets and beats SGHMC there. "
        "This experiment runs the meta-trained kernels with the parameters named below on a "
        "network and data set outside their meta-training distribution, with the same step "
        "parameterisation, burn-in, thinning and number of draws as the baselines.",
        "",
        f"**Verdict:** {code.verdict(verdict(config, records))}",
        "",
        verdict_details(config, records),
        "",
        "## Setup",
        "",
        f"- Model: `{m['name']}` (options {m.get('options', {})}), minibatch {m['batch_size']}, "
        f"T = {m.get('temperature', 1.0):g}: a network outside the learned kernels' "
        "meta-training. L2E and Kinetic-L2E were trained on task families of `bdl.meta.tasks` "
        "(MLPs on digits, iris, prior-drawn and 1-D regression tasks and a 4-channel 2-D CNN on "
        "8×8 digits in the previous family; a retrained family may add MNIST-1D MLPs, never this "
        "CNN), NNSGHMC on 10-D Gaussians (docs/meta-learning-nnsghmc.md).",
        f"- Step: ℓ = {s['learning_rate']}, β = {s['momentum']} → h = √(ℓ/n), "
        "C = (1 − β)√(n/ℓ)"
        + (f" = ({p['step_size']:.4g}, {p['friction']:.4g})" if p else "")
        + f". {s['num_chains']} chains per seed, {s['burn_in_epochs']} epochs of burn-in, then "
        f"{s['draws']} draws per chain, one every {s['thin_epochs']} epoch(s) ({epochs} epochs).",
        "- Samplers:",
        *[describe(config, name, p) for name in names],
        "- Scores on the test split: the BMA of the first k draws of every chain that did not "
        "diverge (k·chains models; the first members of the ensemble): accuracy, NLL, ECE "
        "(15 bins). Diversity over all draws of a run: mean KL between ordered pairs of draws' "
        "predictives, and the disagreement of their top classes. Mixing: median over test points "
        "of the bulk ESS (over chains) of log p(y*|x*, θ), and that per second of the timed "
        "sampling call (compilation excluded); the ensemble's members are independent (no ESS).",
        f"- Seeds {e['seeds']}, the same for every sampler (paired); tables give mean ± "
        "standard error over seeds. Diverged chains are counted and left out.",
        f"- Command: `{command_line(NAME, args)}`; {total_min:.1f} min of sampling and training "
        f"(timed calls); {environment(args.page_only, records)}.",
        f"- Code: {code.code}.",
        "",
        "## Results",
        "",
        f"![BMA against the number of models, and ESS per second](img/{figure})",
        "",
        "### BMA of all draws, diversity and mixing",
        "",
        "| sampler | diverged chains | models | accuracy | NLL | ECE | pairwise KL | "
        "disagreement | ESS (median) | seconds | ESS/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        all_runs = [r for r in records if r["sampler"] == name]
        if not all_runs:
            continue
        rs = rows(records, name)
        diverged = sum(r.get("diverged_chains", 0) for r in all_runs)
        chains = len(all_runs) * s["num_chains"]
        models = f"{sum(r['models'][-1] for r in rs) / len(rs):g}" if rs else "—"
        cells = [pm(final(r, k) for r in rs) for k in ("accuracy", "nll", "ece")]
        cells += [pm(r[k] for r in rs) for k in ("pairwise_kl", "disagreement")]
        cells.append(pm((r["ess_median"] for r in rs if "ess_median" in r), 1))
        cells.append(pm((r["seconds"] for r in all_runs), 1))
        cells.append(pm((r["ess_per_second"] for r in rs if "ess_per_second" in r), 2))
        head = f"| {label(config, name)} | {diverged} / {chains} | {models} | "
        lines.append(head + " | ".join(cells) + " |")
    at_bound = {n_: [r["ess_at_ceiling"] for r in rows(records, n_) if "ess_at_ceiling" in r]
                for n_ in names}  # fmt: skip
    ceiling = [(label(config, n_), v) for n_, v in at_bound.items() if v]
    if ceiling:
        total = s["num_chains"] * s["draws"]
        lines += [
            "",
            f"ArviZ bounds an ESS estimate by S·log₁₀S (S = {total} draws over the chains: "
            f"{total * math.log10(total):.1f}); share of test points at that bound: "
            + "; ".join(f"{name} {pm(v, 2)}" for name, v in ceiling)
            + ".",
        ]
    if n is not None:
        draws = len(n["models"])
        ks = sorted({1, 2, max(draws // 4, 1), max(draws // 2, 1), draws})
        for metric, title_ in (("nll", "NLL"), ("accuracy", "Accuracy")):
            lines += [
                "",
                f"### {title_} against the draws per chain in the BMA",
                "",
                "| sampler | " + " | ".join(f"k = {k}" for k in ks) + " |",
                "|---|" + "---|" * len(ks),
            ]
            for name in names:
                rs = rows(records, name)
                if rs:
                    cells = " | ".join(pm(r[metric][k - 1] for r in rs) for k in ks)
                    lines.append(f"| {label(config, name)} | {cells} |")
    learned, baselines = roles(config)
    if learned and baselines:
        lines += [
            "",
            "### Learned samplers against the baselines",
            "",
            "Paired over seeds: the learned sampler's BMA (all draws) minus the baseline's, NLL "
            "(negative is better) and accuracy (positive is better); ✓ = better in one beyond "
            "2 se and worse in neither.",
            "",
            "| learned sampler | " + " | ".join(f"vs {label(config, b)}" for b in baselines) + " |",
            "|---|" + "---|" * len(baselines),
        ]
        for a in learned:
            cells = []
            for b in baselines:
                ok, text = beaten(records, a, b)
                cells.append(text + (" ✓" if ok else ""))
            lines.append(f"| {label(config, a)} | " + " | ".join(cells) + " |")
    family = family_comparison(config, records)
    lines += [
        "",
        "## Meta-training family: previous against retrained",
        "",
        "The learned kernels' meta-parameters can be retrained with more task families in the "
        "meta-training distribution (MNIST-1D MLPs among them, this CNN held out); the "
        "configuration names the previous family's file beside the shipped one.",
        "",
        *(family or ["No sampler of this configuration names a previous family.", ""]),
    ]
    diverged = sum(r.get("diverged_chains", 0) for r in records)
    lines += [
        f"Diverged chains in all: {diverged}.",
        "",
        "## The papers' setting",
        "",
        "`experiments/learned_samplers_cifar10.toml` holds the CIFAR-10 configuration (its "
        "comments give the papers' values and where this one differs); the expected wall time "
        "per device is in [full-scale runs](full-scale.md).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main_guard(run)

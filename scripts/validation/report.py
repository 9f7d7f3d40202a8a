"""docs/validation.md from the validation suite's results: the metrics, thresholds and tables.

The page is generated, never edited by hand: :func:`render` writes the explanation of every
metric and threshold (the numbers come from :mod:`bdl.validation.compare` and
:mod:`bdl.validation.reference`, so the text cannot drift from the code), then one table per
model and temperature from the JSON results that :func:`suite.run_case` returns
(``scripts/validation/suite.py``).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from bdl.validation import compare
from bdl.validation.reference import ESS_MIN, RHAT_MAX

#: short column headers for the comparison rows
HEADERS = {
    "kernel min bulk ESS": "min ESS",
    "max |standardised mean error|": "max \\|SME\\|",
    "min sd ratio": "min sd ratio",
    "max sd ratio": "max sd ratio",
    "max |MCSE-aware z|": "max \\|z\\|",
    "energy distance (sd units)": "energy distance",
    "top-1 agreement with NUTS": "agreement",
    "total variation to NUTS": "TV",
    "symmetrised KL to NUTS": "sym. KL",
    "BMA accuracy": "BMA acc.",
    "BMA NLL": "BMA NLL",
    "BMA ECE": "BMA ECE",
    "mean |Δ predictive mean| / sd_ref": "mean \\|Δ mean\\| / sd",
    "median predictive sd ratio": "median sd ratio",
    "min predictive sd ratio": "min sd ratio (worst input)",
    "RMSE of predictive mean": "RMSE",
}

SHORT = {
    "max |standardised mean error|": "SME",
    "min sd ratio": "sd ratio",
    "max sd ratio": "sd ratio",
    "energy distance (sd units)": "energy distance",
    "kernel min bulk ESS": "ESS",
    "top-1 agreement with NUTS": "agreement",
    "total variation to NUTS": "TV",
    "symmetrised KL to NUTS": "sym. KL",
    "mean |Δ predictive mean| / sd_ref": "mean error",
    "median predictive sd ratio": "sd ratio",
}


def _num(value: float | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _threshold(text: str) -> str:
    return text.replace(">=", "≥").replace("<=", "≤")


def _header(row: dict[str, Any]) -> str:
    name = HEADERS.get(row["name"], row["name"])
    gated = row["passed"] is not None
    return f"{name} ({_threshold(row['threshold'])})" if gated else name


def _cell(row: dict[str, Any] | None, marks: bool) -> str:
    if row is None:
        return "—"
    text = _num(row["value"])
    if marks and row["passed"] is not None:
        text += " ✓" if row["passed"] else " ✗"
    return text


def _outside(rows: list[dict[str, Any]]) -> list[str]:
    names = []
    for r in rows:
        if r["passed"] is False:
            label = SHORT.get(r["name"], r["name"])
            if label not in names:
                names.append(label)
    return names


def _verdict(entry: dict[str, Any], trusted: bool) -> str:
    if entry.get("error"):
        return "**ERROR**"
    rows = entry["rows"] + entry.get("closed_form", [])
    outside = _outside(rows)
    if entry["class"] != "exact":
        return "not gated" + (f" (outside: {', '.join(outside)})" if outside else " (within)")
    verdict = "**PASS**" if entry["passed"] else f"**FAIL** ({', '.join(outside)})"
    return verdict if trusted else f"{verdict}, reference untrusted"


def _table(
    case: dict[str, Any],
    key: str,
    extra_rows: list[tuple[str, list[dict[str, Any]]]],
    literature: bool,
) -> list[str]:
    """A markdown table: one row per kernel, columns from the comparison rows under ``key``."""
    columns: list[dict[str, Any]] = []
    for entry in case["kernels"]:
        for row in entry.get(key, []):
            if row["name"] not in [c["name"] for c in columns]:
                columns.append(row)
    for _, rows in extra_rows:
        for row in rows:
            if row["name"] not in [c["name"] for c in columns]:
                columns.append(row)
    heads = ["kernel", "class", "steps / burn-in / thin"] + [_header(c) for c in columns]
    if literature:
        heads.insert(3 + _skl_index(columns) + 1, "Wenzel et al. sym. KL")
    heads += ["verdict", "time"]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for label, rows in extra_rows:
        by_name = {r["name"]: r for r in rows}
        cells = [label, "reference", "—"]
        for c in columns:
            row = by_name.get(c["name"])
            cells.append(_cell(row, marks=True) if row is not None else "—")
        if literature:
            cells.insert(3 + _skl_index(columns) + 1, "")
        lines.append("| " + " | ".join([*cells, "", ""]) + " |")
    trusted = case["nuts"]["trusted"]
    for entry in case["kernels"]:
        by_name = {r["name"]: r for r in entry.get(key, [])}
        exact = entry["class"] == "exact"
        cells = [
            f"`{entry['kernel']}`",
            entry["class"],
            f"{entry['num_steps']:,} / {entry['burn_in']:,} / {entry['thin']}",
        ]
        for c in columns:
            cells.append(_cell(by_name.get(c["name"]), marks=exact))
        if literature:
            cells.insert(3 + _skl_index(columns) + 1, f"≈ {case['literature_skl']:.0e}")
        cells += [_verdict(entry, trusted), f"{entry['seconds']:.0f} s"]
        lines.append("| " + " | ".join(cells) + " |")
    if key == "rows":
        nuts_cells = {r["name"]: r for e in case["kernels"] for r in e.get("rows", [])}
        refs = [nuts_cells[c["name"]].get("reference") for c in columns]
        if any(v is not None for v in refs):
            cells = ["NUTS", "reference", "—"] + [_num(v) if v is not None else "" for v in refs]
            if literature:
                cells.insert(3 + _skl_index(columns) + 1, "")
            lines.append("| " + " | ".join([*cells, "", ""]) + " |")
    return lines


def _skl_index(columns: list[dict[str, Any]]) -> int:
    for i, c in enumerate(columns):
        if c["name"] == "symmetrised KL to NUTS":
            return i
    return len(columns) - 1


def _settings(case: dict[str, Any]) -> list[str]:
    lines = ["| kernel | hyper-parameters | note |", "|---|---|---|"]
    for entry in case["kernels"]:
        note = entry.get("note", "")
        if entry.get("error"):
            note = (note + "; " if note else "") + entry["error"].replace("|", "/")[:200]
        lines.append(f"| `{entry['kernel']}` | {entry['hyper']} | {note} |")
    return lines


def render_case(case: dict[str, Any], page_dir: Path) -> list[str]:
    """The section of one model and temperature."""
    nuts = case["nuts"]
    s = nuts["settings"]
    lines = [f"### {case['title']}", ""]
    status = "trusted" if nuts["trusted"] else "**UNTRUSTED** — the verdicts below bind nothing"
    lines.append(
        f"NUTS reference ({case['space']} space): {s['chains']} chains × {s['samples']:,} draws "
        f"after {s['warmup']:,} warm-up, max R̂ {nuts['max_rhat']:.4f}, min bulk ESS "
        f"{nuts['min_ess']:,.0f} — {status}. Generated by `{case['command']}` on "
        f"{case['date']}."
    )
    lines.append("")
    if case.get("note"):
        lines += [case["note"], ""]
    literature = case.get("literature_skl") is not None
    extra = []
    if case.get("nuts_split"):
        extra.append(("NUTS half vs half", case["nuts_split"]))
    lines += _table(case, "rows", extra, literature)
    lines.append("")
    if case.get("nuts_closed_form") is not None:
        lines.append("Against the closed-form posterior N(μ, Σ) (the exact answer):")
        lines.append("")
        lines += _table(case, "closed_form", [("NUTS", case["nuts_closed_form"])], False)
        lines.append("")
    if case.get("plot"):
        rel = os.path.relpath(case["plot"], page_dir)
        lines.append(f"Plot: [{Path(rel).name}]({rel})")
        lines.append("")
        lines.append(f"![{case['title']}]({rel})")
        lines.append("")
    lines.append("<details><summary>settings</summary>")
    lines.append("")
    lines += _settings(case)
    lines.append("")
    lines.append("</details>")
    lines.append("")
    return lines


def _wenzel_summary(cases: list[dict[str, Any]]) -> list[str]:
    rows = [c for c in cases if c.get("literature_skl") is not None]
    if not rows:
        return []
    lines = [
        "### Prior-data MLPs beside Wenzel et al. (2020)",
        "",
        "Symmetrised KL between each kernel's BMA predictive and NUTS's on the first 500 test "
        "inputs. Wenzel et al. report ≈ 1e-5 at depth 1 and ≈ 1e-3 at depths 2–3 between their "
        "SG-MCMC and HMC; the 'NUTS half vs half' column is the Monte Carlo floor of this "
        "run (chains 1–2 against chains 3–4 of the reference), below which no kernel can be "
        "told apart from NUTS.",
        "",
        "| model | T | Wenzel et al. | NUTS half vs half | best exact kernel | median over "
        "exact kernels | approximate kernels |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in rows:
        skl = {
            e["kernel"]: r["value"]
            for e in c["kernels"]
            for r in e.get("rows", [])
            if r["name"] == "symmetrised KL to NUTS"
        }
        exact = sorted(
            (v, k)
            for k, v in skl.items()
            if next(e for e in c["kernels"] if e["kernel"] == k)["class"] == "exact"
            and math.isfinite(v)
        )
        approx = [
            f"`{k}` {_num(v)}"
            for k, v in skl.items()
            if next(e for e in c["kernels"] if e["kernel"] == k)["class"] != "exact"
        ]
        split = next(
            (r["value"] for r in c.get("nuts_split", []) if r["name"] == "symmetrised KL to NUTS"),
            None,
        )
        best = f"{_num(exact[0][0])} (`{exact[0][1]}`)" if exact else "—"
        median = _num(exact[len(exact) // 2][0]) if exact else "—"
        lines.append(
            f"| depth {c['options'].get('depth')} | {c['options'].get('temperature', 1.0):g} | "
            f"≈ {c['literature_skl']:.0e} | {_num(split)} | {best} | {median} | "
            f"{', '.join(approx) or '—'} |"
        )
    lines.append("")
    return lines


def _sd_ratios(rows: list[dict[str, Any]]) -> tuple[Any, Any]:
    """(median, worst-input) predictive sd ratio of a comparison's rows."""
    got = {r["name"]: r["value"] for r in rows}
    return got.get("median predictive sd ratio"), got.get("min predictive sd ratio")


def _band_summary(cases: list[dict[str, Any]]) -> list[str]:
    """The epistemic band of regression networks: each kernel's narrowest predictive sd
    relative to NUTS's (in the 1-D regression, the middle of the gap)."""
    rows = [c for c in cases if c.get("space") == "function" and c.get("task") == "regression"]
    lines: list[str] = []
    for c in rows:
        lines += [
            f"### The predictive band: {c['title']}",
            "",
            "The predictive sd of each kernel over NUTS's, at the median test input and at the "
            "worst one. Only the median is gated. In the 1-D regression the worst input lies "
            "away from the data, in the gap or beyond the two clusters. There the band's width "
            "comes from directions of θ that the data do not constrain, and these mix slowest "
            "for a sampler whose step is set by the stiffest direction. The NUTS row compares "
            "its chains 1–2 with chains 3–4.",
            "",
            "| sampler | class | median sd ratio | worst-input sd ratio |",
            "|---|---|---|---|",
        ]
        med, low = _sd_ratios(c.get("nuts_split", []))
        lines.append(f"| NUTS half vs half | — | {_num(med)} | {_num(low)} |")
        for e in c["kernels"]:
            med, low = _sd_ratios(e.get("rows", []))
            lines.append(f"| `{e['kernel']}` | {e['class']} | {_num(med)} | {_num(low)} |")
        lines.append("")
    return lines


#: (quantity, definition, threshold, why) of the parameter-space comparison
PARAMETER_METRICS = [
    (
        "min ESS",
        "smallest bulk ESS of the kernel's draws over parameters",
        f"≥ {compare.MIN_KERNEL_ESS:.0f}",
        "below it the other numbers are Monte Carlo noise; a kernel that does not mix fails here",
    ),
    (
        "max \\|SME\\|",
        "standardised mean error max_k \\|m − m_ref\\|/sd_ref",
        f"≤ {compare.MAX_STD_MEAN_ERROR}",
        "the posterior mean within a tenth of a posterior sd",
    ),
    (
        "sd ratio",
        "sd/sd_ref, smallest and largest over parameters",
        f"in [{compare.SD_RATIO[0]}, {compare.SD_RATIO[1]}]",
        "spread within 10 %: discretisation and minibatch-noise bias inflate it, poor mixing "
        "deflates it",
    ),
    (
        "max \\|z\\|",
        "MCSE-aware z-score (m − m_ref)/√(MCSE² + MCSE_ref²)",
        "reported",
        "how many Monte Carlo errors the mean is off; with long runs a tiny bias gives a large "
        "z, so it is shown, not gated",
    ),
    (
        "energy distance",
        "2E‖X − Y‖ − E‖X − X′‖ − E‖Y − Y′‖ of the joint draws, each coordinate divided by sd_ref "
        "(≤ 2,000 draws per side, U-statistics, so it can be slightly negative)",
        f"≤ {compare.MAX_ENERGY_DISTANCE}",
        "the whole joint distribution, correlations included (Székely & Rizzo 2013)",
    ),
]

#: the function-space comparison of classifiers
CLASSIFICATION_METRICS = [
    (
        "agreement",
        "fraction of inputs with argmax p = argmax q",
        f"≥ {compare.MIN_AGREEMENT}",
        "the two posteriors make the same decisions",
    ),
    (
        "TV",
        "mean over inputs of ½Σ_k \\|p_k − q_k\\|",
        f"≤ {compare.MAX_TOTAL_VARIATION}",
        "the probabilities agree, not only the top class",
    ),
    (
        "sym. KL",
        "mean over inputs of ½[KL(p‖q) + KL(q‖p)] (nats; logarithms clipped at 1e-12)",
        f"≤ {compare.MAX_SYMMETRISED_KL}",
        "Wenzel et al.'s measure (App. O.3); their text does not say whether the two directions "
        "are averaged or summed: the summed (Jeffreys) value is twice ours",
    ),
    (
        "BMA acc. / NLL / ECE",
        "accuracy, negative log-likelihood and expected calibration error (15 bins) of p on the "
        "test labels; NUTS's in the NUTS row",
        "reported",
        "the quantities a user sees; compared, not gated",
    ),
]

#: the function-space comparison of regression networks
REGRESSION_METRICS = [
    (
        "mean \\|Δ mean\\| / sd",
        "mean over inputs of \\|mean − mean_ref\\|/sd_ref",
        f"≤ {compare.MAX_PREDICTIVE_MEAN_ERROR}",
        "the predictive mean within a fifth of the predictive sd",
    ),
    (
        "median sd ratio",
        "median over inputs of sd/sd_ref",
        f"in [{compare.PREDICTIVE_SD_RATIO[0]}, {compare.PREDICTIVE_SD_RATIO[1]}]",
        "the predictive band has the right width where most test inputs lie",
    ),
    (
        "min sd ratio (worst input)",
        "min over inputs of sd/sd_ref",
        "reported",
        "the narrowest band relative to NUTS's: in the 1-D regression, the middle of the gap, "
        "where the epistemic uncertainty comes from the slow, prior-dominated directions",
    ),
    (
        "RMSE",
        "root mean squared error of the predictive mean on the test targets",
        "reported",
        "—",
    ),
]


def _metric_table(rows: list[tuple[str, str, str, str]]) -> str:
    lines = ["| quantity | definition | threshold | why |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(lines)


INTRO = """# Validation against NUTS

Every kernel of bdl is checked against the gold standard: NumPyro's No-U-Turn sampler (NUTS) run
on the same compiled model, on the full-data potential U(θ)/T in float64. This page explains each
metric and threshold, then gives the results of the validation suite: every registered kernel on
the small models of [`models/`](models.md), generated by one command.

```bash
.venv/bin/python scripts/validation_suite.py                 # the full suite (≈ 1.5 h on 2 cores)
.venv/bin/python scripts/validation_suite.py --quick         # smoke version, a few minutes
.venv/bin/python scripts/validation_suite.py --models logistic_breast_cancer --kernels sgld sghmc
```

The script writes this page (`--out`, default `docs/validation.md`), its figures (`--plots`,
default `docs/img/validation/`) and the raw results beside the page (`docs/validation.json`);
`--quick` writes to `bdl-output/validation-quick.md` unless given `--out`, so a smoke run never
replaces the full results.
A run restricted with `--models` or `--kernels` updates those rows and keeps the others, so the
suite can be run in parts; every table states the command and date that produced it. NUTS
references are cached on disk (`~/.cache/bdl/references`, or `$BDL_CACHE_DIR`), keyed by the
model, its data, the temperature and the NUTS settings, so re-runs pay only for the kernels.

For one kernel on one model, use `bdl.validate(compiled, kernel, num_steps=…)` in Python or
`bdl validate MODEL --kernel NAME` on the command line: the same comparison, printed as a table
with a figure, and exit status 1 when a gated quantity is outside its threshold (2 when the NUTS
reference is not trusted).

## The reference and its trust gate

NUTS runs {chains} chains of 1,000 warm-up and 1,000 kept draws (float64, vectorised chains).
A reference is trusted only if split rank-normalised R̂ < {rhat} and bulk ESS ≥ {ess:.0f} for
every monitored quantity (Vehtari et al. 2021); otherwise `bdl validate` refuses to judge and says
what to change. For identifiable models the monitored quantities are the parameters. For networks
they are function-space summaries — the predictive mean (class probabilities for classifiers)
and the log-likelihood of each of the first 200 held-out inputs — because weight-space R̂ is
meaningless under the permutation symmetries of hidden units: NUTS on a depth-2 MLP at T = 0.1
gave weight-space R̂ 1.08 and ESS 48 while its predictive R̂ was 1.002 with ESS 3,296.

Each table also has a **NUTS half vs half** row: chains 1–2 of the reference against chains 3–4,
with the same metrics. It is the Monte Carlo floor of every number below it: a kernel whose
distance is at this level cannot be told apart from NUTS with these sample sizes. (It compares
2,000 draws with 2,000, so its floor lies somewhat above that of a kernel's comparison with all
4,000 NUTS draws; distances to NUTS shrink towards zero only as both runs grow.)

## Parameter space (identifiable models)

For each parameter k, with m, sd the kernel's mean and sd over all chains, m_ref, sd_ref the
reference's, and MCSE = sd/√ESS_bulk:

{parameter_table}

The conjugate regression is also compared with its **closed-form posterior** N(μ, Σ) (Bishop
2006, §3.3): the same quantities with the exact mean and sd in place of NUTS's (z uses the
kernel's MCSE alone, the energy distance 4,000 exact draws). NUTS itself is checked the same
way, which validates the reference.

## Function space (networks)

On held-out inputs (the first 500 test examples), with p the kernel's Bayesian model average
(BMA) predictive and q NUTS's (Izmailov et al. 2021; Wenzel et al. 2020, App. O):

{classification_table}

Regression networks, with the BMA predictive's mean and sd per input (law of total variance):

{regression_table}

## Exact and approximate kernels

The class column is the verdict of the stationarity checker (`bdl.kernels.check` on the kernel
with its registered defaults, as `bdl kernels` prints it; see [checker](checker.md)).

**Exact** kernels — SGLD, SGHMC, SGNHT, cyclical SGHMC, Entropy-MCMC, Wenzel et al.'s scheme,
NNSGHMC and Kinetic-L2E — leave exp(−H/T) invariant in continuous time, so any distance to NUTS
comes from discretisation, minibatch noise or the finite run, and they are gated: **PASS** means
every gated quantity is inside its threshold (against NUTS and, for the conjugate regression,
against the closed form).

**Approximate** kernels — pSGLD (its RMSprop preconditioner depends on the gradient history) and
L2E (its learned kinetic field is not a gradient and depends on the gradient history) — run with
the same care; their distances are reported as they are, never gated: "not gated (outside: …)"
names the thresholds an exact kernel would have failed.

Learned kernels (NNSGHMC, L2E, Kinetic-L2E) run with the meta-parameters that bdl trained and
ships ([meta-learning](meta-learning.md)). Without a shipped file they would use random ones from
seed 0, and the settings under each table say which was used. The shipped NNSGHMC raises f_Q to
4–5, which multiplies its effective step, so it runs at half the SGHMC step with half the
friction coefficient, for twice the steps. How the learned kernels compare with hand-designed
ones on held-out tasks is on [meta-evaluation](meta-evaluation.md).

Each kernel's hyper-parameters are in the suite definition, `scripts/validation/suite.py`, and
under every table. Step sizes follow the energy convention: kernels consume the full-scale
gradient ∇Ũ (n/|B| times the minibatch sum), so step sizes shrink as the posterior sharpens,
≈ 1/n for a given model.
"""


def render(
    cases: list[dict[str, Any]],
    *,
    page: Path,
    missing: list[tuple[str, str]],
    quick: bool,
) -> str:
    """The whole page: the explanation, the results of ``cases`` and the cases not yet run."""
    text = INTRO.format(
        chains=4,
        rhat=RHAT_MAX,
        ess=ESS_MIN,
        parameter_table=_metric_table(PARAMETER_METRICS),
        classification_table=_metric_table(CLASSIFICATION_METRICS),
        regression_table=_metric_table(REGRESSION_METRICS),
    )
    lines = [text, "## Results", ""]
    if quick:
        lines += [
            "> **Smoke run (`--quick`)**: short chains on a subset of the models. These numbers "
            "show that the pipeline works; only the conjugate regression runs at full length. The "
            "shortened cases are expected to fail the ESS gate (too few effective draws): that "
            "is the gate at work, not a fault of the kernels.",
            "",
        ]
    lines += [
        "✓ / ✗: inside / outside the threshold in the column header (exact kernels only). "
        "Times are wall-clock seconds on the machine that ran the suite (kernel run and "
        "comparison; the NUTS reference is cached).",
        "",
    ]
    lines += _wenzel_summary(cases)
    lines += _band_summary(cases)
    page_dir = page.parent
    for case in cases:
        lines += render_case(case, page_dir)
    if missing:
        lines += ["## Not run yet", ""]
        lines += [
            "These cases of the suite have no results on this page yet; run them with the "
            "command given.",
            "",
            "| case | command |",
            "|---|---|",
        ]
        lines += [f"| {title} | `{cmd}` |" for title, cmd in missing]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"

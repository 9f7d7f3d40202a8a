"""Sampling that nobody tuned: kernels built by name with no hyper-parameters, on models bdl was
not tuned for, validated against NUTS with the usual gates.

Every kernel is ``bdl.kernels.get(name)`` (``entropy`` on SGHMC) with the default start, so the
step size, mass and friction come from warm-up adaptation (docs/troubleshooting.md). Run lengths
are the model file's; nothing is chosen per kernel or per model. Writes docs/untuned.md and
docs/untuned.json; ``--cases`` runs a subset (the others are kept from the JSON). Several cases
run one process each, in turn: one process compiling every case's programs runs out of the
kernel's memory maps (XLA:CPU's "Unable to allocate section memory" after about 26 pairs).

    python scripts/untuned_suite.py                      # every case (NUTS references cached)
    python scripts/untuned_suite.py --cases poisson_glm  # one case
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

import bdl
from bdl.model_files import load_spec
from bdl.validation import nuts_reference

ROOT = Path(__file__).resolve().parent.parent
KERNELS: dict[str, dict[str, Any]] = {
    "sgld": {},
    "sghmc": {},
    "sgnht": {},
    "cyclical(sghmc)": {"name": "cyclical"},
    "entropy(sghmc)": {"name": "entropy", "base": "sghmc"},
}
#: key → (model file, build options, the settings a person tuned for it, if any)
CASES: dict[str, tuple[str, dict[str, Any], str]] = {
    "breast_cancer_raw": ("logistic_breast_cancer", {"raw": True}, ""),
    "linear_unstandardised": ("linear_unstandardised", {}, ""),
    "poisson_glm": ("poisson_glm", {}, ""),
    "diabetes_regression": ("diabetes_regression", {}, ""),
    "mlp_prior_data_depth2": ("mlp_prior_data", {"depth": 2}, "mlp_prior_data"),
    "regression_1d": ("regression_1d", {}, "regression_1d"),
    "correlated_regression": ("correlated_regression", {}, ""),
    # the same posterior with minibatches of 1,000: the gradient noise of B = 100 bounds the step
    # (docs/troubleshooting.md); this row separates the conditioning from the noise
    "correlated_regression_b1000": ("correlated_regression", {"batch_size": 1000}, ""),
    # not the centred form: NUTS fails the trust gate on its funnel (tests/test_hierarchical.py),
    # so nuts_reference raises UntrustedReferenceError, which would stop the suite
    "eight_schools_noncentred": ("eight_schools", {"centred": False}, "eight_schools"),
}


def tuned_step(model: str, options: dict[str, Any], kernel: str) -> float | None:
    """The step size docs/validation.md's hand-tuned run used for this kernel, where it has one."""
    spec = load_spec(model, **options)
    hyper = spec.kernel_hyper(kernel.split("(")[0] if kernel.startswith("cyclical") else kernel)
    return hyper.get("step_size")


def energy_ess(samples: bdl.Samples) -> float:
    """Bulk ESS of the potential energy over the healthy chains."""
    energy = np.asarray(samples.info["energy"])[~np.asarray(samples.diverged)]
    return float(bdl.diagnostics.ess_bulk(energy)) if len(energy) else float("nan")


def raw_step_range(adapted: dict[str, Any], label: str) -> list[float] | None:
    """The adapted step in θ's own units, the unit-mass step it amounts to per coordinate, as
    (smallest, largest) over coordinates (median over chains): h·√(M⁻¹)ᵢᵢ for momentum kernels
    (θ moves by h·M^{−1/2}r, r of unit scale), h·(M⁻¹)ᵢᵢ for SGLD (drift h·M⁻¹∇U). These are
    what compare with a step tuned by hand under M = I."""
    if "step_size" not in adapted:
        return None
    h = np.asarray(adapted["step_size"])
    if "inverse_mass" in adapted:
        inverse = np.diagonal(np.asarray(adapted["inverse_mass"]), axis1=1, axis2=2)
    elif "mass" in adapted:
        leaves = jax.tree.leaves(adapted["mass"])
        inverse = 1.0 / np.concatenate([np.asarray(x).reshape(len(h), -1) for x in leaves], 1)
    else:
        inverse = np.ones((len(h), 1))
    scale = inverse if label == "sgld" else np.sqrt(inverse)
    per_coordinate = h[:, None] * scale
    return [float(np.median(per_coordinate.min(1))), float(np.median(per_coordinate.max(1)))]


def run_case(key: str, seed: int) -> dict[str, Any]:
    model, options, tuned_from = CASES[key]
    spec = load_spec(model, **options)
    target = spec.compile()
    start = time.perf_counter()
    reference = nuts_reference(target)
    nuts_s = time.perf_counter() - start
    results: dict[str, Any] = {
        "model": target.name,
        "options": options,
        "description": spec.description,
        "nuts_seconds": nuts_s,
        "space": reference.space,
        "run": {"num_steps": spec.num_steps, "burn_in": spec.burn_in, "thin": spec.thin},
        "kernels": {},
    }
    for label, hyper in KERNELS.items():
        hyper = dict(hyper)
        kernel = bdl.kernels.get(hyper.pop("name", label), **hyper)
        report = bdl.validate(
            target,
            kernel,
            num_steps=spec.num_steps,
            burn_in=spec.burn_in,
            thin=spec.thin,
            num_chains=4,
            seed=seed,
            reference=reference,
        )
        samples = report.samples
        ess = [
            r.value
            for r in report.rows
            if r.name.startswith("kernel") and "ESS" in r.name and r.value is not None
        ]
        if not ess:  # function space: the energy's ESS (weights mean nothing under permutations)
            ess = [energy_ess(samples)]
        adapted = samples.adapted or {}
        results["kernels"][label] = {
            "passed": report.passed,
            "failed_rows": [r.name for r in report.rows if r.passed is False],
            "rows": [[r.name, r.value, r.threshold, r.passed] for r in report.rows],
            "seconds": report.seconds["kernel"],
            "min_ess": min(ess) if ess else None,
            "ess_per_second": min(ess) / report.seconds["kernel"] if ess else None,
            "adapted_step": np.asarray(adapted.get("step_size", [np.nan])).tolist(),
            "raw_step_range": raw_step_range(adapted, label),
            "tuned_step": tuned_step(tuned_from, options, label) if tuned_from else None,
            "diverged": np.flatnonzero(samples.diverged).tolist(),
        }
        row = results["kernels"][label]
        print(
            f"{key:<24}{label:<18}{'PASS' if row['passed'] else 'FAIL':<6}"
            f"ESS/s {row['ess_per_second'] or float('nan'):8.2f}  "
            f"h {np.median(row['adapted_step']):.3g}  {row['failed_rows']}",
            flush=True,
        )
    return results


def _median(values: list[float]) -> str:
    finite = [v for v in values if np.isfinite(v)]
    return f"{np.median(finite):.3g}" if finite else "—"


def _range(bounds: list[float] | None) -> str:
    if not bounds or not all(np.isfinite(bounds)):
        return "—"
    return f"{bounds[0]:.2g} – {bounds[1]:.2g}"


def _model_label(res: dict[str, Any]) -> str:
    """The model's name, with the build options that tell two rows of one model file apart."""
    options = ", ".join(f"{k}={v}" for k, v in (res.get("options") or {}).items())
    return f"{res['model']} ({options})" if options else res["model"]


def render(all_results: dict[str, Any]) -> str:
    lines = [
        "# Sampling nobody tuned",
        "",
        "Every kernel here is `bdl.kernels.get(name)` (Entropy-MCMC and cyclical SG-MCMC on",
        "SGHMC) with no hyper-parameters and the default start: step size, mass (dense for at",
        "most 100 parameters) and friction are adapted during burn-in",
        "([when a run goes wrong](troubleshooting.md)).",
        "Run lengths are the model file's, the same for every kernel; the reference is NumPyro",
        "NUTS under the trust gate, and the gates are those of [validation](validation.md).",
        "`python scripts/untuned_suite.py` regenerates this page.",
        "",
        "| model | kernel | verdict | failed gates | min ESS | ESS/s | adapted h (median) "
        "| as a unit-mass step | hand-tuned h | diverged |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for res in all_results.values():
        for label, k in res["kernels"].items():
            tuned = "—" if k["tuned_step"] is None else f"{k['tuned_step']:.3g}"
            ess = "—" if k["min_ess"] is None else f"{k['min_ess']:.0f}"
            eps = "—" if k["ess_per_second"] is None else f"{k['ess_per_second']:.1f}"
            lines.append(
                f"| {_model_label(res)} | {label} | {'PASS' if k['passed'] else 'FAIL'} | "
                f"{', '.join(k['failed_rows']).replace('|', chr(92) + '|') or '—'} | {ess} | "
                f"{eps} | "
                f"{_median(k['adapted_step'])} | {_range(k.get('raw_step_range'))} | {tuned} | "
                f"{k['diverged'] or '—'} |"
            )
    pairs = [k["passed"] for res in all_results.values() for k in res["kernels"].values()]
    lines += [
        "",
        f"{sum(pairs)} of {len(pairs)} model–kernel pairs pass. ESS/s is the smallest bulk ESS",
        "over the compared quantities (parameter space) or the bulk ESS of the potential energy",
        "U(θ) (function space, where weights mean nothing under hidden-unit permutations),",
        "divided by the kernel's wall time (compilation and warm-up included).",
        "",
        "Models and runs:",
        "",
    ]
    for res in all_results.values():
        run = res["run"]
        lines.append(
            f"- **{res['model']}** {res['options'] or ''}: {res['description']}; "
            f"{run['num_steps']:,} steps (burn-in {run['burn_in']:,}, thin {run['thin']}), "
            f"4 chains; NUTS reference in {res['space']} space."
        )
    lines += [
        "",
        "The adapted h is in the kernel's own units: preconditioned by the adapted mass (a",
        "dimensionless step per posterior standard deviation for momentum kernels, per variance",
        "for SGLD). *As a unit-mass step* gives what it amounts to in θ's units, per coordinate",
        "(smallest – largest): h·√(M⁻¹)ᵢᵢ for momentum kernels, h·(M⁻¹)ᵢᵢ for SGLD; that is the",
        "range to set beside the hand-tuned step, which used M = I for every coordinate.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default=None, help=f"comma-separated subset of {sorted(CASES)}")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "docs")
    p.add_argument("--render", action="store_true", help="only rewrite the page from the JSON")
    args = p.parse_args()
    jax.config.update("jax_enable_x64", False)
    store = args.out / "untuned.json"
    results = json.loads(store.read_text()) if store.is_file() else {}
    if args.render:
        (args.out / "untuned.md").write_text(render(results))
        return
    keys = args.cases.split(",") if args.cases else list(CASES)
    unknown = [key for key in keys if key not in CASES]
    if unknown:
        raise SystemExit(f"unknown case {unknown[0]!r}; cases: {', '.join(CASES)}")
    if len(keys) > 1:
        for key in keys:
            command = [sys.executable, __file__, "--cases", key, "--seed", str(args.seed)]
            subprocess.run([*command, "--out", str(args.out)], check=True)
        return
    for key in keys:
        results[key] = run_case(key, args.seed)
        store.write_text(json.dumps(results, indent=1))
        (args.out / "untuned.md").write_text(render(results))
    print(f"wrote {args.out / 'untuned.md'}")


if __name__ == "__main__":
    main()

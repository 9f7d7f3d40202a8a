"""The posteriordb suite: NUTS and every adapting kernel against Stan's reference draws.

For each posterior of ``bdl.validation.posteriordb`` (nine posteriordb posteriors declared in
bdl's DSL), with everything at its defaults:

* NUTS, ``bdl.reference(compiled)`` (4 chains × 1,000 draws after 1,000 warm-up, float64),
  compared with Stan's reference draws (posteriordb: 10 chains × 1,000 near-independent draws)
  by the parameter-space gates of ``bdl.validate`` (docs/validation.md);
* every kernel that adapts its step by default (``bdl.kernels.get(name)`` builds it without a
  step size; :func:`adapting_kernels`), run by ``bdl.validate(compiled, kernel,
  reference=Stan's draws)`` for the posterior's run lengths (40,000 steps, 10,000 of burn-in,
  thin 10, 4 chains, full-batch gradients, the default start).

``mcycle_gp-accel_gp`` has no vendored draws, only Stan's means and mean squares: NUTS is checked
against those moments, and the kernels are validated against NUTS's draws.

Each posterior runs in a process of its own (XLA:CPU runs out of memory maps when one process
compiles every program); the results go to a JSON file (``--json``, default
docs/posteriordb.json; a run with ``--posteriors``/``--kernels`` replaces those entries and keeps
the others) and the page (``--out``, default docs/posteriordb.md), written by
scripts/posteriordb_page.py.

    python scripts/posteriordb_suite.py                        # everything (hours on 2 cores)
    python scripts/posteriordb_suite.py --posteriors arma-arma11 --kernels sghmc
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import jax
import numpy as np

import bdl
from bdl.validation import Reference, Row, compare_parameters, posteriordb
from bdl.validation.monte_carlo import bonferroni_z, mean_and_errors

ROOT = Path(__file__).resolve().parent.parent
#: the gated rows shown in the table, by the names compare_parameters gives them
SME, SD_LOW, SD_HIGH = "max |standardised mean error|", "min sd ratio", "max sd ratio"


def adapting_kernels() -> list[str]:
    """The registered kernels that ``bdl.kernels.get(name)`` builds without a step size, so
    that ``bdl.sample`` adapts their step (and mass and friction) during burn-in."""
    names = []
    for name in bdl.kernels.names():
        inner = bdl.kernels.get(name).recipe_kernel()
        if inner is not None and inner.step_size is None:
            names.append(name)
    return names


def _rows(rows: list[Row]) -> list[list[Any]]:
    return [[r.name, r.value, r.reference, r.threshold, r.passed] for r in rows]


def _min_ess(positions: Any) -> float:
    leaves = [np.asarray(a, np.float64) for a in jax.tree.leaves(positions)]
    columns = np.concatenate([a.reshape(*a.shape[:2], -1) for a in leaves], axis=-1)
    return float(np.min(bdl.diagnostics.ess_bulk(columns)))


def _summary(rows: list[Row]) -> dict[str, Any]:
    """The table's numbers from comparison rows: worst |SME| and its limit, sd ratio range."""
    by_name = {r.name: r for r in rows}
    out: dict[str, Any] = {}
    if SME in by_name:
        out["sme"] = by_name[SME].value
        out["sme_limit"] = by_name[SME].threshold
        out["sd_low"], out["sd_high"] = by_name[SD_LOW].value, by_name[SD_HIGH].value
        out["sd_limits"] = [by_name[SD_LOW].threshold, by_name[SD_HIGH].threshold]
    worst = [r.name for r in rows if r.name.startswith("  (worst parameter: ")]
    if worst:
        out["sme_worst"] = worst[-1].removeprefix("  (worst parameter: ").rstrip(")")
    return out


def moment_rows(positions_named: dict[str, np.ndarray], moments: dict[str, Any]) -> list[Row]:
    """NUTS's constrained draws against the reference's means and sds alone (no draws): the
    standardised mean error and sd ratio gates of ``bdl.validate`` with the reference's Monte
    Carlo error from its own MCSE of the mean, and of the variance bounded by
    MCSE(E x²) + 2|E x|·MCSE(E x) (the covariance of the two estimates is not known)."""
    xs, means, sds, mcse, log_se, names = [], [], [], [], [], []
    for name, m in moments.items():
        size = int(np.size(m["mean"]))
        names += [name] if np.ndim(m["mean"]) == 0 else [f"{name}[{i}]" for i in range(size)]
        draws = np.asarray(positions_named[name], np.float64)
        xs.append(draws.reshape(*draws.shape[:2], -1))
        means.append(np.ravel(m["mean"]))
        sds.append(np.ravel(m["sd"]))
        mcse.append(np.ravel(m["mcse_mean"]))
        square_mcse = np.ravel(m.get("mcse_mean_squared", np.nan))
        se_var = square_mcse + 2 * np.abs(np.ravel(m["mean"])) * np.ravel(m["mcse_mean"])
        log_se.append(np.broadcast_to(se_var, np.shape(np.ravel(m["sd"]))) / (2 * sds[-1] ** 2))
    x = np.concatenate(xs, axis=-1)
    mean, sd = np.concatenate(means), np.concatenate(sds)
    k = mean_and_errors(x)
    se = np.sqrt(k["mcse"] ** 2 + np.concatenate(mcse) ** 2) / sd
    sme = (k["mean"] - mean) / sd
    log_ratio = np.log(k["sd"] / sd)
    log_limit_se = np.sqrt(k["log_sd_se"] ** 2 + np.concatenate(log_se) ** 2)
    z_d = bonferroni_z(len(sme))
    sme_limit = 0.02 + z_d * float(np.max(se))
    log_limit = math.log1p(0.01) + z_d * float(np.max(log_limit_se))
    worst = int(np.argmax(np.abs(sme)))
    ess = float(np.min(bdl.diagnostics.ess_bulk(x)))
    sme_max = float(np.abs(sme).max())
    low, high = float(np.exp(log_ratio.min())), float(np.exp(log_ratio.max()))
    return [
        Row("compared parameters: min bulk ESS", ess, None, ">= 100", ess >= 100),
        Row(SME, sme_max, None, f"<= {sme_limit:.3g}", sme_max <= sme_limit),
        Row(f"  (worst parameter: {names[worst]})", float(sme[worst]), None, "", None),
        Row(SD_LOW, low, None, f">= {math.exp(-log_limit):.3g}", -log_ratio.min() <= log_limit),
        Row(SD_HIGH, high, None, f"<= {math.exp(log_limit):.3g}", log_ratio.max() <= log_limit),
    ]


def _warnings_of(samples: bdl.Samples, caught: list[warnings.WarningMessage]) -> list[str]:
    """What ``bdl.sample`` warned about: the warnings that reached us, and those that
    ``bdl.validate`` silences because it turns them into rows (divergence, run-away, convergence,
    bias), from the same conditions ``bdl.sample`` issues them on."""
    out = [f"{w.category.__name__}: {str(w.message).splitlines()[0][:160]}" for w in caught]
    if np.any(samples.diverged):
        out.append(f"DivergenceWarning: chains {np.flatnonzero(samples.diverged).tolist()}")
    if samples.runaway is not None and np.any(samples.runaway):
        out.append(f"RunawayWarning: chains {np.flatnonzero(samples.runaway).tolist()}")
    verdict = samples.convergence
    if verdict is not None and not verdict.mixing_ok:
        out.append(f"ConvergenceWarning: {verdict.report().splitlines()[0][:200]}")
    if verdict is not None and verdict.bias is not None and not verdict.bias.ok:
        out.append(f"BiasWarning: {verdict.bias.report().splitlines()[0][:200]}")
    return out


def run_nuts(
    target: Any, posterior: posteriordb.Posterior, stan: Any, nuts: dict
) -> tuple[dict, Any]:
    """``bdl.reference`` (uncached, so that its time is measured) against Stan's draws, or
    against Stan's moments where there are no draws; the entry and the NUTS draws."""
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ref = bdl.reference(target, require_trusted=False, use_cache=False, **nuts)
    seconds = time.perf_counter() - start
    if stan is not None:
        rows = compare_parameters(ref.positions, stan.positions)
        against = "Stan's draws"
    else:
        rows = moment_rows(_stan_named(posterior, ref.draws), posterior.moments())
        against = "Stan's means and sds"
    ess = _min_ess(ref.positions)
    gated = [r for r in rows if r.passed is not None]
    said = [f"{w.category.__name__}: {str(w.message).splitlines()[0][:160]}" for w in caught]
    entry = {
        "kernel": "NUTS",
        "against": against,
        "trusted": ref.trusted,
        "max_rhat": ref.max_rhat,
        "min_ess": ess,
        "seconds": seconds,
        "ess_per_second": ess / seconds,
        "rows": _rows(rows),
        "failed": [r.name for r in gated if not r.passed] + ([] if ref.trusted else ["trust gate"]),
        "warnings": said,
        **_summary(rows),
    }
    entry["passed"] = not entry["failed"]
    return entry, ref


def _stan_named(posterior: posteriordb.Posterior, draws: dict[str, np.ndarray]) -> dict:
    """NUTS's named draws (``net/zgp_1``) under Stan's names (``zgp_1``)."""
    return {s: draws[p] for s, p in posterior.parameters.items()}


def run_kernel(target: Any, name: str, reference: Any, spec: Any, seed: int, run: dict) -> dict:
    kernel = bdl.kernels.get(name)
    lengths = {"num_steps": spec.num_steps, "burn_in": spec.burn_in, "thin": spec.thin, **run}
    try:
        kernel.bind(target)
    except ValueError as err:  # the kernel does not apply (gibbs: no conjugate precision)
        return {"kernel": kernel.name, "refused": f"{type(err).__name__}: {err}"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            report = bdl.validate(target, kernel, num_chains=4, seed=seed, reference=reference,
                                  **lengths)  # fmt: skip
        except Exception as err:  # a failure is a result of the suite, not its end
            return {"kernel": kernel.name, "error": f"{type(err).__name__}: {err}"}
    samples = report.samples
    healthy = samples.healthy_chains
    positions = jax.tree.map(lambda a: np.asarray(a)[healthy], samples.positions)
    compared = any(r.name == SME for r in report.rows)
    shown = report.rows
    if not compared and healthy.size >= 2:  # not compared (it did not converge): reported only
        shown = compare_parameters(positions, reference.positions, seed=seed)
    ess = _min_ess(positions) if healthy.size else float("nan")
    adapted = samples.adapted or {}
    return {
        "kernel": samples.kernel,
        "passed": report.passed,
        "failed": [r.name for r in report.rows if r.passed is False],
        "compared": compared,
        "rows": _rows(report.rows),
        "min_ess": ess,
        "seconds": report.seconds["kernel"],
        "ess_per_second": ess / report.seconds["kernel"],
        "adapted_step": np.asarray(adapted.get("step_size", [np.nan])).tolist(),
        "diverged": np.flatnonzero(samples.diverged).tolist(),
        "warnings": _warnings_of(samples, caught),
        "run": lengths,
        **_summary(shown),
    }


def save_reference(path: Path, reference: Any) -> None:
    """NUTS's draws and gate, for the kernels' process (``mcycle_gp-accel_gp``)."""
    leaves = jax.tree.leaves(reference.positions)
    np.savez(path, monitored=reference.monitored, max_rhat=reference.max_rhat,
             min_ess=reference.min_ess, settings=json.dumps(reference.settings),
             **{f"leaf{i}": np.asarray(a) for i, a in enumerate(leaves)})  # fmt: skip


def load_reference(path: Path, target: Any) -> Any:
    data = np.load(path)
    treedef = jax.tree.structure(target.initial_position)
    positions = jax.tree.unflatten(treedef, [data[f"leaf{i}"] for i in range(treedef.num_leaves)])
    return Reference(positions, "parameter", data["monitored"], float(data["max_rhat"]),
                     float(data["min_ess"]), json.loads(str(data["settings"])))  # fmt: skip


def run_posterior(name: str, kernels: list[str], *, seed: int = 0, run: dict | None = None,
                  nuts: dict | None = None, stage: str = "all",
                  reference_file: Path | None = None) -> dict:  # fmt: skip
    """NUTS and ``kernels`` on one posterior; ``run`` overrides the kernels' run lengths
    (num_steps, burn_in, thin) and ``nuts`` bdl.reference's settings (for a quick check).
    ``stage`` runs only ``"nuts"`` (saving its draws to ``reference_file``) or only the
    ``"kernels"`` (reading NUTS's draws from it where Stan has none): the suite runs the two in
    separate processes, since a float64 NUTS run leaves float64 constants behind that a later
    float32 run of an ODE posterior trips on (NumPyro's truncated-normal prior)."""
    posterior = posteriordb.load(name)
    spec = posterior.spec()
    start = time.perf_counter()
    target = spec.compile()
    compile_seconds = time.perf_counter() - start
    stan = posterior.reference(target) if posterior.has_draws else None
    result: dict[str, Any] = {
        "posterior": name,
        "title": posterior.info["model_title"],
        "dim": target.dim,
        "n": int(spec.data.n),
        "compile_seconds": compile_seconds,
        "stan": None if stan is None else {"max_rhat": stan.max_rhat, "min_ess": stan.min_ess},
        "run": {"num_steps": spec.num_steps, "burn_in": spec.burn_in, "thin": spec.thin,
                **(run or {})},
        "nuts_settings": nuts or {},
        "rows": {},
        "kernel_reference": "Stan" if stan is not None else "NUTS",
    }  # fmt: skip
    nuts_reference = None
    if stage in ("all", "nuts"):
        nuts_entry, nuts_ref = run_nuts(target, posterior, stan, nuts or {})
        result["rows"]["NUTS"] = nuts_entry
        print(f"{name:<44}NUTS{'':<14}{'PASS' if nuts_entry['passed'] else 'FAIL'}", flush=True)
        nuts_reference = nuts_ref.reference
        if reference_file is not None:
            save_reference(reference_file, nuts_reference)
    if stage == "nuts":
        return result
    if stan is None and nuts_reference is None:
        nuts_reference = load_reference(reference_file, target)
    reference = stan if stan is not None else nuts_reference
    for kernel in kernels:
        entry = run_kernel(target, kernel, reference, spec, seed, run or {})
        result["rows"][kernel] = entry
        verdict = next((k for k in ("refused", "error") if k in entry), None)
        verdict = verdict or ("PASS" if entry["passed"] else "FAIL")
        print(f"{name:<44}{entry['kernel']:<18}{verdict}  {entry.get('failed', '')}", flush=True)
    return result


def _plain(value: Any) -> Any:
    """NumPy scalars and arrays as JSON's numbers, booleans and lists."""
    return value.tolist() if isinstance(value, np.ndarray | np.generic) else str(value)


def environment() -> dict[str, Any]:
    return {
        "date": datetime.date.today().isoformat(),
        "machine": platform.processor() or platform.machine(),
        "cores": len(__import__("os").sched_getaffinity(0)),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "numpyro": __import__("numpyro").__version__,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--posteriors", nargs="*", default=None)
    parser.add_argument("--kernels", nargs="*", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=ROOT / "docs" / "posteriordb.json")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "posteriordb.md")
    parser.add_argument("--page-only", action="store_true", help="rewrite the page from --json")
    parser.add_argument("--no-nuts", action="store_true", help="keep the NUTS rows of --json")
    parser.add_argument("--keep-nuts", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child process: one posterior
    parser.add_argument("--stage", default="all", help=argparse.SUPPRESS)
    parser.add_argument("--reference-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--part", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    kernels = args.kernels if args.kernels is not None else adapting_kernels()
    if args.one:
        result = run_posterior(args.one, kernels, seed=args.seed, stage=args.stage,
                               reference_file=args.reference_file)  # fmt: skip
        args.part.write_text(json.dumps(result, indent=1, default=_plain))
        return
    results = json.loads(args.json.read_text()) if args.json.is_file() else {"posteriors": {}}
    if not args.page_only:
        command = ["python", "scripts/posteriordb_suite.py", *sys.argv[1:]]
        stages = ["kernels"] if args.no_nuts else ["nuts", "kernels"]
        for name in args.posteriors or posteriordb.names():
            start = time.perf_counter()
            result: dict[str, Any] = {"posterior": name, "rows": {}}
            with tempfile.TemporaryDirectory() as tmp:
                for stage in stages:
                    part, draws = Path(tmp) / f"{stage}.json", Path(tmp) / "nuts.npz"
                    if not draws.is_file() and args.no_nuts:
                        draws = args.json.with_name(f"{name}.nuts.npz")  # a --keep-nuts run's
                    cmd = [sys.executable, __file__, "--one", name, "--part", str(part),
                           "--stage", stage, "--reference-file", str(draws),
                           "--seed", str(args.seed), "--kernels", *kernels]  # fmt: skip
                    done = subprocess.run(cmd, check=False)
                    if done.returncode != 0 or not part.is_file():  # recorded; the suite goes on
                        result["error"] = f"{stage} stage: exit {done.returncode}"
                        break
                    rows = {**result["rows"], **json.loads(part.read_text())["rows"]}
                    result = {**result, **json.loads(part.read_text()), "rows": rows}
                    if stage == "nuts" and args.keep_nuts:
                        shutil.copy(draws, args.json.with_name(f"{name}.nuts.npz"))
            result["wall_seconds"] = time.perf_counter() - start
            result["command"] = " ".join(command)
            result["environment"] = environment()
            old = results["posteriors"].get(name, {}).get("rows", {})
            result["rows"] = {**{k: v for k, v in old.items() if k not in result["rows"]},
                              **result["rows"]}  # fmt: skip
            results["posteriors"][name] = result
            args.json.write_text(json.dumps(results, indent=1, default=_plain) + "\n")
    from posteriordb_page import render

    args.out.write_text(render(results))
    print(f"wrote {args.out} and {args.json}")


if __name__ == "__main__":
    main()

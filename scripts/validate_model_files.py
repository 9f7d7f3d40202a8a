"""Every model file with its own settings: ``bdl validate MODEL --kernel K --tuned`` for each
model file of bdl and each kernel the file suggests settings for, and the page of results.

A model file carries tuned settings per kernel (``ModelSpec.kernels``), its run lengths and its
start; ``bdl validate --tuned`` runs the kernel with all of them against a NUTS reference and
exits 0 only when the run converged and every gate holds. This script runs that command for
every pair, one process per pair in turn (one process compiling every pair's programs runs out
of memory maps), and writes docs/model-files.md with the verdict, R̂, bulk ESS and time of
each, and the raw results beside it (docs/model-files.json).

    .venv/bin/python scripts/validate_model_files.py                        # every pair
    .venv/bin/python scripts/validate_model_files.py --models eight_schools --kernels sghmc

A run restricted with --models or --kernels replaces those rows and keeps the others. A pair is
not run, and says why, when its model file cannot be built here (data not prepared). A model with
more than --max-params sampled parameters gets no NUTS reference (a network of thousands of
weights takes many hours on a CPU): its kernel runs alone with the file's settings (``bdl sample
MODEL --kernel K --tuned``), and the row gives that run's own convergence verdict. Exit status:
0 when every pair that ran passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
#: the command each pair runs (the console script's entry point, in this interpreter)
BDL = [
    sys.executable,
    "-c",
    "import sys; from bdl.cli.main import console_main; sys.exit(console_main())",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=None, help="model names to run (default all)")
    p.add_argument("--kernels", nargs="+", default=None, help="kernel names to run (default all)")
    p.add_argument(
        "--max-params",
        type=int,
        default=2_000,
        help="models with more sampled parameters get no NUTS reference: their kernel runs "
        "alone (default 2000)",
    )
    p.add_argument(
        "--timeout", type=float, default=3 * 3600.0, help="seconds per pair (default 3 h)"
    )
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "model-files.md", help="the page")
    p.add_argument(
        "--plots", type=Path, default=ROOT / "bdl-output" / "model-files", help="figure folder"
    )
    return p.parse_args(argv)


def pairs(models: list[str] | None, kernels: list[str] | None, max_params: int) -> list[dict]:
    """One row per (model file, suggested kernel): what to run, or why it is not run."""
    from bdl.model_files import load_spec, model_names

    rows = []
    for name in models or model_names():
        try:
            spec = load_spec(name)
        except Exception as err:  # a model file that cannot be built here (data not prepared)
            reason = str(err).splitlines()[0].replace(f"{ROOT}/", "")
            rows.append({"model": name, "kernel": "—", "status": "not run", "note": reason})
            continue
        names = [k for k in spec.kernels if kernels is None or k in kernels]
        if not names:
            continue
        target = spec.compile()
        dim = sum(int(np.size(a)) for a in jax.tree.leaves(target.initial_position))
        for kernel in names:
            row = {"model": name, "kernel": kernel, "dim": dim, "status": "pending"}
            if dim > max_params:
                row.update(
                    status="no reference",
                    note=f"{dim:,} parameters: a NUTS reference is beyond a CPU's budget "
                    f"(--max-params {max_params:,})",
                )
            rows.append(row)
    return rows


def _figure(text: str, label: str) -> str | None:
    """The kernel's column (the first number after the label) of the table row whose label
    starts with ``label``."""
    for line in text.splitlines():
        if line.startswith(label):
            found = re.search(r"\s{2,}([-+0-9.eE]+)\s", line[len(label) :] + " ")
            return found.group(1) if found else None
    return None


def _bdl(command: list[str], timeout: float) -> tuple[subprocess.CompletedProcess, float] | None:
    """``bdl COMMAND`` in a process of its own: its result and seconds (``None`` past timeout)."""
    start = time.perf_counter()
    try:
        done = subprocess.run(
            BDL + command, capture_output=True, text=True, timeout=timeout, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        return None
    return done, time.perf_counter() - start


def run_pair(row: dict, plots: Path, timeout: float) -> dict:
    """``bdl validate MODEL --kernel K --tuned``: its exit status, verdict and figures."""
    plots.mkdir(parents=True, exist_ok=True)
    command = [
        "validate",
        row["model"],
        "--kernel",
        row["kernel"],
        "--tuned",
        "--plot",
        str(plots / f"{row['model']}_{row['kernel']}.png"),
    ]
    ran = _bdl(command, timeout)
    if ran is None:
        return {**row, "status": "timeout", "seconds": timeout, "note": f"over {timeout:.0f} s"}
    done, seconds = ran
    out, err = done.stdout, done.stderr
    log = plots / f"{row['model']}_{row['kernel']}.txt"  # the command's whole output, kept
    log.write_text(f"$ bdl {' '.join(command)}\n{out}\n{err}", encoding="utf-8")
    verdict = re.search(r"^verdict: (\w+)", out, re.M)
    failing = [
        line.split("  ")[0].strip()
        for line in out.splitlines()
        if line.rstrip().endswith("FAIL") and not line.startswith("verdict")
    ]
    status = {0: "PASS", 1: "FAIL", 2: "untrusted reference"}.get(done.returncode, "error")
    note = "; ".join(failing)
    if status in ("error", "untrusted reference"):
        lines = [ln for ln in err.splitlines() if ln.strip() and "warning" not in ln.lower()]
        note = lines[-1][:300] if lines else f"exit {done.returncode}"
    return {
        **row,
        "status": status,
        "verdict": verdict.group(1) if verdict else None,
        "exit": done.returncode,
        "max_rhat": _figure(out, "kernel max R̂"),
        "min_bulk_ess": _figure(out, "kernel min bulk ESS"),
        "seconds": round(seconds, 1),
        "date": datetime.date.today().isoformat(),
        "command": "bdl " + " ".join(command[:5]),
        "note": note,
    }


def run_alone(row: dict, timeout: float) -> dict:
    """``bdl sample MODEL --kernel K --tuned`` for a pair without a reference: the kernel's own
    convergence verdict, which ``bdl validate`` would check before comparing anything."""
    command = ["sample", row["model"], "--kernel", row["kernel"], "--tuned"]
    ran = _bdl(command, timeout)
    if ran is None:
        return {**row, "note": f"{row['note']}; its own run: over {timeout:.0f} s"}
    done, seconds = ran
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("convergence:")), "")
    rhat = re.search(r"max R̂ ([0-9.]+)", line)
    ess = re.search(r"min bulk ESS ([0-9.]+)", line)
    shape = re.search(r"(\d+) chains × (\d+) draws", line)
    verdict = "converged" if line.startswith("convergence: ok") else "NOT CONVERGED"
    own = f"its own run: {verdict}" + (
        f" ({shape.group(1)} chains × {shape.group(2)} draws)" if shape else ""
    )
    return {
        **row,
        "max_rhat": rhat.group(1) if rhat else None,
        "min_bulk_ess": ess.group(1) if ess else None,
        "seconds": round(seconds, 1),
        "date": datetime.date.today().isoformat(),
        "command": "bdl " + " ".join(command),
        "note": f"{row['note']}; {own}" if line else f"{row['note']}; exit {done.returncode}",
    }


def page(rows: list[dict]) -> str:
    ran = [r for r in rows if r["status"] not in ("not run", "no reference")]
    passed = sum(r["status"] == "PASS" for r in ran)
    alone = [r for r in rows if r["status"] == "no reference"]
    converged = sum("its own run: converged" in (r.get("note") or "") for r in alone)
    lines = [
        "# Model files validated with their own settings",
        "",
        "A model file of bdl may suggest settings for some kernels (`ModelSpec.kernels`: the "
        "step size, friction, …) beside its run lengths and start; `bdl validate MODEL --kernel "
        "K --tuned` runs the kernel with all of them against a NumPyro NUTS reference, and passes "
        "only when the run has converged (R̂ < 1.01, bulk and tail ESS ≥ 100 per chain, no stuck "
        "or diverged chain) and every gate of [validation](validation.md) holds. This page is "
        "written by `scripts/validate_model_files.py`, which runs that command for each pair "
        "(4 chains, seed 0, the NUTS references cached):",
        "",
        "```bash",
        ".venv/bin/python scripts/validate_model_files.py",
        "```",
        "",
        f"{passed} of the {len(ran)} pairs that ran pass; the date of each run is in its row. "
        "A pair is not run when its model file cannot be built here (its data are not "
        "prepared). A pair whose model has more sampled parameters than `--max-params` is not "
        "validated, since a NUTS reference of a network of thousands of weights takes many hours "
        "on a CPU; such a pair (*no reference*) still runs the kernel with the file's settings "
        "(`bdl sample MODEL --kernel K --tuned`), and its row gives that run's own convergence "
        "verdict, which `bdl validate` checks before it compares anything. A file may give a "
        "kernel run lengths of its own: `regression_1d` gives SGLD ten million steps, since its "
        "step is held below 2/λ_max = 2.6·10⁻⁶ by the stiffest direction of the energy "
        "(λ_max = 7.6·10⁵), where 3.2 million steps left a bulk ESS of 274 (R̂ 1.013) in "
        "function space.",
        "",
        f"{converged} of the {len(alone)} pairs without a reference converge in their own runs. "
        "These are networks of thousands of weights whose files set short demonstration runs "
        "(20 or 80 draws per chain, below the 100 per chain the check needs), and whose "
        "predictions on ambiguous inputs move between classes on time scales as long as any run "
        "measured ([a network's verdict](troubleshooting.md#a-networks-verdict)): they show what "
        "a model average gives, not a converged posterior.",
        "",
        "| model | kernel | parameters | verdict | max R̂ | min bulk ESS | time (s) | run on "
        "| note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [
            f"`{r['model']}`",
            r["kernel"] if r["kernel"] == "—" else f"`{r['kernel']}`",
            f"{r['dim']:,}" if r.get("dim") is not None else "—",
            f"**{r['status']}**" if r["status"] in ("PASS", "FAIL") else r["status"],
            r.get("max_rhat") or "—",
            r.get("min_bulk_ess") or "—",
            str(r.get("seconds", "—")),
            r.get("date", "—"),
            (r.get("note") or "").replace("|", "\\|"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    raw = args.out.with_suffix(".json")
    kept = json.loads(raw.read_text()) if raw.is_file() else []
    rows = pairs(args.models, args.kernels, args.max_params)
    for i, row in enumerate(rows):
        if row["status"] in ("pending", "no reference"):
            print(f"[{i + 1}/{len(rows)}] {row['model']} {row['kernel']} ...", flush=True)
            if row["status"] == "pending":
                rows[i] = run_pair(row, args.plots, args.timeout)
            else:
                rows[i] = run_alone(row, args.timeout)
            print(f"    {rows[i]['status']} ({rows[i].get('seconds')} s) {rows[i].get('note', '')}")
    ran = {r["model"] for r in rows} | set(args.models or [])

    def replaced(r: dict) -> bool:  # a row of this run's models and kernels: run again (or gone)
        return r["model"] in ran and (args.kernels is None or r["kernel"] in args.kernels)

    merged = [r for r in kept if not replaced(r)] + rows
    merged.sort(key=lambda r: (r["model"], r["kernel"]))
    raw.write_text(json.dumps(merged, indent=1, ensure_ascii=False) + "\n")
    args.out.write_text(page(merged), encoding="utf-8")
    print(f"wrote {args.out} and {raw}")
    return 0 if all(r["status"] in ("PASS", "not run", "no reference") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

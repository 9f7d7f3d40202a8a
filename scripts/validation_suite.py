"""Run the validation suite and write docs/validation.md, its figures and its raw results.

Every registered kernel on the small models of bdl/models/ (scripts/validation/suite.py), each
against a cached NumPyro NUTS reference with the thresholds of bdl/validation/compare.py.

    .venv/bin/python scripts/validation_suite.py                  # full suite, ≈ 1.5 h on 2 cores
    .venv/bin/python scripts/validation_suite.py --quick          # smoke version, a few minutes
    .venv/bin/python scripts/validation_suite.py --models linear_regression --kernels sgld

Results are kept beside the page (docs/validation.json): a run restricted with --models or
--kernels replaces those rows and keeps the others, so the suite can be run in parts. A --quick
run starts from nothing, never mixes with full-length results and by default writes to
bdl-output/ instead of docs/.
Exit status: 0 when every exact kernel that ran passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from validation import report, suite


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="short smoke version (a few minutes)")
    p.add_argument("--models", nargs="+", default=None, help="model names or case keys to run")
    p.add_argument("--kernels", nargs="+", default=None, help="kernel names to run")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the page (default docs/validation.md; with --quick bdl-output/validation-quick.md, "
        "so a smoke run never replaces the full results)",
    )
    p.add_argument(
        "--plots",
        type=Path,
        default=None,
        help="figure directory (default docs/img/validation; with --quick "
        "bdl-output/validation-quick/)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--render",
        action="store_true",
        help="run nothing: rewrite the page from the stored results (after editing its text)",
    )
    p.add_argument("--fresh", action="store_true", help="discard stored results before this run")
    args = p.parse_args(argv)
    if args.out is None:
        args.out = Path("bdl-output/validation-quick.md" if args.quick else "docs/validation.md")
    if args.plots is None:
        args.plots = Path("bdl-output/validation-quick" if args.quick else "docs/img/validation")
    return args


def merge(stored: list[dict[str, Any]], new: dict[str, Any]) -> list[dict[str, Any]]:
    """Replace ``new``'s case in ``stored``, keeping kernels of that case that were not re-run."""
    old = next((c for c in stored if c["key"] == new["key"]), None)
    if old is not None:
        ran = {e["kernel"] for e in new["kernels"]}
        kept = [e for e in old["kernels"] if e["kernel"] not in ran]
        new = {**new, "kernels": kept + new["kernels"]}
        if "plot" not in new and "plot" in old:
            new["plot"] = old["plot"]
    return [c for c in stored if c["key"] != new["key"]] + [new]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python scripts/validation_suite.py " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
    )
    cases = suite.select(suite.suite(), quick=args.quick, models=args.models)
    if args.kernels:
        from bdl.kernels import registry

        unknown = sorted(set(args.kernels) - set(registry.names()))
        if unknown:
            raise SystemExit(f"unknown kernel(s) {unknown}; see `bdl kernels`.")
    results_path = args.out.with_suffix(".json")
    stored: list[dict[str, Any]] = []
    if results_path.is_file() and not args.fresh and not args.quick:
        stored = [c for c in json.loads(results_path.read_text()) if not c.get("quick")]
    if args.render:
        write(stored, args, results_path)
        return 0
    status = 0
    start = time.perf_counter()
    for case in cases:
        case_start = time.perf_counter()
        # a re-run of some kernels keeps the case's figure of all kernels
        kept_plot = args.kernels and any(c["key"] == case.key and "plot" in c for c in stored)
        result = suite.run_case(
            case,
            kernels=args.kernels,
            seed=args.seed,
            plot_dir=None if kept_plot else args.plots,
        )
        result.update(
            command=command.strip(),
            date=datetime.date.today().isoformat(),
            quick=args.quick,
            wall_seconds=time.perf_counter() - case_start,
        )
        print(f"[{case.key}] done in {result['wall_seconds']:.0f} s", flush=True)
        if any(e["passed"] is False for e in result["kernels"]):
            status = 1
        stored = merge(stored, result)
        write(stored, args, results_path)
    print(f"suite: {time.perf_counter() - start:.0f} s; page {args.out}, results {results_path}")
    return status


def write(stored: list[dict[str, Any]], args: argparse.Namespace, results_path: Path) -> None:
    """Write the results (JSON) and the page, cases in suite order, after every case."""
    cases = {c.key: c for c in suite.suite()}
    order = list(cases)
    stored = sorted(stored, key=lambda c: order.index(c["key"]) if c["key"] in order else 99)
    for c in stored:
        runs = list(cases[c["key"]].runs) if c["key"] in cases else []
        c["kernels"].sort(key=lambda e: runs.index(e["kernel"]) if e["kernel"] in runs else 99)
    results_path.parent.mkdir(parents=True, exist_ok=True)
    results_path.write_text(json.dumps(stored, indent=1, default=str))
    have = {c["key"] for c in stored}
    missing = []
    if not args.quick:
        missing = [
            (c.title, f"python scripts/validation_suite.py --models {c.key}")
            for c in cases.values()
            if c.key not in have
        ]
    page = report.render(stored, page=args.out, missing=missing, quick=args.quick)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(page)


if __name__ == "__main__":
    sys.exit(main())

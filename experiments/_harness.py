"""What every experiment shares: its configuration, resumable results, progress, tables, page.

An experiment is a script ``experiments/<name>.py`` with a TOML configuration
``experiments/<name>.toml``. The configuration fixes every setting before the run; its
``[quick]`` table overrides some of them for ``--quick`` (minutes on 2 CPU cores), and its
``[smoke]`` table, where it has one, for ``--smoke`` (one step of everything, for the test suite:
``<name>-smoke`` results and page, to be written outside the repository with ``--results`` and
``--pages``). Each unit of
work (one setting and one seed) appends one JSON line to ``experiments/results/<name>.jsonl``
(``<name>-quick.jsonl`` for quick runs) as soon as it finishes, so an interrupted experiment
goes on where it stopped when started again; ``--fresh`` discards the partial results. The
script then writes ``docs/experiments/<name>.md`` (``<name>-quick.md``) from the results alone.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import platform
import sys
import time
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "experiments" / "results"
PAGES = ROOT / "docs" / "experiments"


def parse_args(
    name: str, description: str, argv: Sequence[str] | None = None
) -> argparse.Namespace:
    """The command line every experiment takes."""
    p = argparse.ArgumentParser(prog=f"experiments/{name}.py", description=description)
    p.add_argument(
        "--config",
        type=Path,
        default=ROOT / "experiments" / f"{name}.toml",
        help="the TOML configuration (default: experiments/%(prog)s's own)",
    )
    p.add_argument("--quick", action="store_true", help="the [quick] settings: minutes on a CPU")
    p.add_argument(
        "--smoke", action="store_true", help="the [smoke] settings: one step of every unit"
    )
    p.add_argument("--fresh", action="store_true", help="discard partial results and start over")
    p.add_argument("--results", type=Path, default=RESULTS, help="directory of the results files")
    p.add_argument("--pages", type=Path, default=PAGES, help="directory of the written pages")
    args = p.parse_args(argv)
    if not args.config.is_file():
        p.error(f"--config {args.config}: no such file")
    if args.quick and args.smoke:
        p.error("give --quick or --smoke, not both")
    return args


def load_config(path: Path, quick: bool, smoke: bool = False) -> dict[str, Any]:
    """The configuration, with the ``[quick]`` table merged over it when ``quick`` (the
    ``[smoke]`` table when ``smoke``; an error if the file has none)."""
    with open(path, "rb") as f:
        config = tomllib.load(f)
    overrides = config.pop("quick", {})
    smoke_overrides = config.pop("smoke", None)
    if quick:
        config = merge(config, overrides)
    if smoke:
        if smoke_overrides is None:
            raise SystemExit(f"{path} has no [smoke] table; --smoke needs one.")
        config = merge(config, smoke_overrides)
    return config


def suffix(args: argparse.Namespace) -> str:
    """``"-quick"``, ``"-smoke"`` or ``""``: how the run's results and page are named."""
    return "-quick" if args.quick else "-smoke" if getattr(args, "smoke", False) else ""


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` merged in, tables recursively."""
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


class Results:
    """One JSON line per finished unit of work, keyed; appended and flushed as each finishes."""

    def __init__(self, path: Path, config: dict[str, Any], fresh: bool = False) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        if fresh and path.exists():
            path.unlink()
        self.records: dict[str, dict[str, Any]] = {}
        fingerprint = json.dumps(config, sort_keys=True)
        if path.exists():
            lines = path.read_text().splitlines()
            header = json.loads(lines[0]) if lines else {}
            if header.get("config") != fingerprint:
                raise SystemExit(
                    f"{path} holds results of another configuration; pass --fresh to discard "
                    "them, or --results DIR to keep both."
                )
            for line in lines[1:]:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:  # a line cut by an interruption
                    continue
                self.records[record["key"]] = record
        else:
            self._append({"config": fingerprint, "started": time.strftime("%Y-%m-%d %H:%M")})

    def __contains__(self, key: str) -> bool:
        return key in self.records

    def add(self, key: str, record: dict[str, Any]) -> None:
        record = {"key": key, **record}
        self.records[key] = record
        self._append(record)

    def _append(self, record: dict[str, Any]) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def values(self) -> list[dict[str, Any]]:
        return list(self.records.values())


class Progress:
    """One line per unit: its index, label, elapsed time and an estimate of what is left."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.start = total, 0, time.perf_counter()

    def step(self, label: str, skipped: bool = False) -> None:
        self.done += 1
        elapsed = time.perf_counter() - self.start
        left = elapsed / self.done * (self.total - self.done)
        state = "already done" if skipped else f"{elapsed / 60:.1f} min, ≈ {left / 60:.1f} min left"
        print(f"[{self.done}/{self.total}] {label}  ({state})", flush=True)


def mean_se(values: Iterable[float]) -> tuple[float, float]:
    """Mean and standard error (sd / √k; NaN for fewer than two values)."""
    xs = [float(v) for v in values]
    if not xs:
        return math.nan, math.nan
    mean = sum(xs) / len(xs)
    if len(xs) < 2:
        return mean, math.nan
    var = sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)
    return mean, math.sqrt(var / len(xs))


def pm(values: Iterable[float], digits: int = 3) -> str:
    """``mean ± se`` of ``values`` for a table cell."""
    mean, se = mean_se(values)
    if math.isnan(mean):
        return "—"
    if math.isnan(se):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


class Paired(NamedTuple):
    """A difference paired by seed: mean and standard error of the per-seed differences, and
    the number of seeds both sides have."""

    mean: float
    se: float
    n: int

    def side(self) -> int:
        """+1 / −1 when the mean is above / below zero by more than two standard errors, else
        0 (also when the se is 0 or undefined)."""
        return beyond(self.mean, self.se)

    def text(self, digits: int = 3) -> str:
        """``+0.185 ± 0.028`` (``—`` without a pair)."""
        if self.n == 0:
            return "—"
        if math.isnan(self.se):
            return f"{self.mean:+.{digits}f}"
        return f"{self.mean:+.{digits}f} ± {self.se:.{digits}f}"


def paired(a: Mapping[Any, float], b: Mapping[Any, float]) -> Paired:
    """Mean ± se over seeds of ``a[seed] − b[seed]``, over the seeds both have (``a`` and ``b``
    map a seed to a value). The seeds pair the two runs, so what both share (the start, the
    minibatches) cancels: the se of the differences, not the two standard errors combined."""
    diffs = [float(a[seed]) - float(b[seed]) for seed in a if seed in b]
    mean, se = mean_se(diffs)
    return Paired(mean, se, len(diffs))


def beyond(mean: float, se: float) -> int:
    """+1 / −1 when the mean is above / below zero by more than two standard errors, else 0."""
    if math.isnan(mean) or math.isnan(se) or se == 0:
        return 0
    return 1 if mean > 2 * se else -1 if mean < -2 * se else 0


def environment() -> str:
    """The machine and library versions, for the page."""
    import jax

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
    return (
        f"jax {jax.__version__}, {jax.default_backend()} ({jax.devices()[0].device_kind}), "
        f"{os.cpu_count()} CPU cores, python {platform.python_version()}, load average "
        f"{load:.2f} at the end"
    )


def results_path(args: argparse.Namespace, name: str) -> Path:
    return args.results / f"{name}{suffix(args)}.jsonl"


def write_page(args: argparse.Namespace, name: str, text: str) -> Path:
    """Write ``docs/experiments/<name>.md`` (``<name>-quick.md`` for a quick run)."""
    args.pages.mkdir(parents=True, exist_ok=True)
    path = args.pages / f"{name}{suffix(args)}.md"
    path.write_text(text)
    print(f"wrote {path}", flush=True)
    return path


def command_line(name: str, args: argparse.Namespace) -> str:
    flags = " --quick" if args.quick else " --smoke" if getattr(args, "smoke", False) else ""
    default = ROOT / "experiments" / f"{name}.toml"
    if Path(args.config).resolve() != default:
        try:
            shown = Path(args.config).resolve().relative_to(ROOT)
        except ValueError:
            shown = Path(args.config)
        flags = f" --config {shown}{flags}"
    return f"python experiments/{name}.py{flags}"


def compile_model(
    model: dict[str, Any], options: dict[str, Any] | None = None, temperature: float | None = None
) -> Any:
    """The compiled model of a ``[model]`` table (``name``, ``options``, ``batch_size``), with
    further ``options`` and, unless ``None``, the temperature ``T`` in place of the file's."""
    import dataclasses

    import bdl
    from bdl.model_files import load_spec

    spec = load_spec(model["name"], **{**model.get("options", {}), **(options or {})})
    declared = spec.model
    if temperature is not None:
        declared = dataclasses.replace(declared, temperature=float(temperature))
    return bdl.compile(declared, spec.data, batch_size=model["batch_size"])


def bma_metrics(target: Any, positions: Any) -> dict[str, float]:
    """BMA accuracy, NLL and ECE on the test split; ``positions`` has one leading draw axis."""
    import jax.numpy as jnp

    import bdl
    from bdl.evaluation import test_metrics

    out = test_metrics(target, positions)
    probs = target.predict(positions, target.x_test)
    out["ece"] = float(bdl.metrics.expected_calibration_error(probs, jnp.asarray(target.y_test)))
    return out


def finished(samples: Any) -> Any:
    """``samples`` of a run that was not interrupted; an interrupted one (Ctrl-C or SIGTERM,
    which ``bdl.sample`` answers by returning the draws so far) stops the experiment, so that a
    partial run is never recorded as a unit's result."""
    if samples.interrupted:
        raise KeyboardInterrupt
    return samples


def main_guard(run: Any) -> None:
    """Run ``run()``; Ctrl-C keeps the results written so far and says how to go on."""
    try:
        sys.exit(run())
    except KeyboardInterrupt:
        print("\ninterrupted: finished units are kept; run the same command to go on.")
        sys.exit(130)

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
script then writes ``docs/experiments/<name>.md`` (``<name>-quick.md``) from the results alone
(``--page-only`` writes it from the results already there, running nothing), and
``experiments/index.py`` rebuilds the table of ``docs/experiments/index.md`` from the pages.

Every line of a results file records the code that wrote it (:func:`code_version`: the git
commit, the trees of ``bdl/`` and ``experiments/`` less ``experiments/results/``, and whether
the working tree had uncommitted changes there). A page whose results came from other trees,
from uncommitted changes, or from before results recorded their code says so at its top
(:func:`provenance`).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
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
    p.add_argument(
        "--page-only",
        action="store_true",
        help="write the page (and the index) from the results already there; run nothing",
    )
    p.add_argument("--results", type=Path, default=RESULTS, help="directory of the results files")
    p.add_argument("--pages", type=Path, default=PAGES, help="directory of the written pages")
    args = p.parse_args(argv)
    if not args.config.is_file():
        p.error(f"--config {args.config}: no such file")
    if args.quick and args.smoke:
        p.error("give --quick or --smoke, not both")
    if args.page_only and args.fresh:
        p.error("--page-only writes the page from the results there; --fresh would discard them")
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


def read_results(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The header line of a results file and its records by key (the last of a key wins; a line
    cut by an interruption is skipped)."""
    lines = path.read_text().splitlines()
    header = json.loads(lines[0]) if lines else {}
    records: dict[str, dict[str, Any]] = {}
    for line in lines[1:]:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line cut by an interruption
            continue
        records[record["key"]] = record
    return header, records


class Results:
    """One JSON line per finished unit of work, keyed; appended and flushed as each finishes.
    Every line, the header too, carries ``"code"``: the :func:`code_version` that wrote it, and
    ``"environment"``: the :func:`run_environment` it ran in."""

    def __init__(
        self, path: Path, config: dict[str, Any], fresh: bool = False, create: bool = True
    ) -> None:
        self.path = path
        if fresh and path.exists():
            path.unlink()
        self.records: dict[str, dict[str, Any]] = {}
        fingerprint = json.dumps(config, sort_keys=True)
        if path.exists():
            header, self.records = read_results(path)
            if header.get("config") != fingerprint:
                raise SystemExit(
                    f"{path} holds results of another configuration; pass --fresh to discard "
                    "them, or --results DIR to keep both."
                )
        elif not create:
            raise SystemExit(f"{path}: no results to write a page from; run the experiment.")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._append(
                {
                    "config": fingerprint,
                    "started": time.strftime("%Y-%m-%d %H:%M"),
                    "code": code_version(),
                    "environment": run_environment(),
                }
            )

    def __contains__(self, key: str) -> bool:
        return key in self.records

    def add(self, key: str, record: dict[str, Any]) -> None:
        """Append the record of unit ``key``, with the code that produced it."""
        record = {"key": key, **record, "code": code_version(), "environment": run_environment()}
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


# --- which code produced the results ---------------------------------------------------------

CODE_DIRS = ("bdl", "experiments")  # the code whose version every record carries
NOT_CODE = "results"  # experiments/results/: what the code writes, not code
UNKNOWN_CODE: dict[str, Any] = {
    "commit": None,
    "dirty": None,
    "trees": {"bdl": None, "experiments": None},
}


def _git(*argv: str, stdin: bytes | None = None) -> bytes:
    """The standard output of ``git -C <repository root> argv…`` (raises when git is missing
    or fails)."""
    done = subprocess.run(
        ["git", "-C", os.fspath(ROOT), *argv],
        input=stdin,
        capture_output=True,
        check=True,
        timeout=60,
    )
    return done.stdout


def tree_without(treeish: str, name: str) -> str:
    """The object name of the tree ``treeish`` less its entry ``name``: what ``git mktree`` of
    the remaining entries would write, hashed without writing anything."""
    body = b""
    for entry in _git("ls-tree", "-z", treeish).split(b"\0"):
        if not entry:
            continue
        meta, entry_name = entry.split(b"\t", 1)
        mode, _kind, sha = meta.split(b" ")
        if entry_name == name.encode():
            continue
        body += mode.lstrip(b"0") + b" " + entry_name + b"\0" + bytes.fromhex(sha.decode())
    return _git("hash-object", "-t", "tree", "--stdin", stdin=body).decode().strip()


@functools.cache
def _code_version() -> dict[str, Any]:
    specs = ["--", *CODE_DIRS, f":(exclude)experiments/{NOT_CODE}"]
    try:
        commit = _git("rev-parse", "--verify", "HEAD").decode().strip()
        trees = {
            "bdl": _git("rev-parse", "HEAD:./bdl").decode().strip(),
            "experiments": tree_without("HEAD:./experiments", NOT_CODE),
        }
        diff = _git("diff", "--binary", "--no-ext-diff", "--no-textconv", "HEAD", *specs)
        untracked = [
            p
            for p in _git("ls-files", "-z", "--others", "--exclude-standard", *specs).split(b"\0")
            if p
        ]
    except (OSError, subprocess.SubprocessError, ValueError):
        return UNKNOWN_CODE
    version: dict[str, Any] = {"commit": commit, "dirty": bool(diff or untracked), "trees": trees}
    if version["dirty"]:
        digest = hashlib.sha256(diff)
        for name in sorted(untracked):
            digest.update(b"\0" + name + b"\0")
            with contextlib.suppress(OSError):  # removed since git listed it
                digest.update((ROOT / name.decode()).read_bytes())
        version["dirty_digest"] = digest.hexdigest()[:16]
    return version


def code_version() -> dict[str, Any]:
    """The code this process runs, computed once: ``{"commit": HEAD's sha, "dirty": whether
    ``bdl/`` or ``experiments/`` (less ``experiments/results/``) differ from HEAD, untracked
    files included, "trees": {"bdl": HEAD's tree of bdl/, "experiments": HEAD's tree of
    experiments/ less results/}}``; when dirty also ``"dirty_digest"``, a SHA-256 prefix of the
    uncommitted changes (the diff against HEAD and the untracked files' contents), which tells two
    dirty runs apart but names no commit. Outside a git checkout, or without git, every value is
    ``None``."""
    return copy.deepcopy(_code_version())


def short(sha: str | None) -> str:
    """The first seven hex digits of a commit or tree (``?`` for none)."""
    return sha[:7] if sha else "?"


@dataclass(frozen=True)
class Provenance:
    """What a page's records say about the code that produced them, against the current code.

    ``stale``: some record came from other trees of ``bdl/`` or ``experiments/``, from
    uncommitted changes, or records no code at all (or the current code is uncommitted or
    unknown). ``note``: the note under the page's title when stale. ``code``: the Setup's
    "Code:" item. ``origin``: which code, in a few words, for the verdict."""

    stale: bool
    note: str
    code: str
    origin: str

    def header(self) -> list[str]:
        """The note's lines for right under the title (none when current)."""
        return [f"> **Stale:** {self.note}", ""] if self.stale else []

    def verdict(self, text: str) -> str:
        """``text``, marked as from older code when stale."""
        if not self.stale:
            return text
        return f"*From {self.origin} (see the Stale note):* {text}"


def _describe(version: dict[str, Any] | None, current: dict[str, Any]) -> str:
    """One code version, against the current one, in a few words."""
    if version is None:
        return "no recorded code version"
    if version.get("commit") is None:
        return "code outside a git checkout"
    text = f"commit {short(version['commit'])}"
    if version.get("dirty"):
        return text + f" with uncommitted changes (digest {version.get('dirty_digest', '?')})"
    trees, now = version.get("trees") or {}, current.get("trees") or {}
    changed = [f"{d}/" for d in CODE_DIRS if trees.get(d) != now.get(d)]
    if current.get("commit") is None:
        return text + ", clean"
    if not changed:
        return text + ", clean, the current trees"
    return text + ", clean; " + " and ".join(changed) + " changed since"


def provenance(
    records: Iterable[dict[str, Any]], rerun: str, current: dict[str, Any] | None = None
) -> Provenance:
    """Compare the code versions of ``records`` (their ``"code"``) with ``current`` (default:
    :func:`code_version`). Current only when every record has the same trees of ``bdl/`` and
    ``experiments/`` as the current code, neither side has uncommitted changes, and the
    current code is known; otherwise stale, with a note saying which code produced them and
    ``rerun`` (the command to refresh them)."""
    current = code_version() if current is None else current
    groups: dict[str, tuple[dict[str, Any] | None, int]] = {}
    for r in records:
        version = r.get("code")
        key = json.dumps(version, sort_keys=True)
        groups[key] = (version, groups.get(key, (None, 0))[1] + 1)
    if not groups:
        return Provenance(False, "", "no results yet", "no results")
    versions = [v for v, _ in groups.values()]
    known = current.get("commit") is not None
    fresh = (
        known
        and not current.get("dirty")
        and all(
            v is not None
            and not v.get("dirty")
            and v.get("commit") is not None
            and v.get("trees") == current.get("trees")
            for v in versions
        )
    )
    if fresh:
        commits = sorted({short(v["commit"]) for v in versions})
        code = (
            f"commit {', '.join(commits)}, clean (bdl/ tree {short(current['trees']['bdl'])}, "
            f"experiments/ tree {short(current['trees']['experiments'])} less results/): the "
            "current code"
        )
        return Provenance(False, "", code, "the current code")
    if len(groups) == 1:
        version = versions[0]
        described = _describe(version, current)
        if version is None:
            note = (
                "these results do not record the code that produced them (they were written "
                "before results recorded it), so they may come from older code than bdl/ and "
                "experiments/ hold now"
            )
            origin = "code that was not recorded, possibly older than the current code"
        elif version.get("commit") is None:
            note = "these results were produced outside a git checkout, by code not recorded"
            origin = "code that was not recorded"
        elif version.get("dirty"):
            note = (
                f"these results were produced by {described}, not by committed code, so "
                "no commit holds the code that produced them"
            )
            origin = f"uncommitted code on commit {short(version['commit'])}"
        else:
            note = f"these results were produced by {described}"
            origin = f"the code of commit {short(version['commit'])}"
    else:
        parts = [
            f"{_describe(v, current)} ({n} record{'s' if n > 1 else ''})"
            for v, n in groups.values()
        ]
        note = f"these results mix {len(groups)} code versions: " + "; ".join(parts)
        described = f"{len(groups)} code versions: " + "; ".join(parts)
        origin = f"{len(groups)} code versions, not all the current code"
    if not known:
        note += (
            "; the current code's version is unknown (no git checkout, or no git), so they "
            "cannot be matched to it"
        )
    elif current.get("dirty"):
        note += (
            f"; the working tree now has uncommitted changes to bdl/ or experiments/ (on "
            f"commit {short(current['commit'])})"
        )
    note += f". Re-run `{rerun}` to refresh them."
    return Provenance(True, note, f"{described}; stale (see the note at the top)", origin)


LIBRARIES = (
    "jax", "jaxlib", "numpy", "scipy", "numpyro", "flax", "optax", "equinox", "scikit-learn",
    "mnist1d",
)  # fmt: skip


@functools.cache
def run_environment() -> dict[str, Any]:
    """The machine and the library versions this process runs. The code alone does not fix the
    numbers: floating-point results differ between processors and library versions, and a
    chain amplifies the difference, so a unit re-run elsewhere gives other values (and a
    difference near two standard errors may change its verdict)."""
    import importlib.metadata

    import jax

    versions: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "backend": jax.default_backend(),
        "device": jax.devices()[0].device_kind,
        "versions": versions,
    }


def _cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def describe_environment(env: Mapping[str, Any]) -> str:
    """One line: jax, the device, the cores and the processor, python, the other libraries."""
    versions = env.get("versions", {})
    libraries = ", ".join(
        f"{name} {versions[name]}" for name in LIBRARIES[1:] if versions.get(name) is not None
    )
    return (
        f"jax {versions.get('jax')}, {env.get('backend')} ({env.get('device')}), "
        f"{env.get('cores')} CPU cores ({env.get('cpu')}), python {env.get('python')}; "
        f"{libraries}"
    )


def environment(page_only: bool = False, records: Iterable[Mapping[str, Any]] = ()) -> str:
    """Where the page's runs ran, for the page: the environment its ``records`` recorded (more
    than one is named as such), with this run's load at the end; with ``page_only`` (a page
    rewritten from earlier results) the load is not known. Records from before environments
    were recorded are said to be of an unrecorded machine."""
    seen: dict[str, Mapping[str, Any]] = {}
    unrecorded = 0
    for r in records:
        env = r.get("environment")
        if env is None:
            unrecorded += 1
        else:
            seen.setdefault(json.dumps(env, sort_keys=True), env)
    if not page_only:
        seen.setdefault(json.dumps(run_environment(), sort_keys=True), run_environment())
    where = "; ".join(describe_environment(env) for env in seen.values())
    if len(seen) > 1:
        where = f"{len(seen)} environments: {where}"
    if unrecorded:
        units = f"{unrecorded} unit{'s' if unrecorded != 1 else ''}"
        where += f"{'; ' if where else ''}{units} on a machine not recorded"
    if page_only:
        return f"{where} (page rewritten from the results with `--page-only`; load not recorded)"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
    return f"{where}, load average {load:.2f} at the end"


def results_path(args: argparse.Namespace, name: str) -> Path:
    return args.results / f"{name}{suffix(args)}.jsonl"


def write_page(args: argparse.Namespace, name: str, text: str) -> Path:
    """Write ``docs/experiments/<name>.md`` (``<name>-quick.md`` for a quick run); when that is
    the documentation's page (not a smoke run's, not another ``--pages``), rebuild the table of
    ``docs/experiments/index.md`` too."""
    args.pages.mkdir(parents=True, exist_ok=True)
    path = args.pages / f"{name}{suffix(args)}.md"
    path.write_text(text)
    print(f"wrote {path}", flush=True)
    if not getattr(args, "smoke", False) and Path(args.pages).resolve() == PAGES.resolve():
        import index

        print(f"wrote {index.write_index(results=Path(args.results))}", flush=True)
    return path


def command_line(name: str, args: argparse.Namespace, fresh: bool = False) -> str:
    """The command that runs this configuration (with ``--fresh`` when ``fresh``)."""
    flags = " --quick" if args.quick else " --smoke" if getattr(args, "smoke", False) else ""
    default = ROOT / "experiments" / f"{name}.toml"
    if Path(args.config).resolve() != default:
        try:
            shown = Path(args.config).resolve().relative_to(ROOT)
        except ValueError:
            shown = Path(args.config)
        flags = f" --config {shown}{flags}"
    return f"python experiments/{name}.py{flags}" + (" --fresh" if fresh else "")


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

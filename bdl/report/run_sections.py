"""The report's sections about the run itself: settings and provenance, the convergence verdict,
the chains' divergences and run-aways, and the adapted hyper-parameters."""

from __future__ import annotations

import datetime
import json
import platform
import subprocess
from pathlib import Path
from typing import Any

import jax
import numpy as np

from bdl.report.page import note, paragraph, table
from bdl.report.traces import Quantities, events


def settings_parts(samples: Any, target: Any, version: str) -> list[str]:
    """Model, kernel, hyper-parameters, seed, steps, bdl's version and commit, as a table."""
    meta = dict(getattr(samples, "meta", {}) or {})
    settings = dict(meta.get("settings", {}))
    kernel = meta.get("kernel", {})
    model = meta.get("model") or getattr(target, "name", None) or "(not recorded)"
    rows: list[list[Any]] = [["model", model], ["kernel", samples.kernel]]
    for key in ("seed", "num_steps", "burn_in", "thin", "num_chains", "init", "augment"):
        if key in settings:
            rows.append([key.replace("_", " "), settings[key]])
    rows += [
        ["steps done", int(samples.steps_done)],
        ["chains × draws kept", f"{samples.num_chains} × {samples.num_draws}"],
        ["interrupted", "yes" if samples.interrupted else "no"],
        ["bdl version", meta.get("bdl_version", version)],
        ["bdl commit", commit() or "(not a git checkout)"],
        ["JAX", f"{jax.__version__} on {jax.default_backend()}"],
        ["Python", platform.python_version()],
        ["report written", datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")],
    ]
    if len(rows) % 2:
        rows.append(["", ""])
    half = len(rows) // 2  # two settings per row: the table is half as tall
    paired = [[*a, *b] for a, b in zip(rows[:half], rows[half:], strict=True)]
    parts = [table(["setting", "value", "setting", "value"], paired)]
    if isinstance(kernel, dict) and kernel:
        described = json.dumps(kernel.get("hyper", kernel), default=str, sort_keys=True)
        parts.append(paragraph(f"kernel as run: {described}", "note"))
    if not meta:
        parts.append(note("these draws carry no run record (Samples.meta is empty)."))
    return parts


def commit() -> str | None:
    """The git commit of the bdl source in use (``+dirty`` with local changes), or ``None``."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "bdl"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "") if head else None


def convergence_parts(samples: Any, found: Quantities | None, what: str, shown: int) -> list[str]:
    """The verdict of ``samples.convergence`` and the R̂/ESS of the worst quantities."""
    verdict = getattr(samples, "convergence", None)
    if verdict is None:
        parts = [
            note(
                "no convergence verdict: nothing was checked (no draws kept, a run at "
                "temperature 0, draws assembled by hand, or a file written before bdl checked)."
            )
        ]
    else:
        parts = [paragraph(verdict.summary(), "ok" if verdict.mixing_ok else "fail")]
        if not verdict.mixing_ok:
            parts.append(table(["failed criterion"], [[p] for p in verdict.problems()]))
            parts.append(paragraph("To do: " + verdict.advice() + "."))
    if found is None:
        parts.append(note(what))
        return parts
    parts.append(paragraph(f"Recomputed for this report on {what}"))
    rows = [
        [found.names[i], float(found.rhat[i]), float(found.ess_bulk[i]), float(found.ess_tail[i])]
        for i in found.worst(shown)
    ]
    need = 100 * found.chains.size
    parts.append(table(["quantity (worst R̂ first)", "R̂", "bulk ESS", "tail ESS"], rows))
    parts.append(note(f"thresholds: R̂ < 1.01, bulk and tail ESS ≥ {need} (100 per chain)."))
    return parts


def bias_parts(samples: Any) -> list[str]:
    """The bias part of the verdict (``samples.convergence.bias``): its line, the failed tests
    with their values and standard errors, and what to change."""
    verdict = getattr(samples, "convergence", None)
    bias = None if verdict is None else getattr(verdict, "bias", None)
    if bias is None:
        return [
            note(
                "no bias check: it needs the model (full-data gradients at the draws) and draws "
                "at a temperature above 0; a file written before bdl checked bias has none."
            )
        ]
    parts = [paragraph(bias.summary(), "ok" if bias.ok else "fail")]
    if bias.findings:
        rows = [
            [f.kind, f.at or "(pooled)", f.family or "-", f.value, f.se, f.limit]
            for f in bias.findings
        ]
        parts.append(
            table(["failed statistic", "coordinate", "test function", "value", "se", "limit"], rows)
        )
        parts.append(paragraph(bias.report()))
    parts.append(
        note(
            "spread: the ratio of the draws' spread to the target's implied by the Stein identity "
            "E[φ(θ_i)·u_i] = E[φ'(θ_i)] (1: right); mean: the mean's error in the target's sds "
            "(0: right). Limits: the tolerance plus the quantile of the run's 5 % false-alarm "
            "rate times the standard error (docs/troubleshooting.md, 'The draws are biased')."
        )
    )
    return parts


def chain_parts(samples: Any) -> list[str]:
    """One row per chain: diverged (and at which step), run-away (when recorded)."""
    runaway = getattr(samples, "runaway", None)
    runaway_step = getattr(samples, "runaway_step", None)
    head = ["chain", "healthy", "diverged at step"]
    if runaway is not None:
        head.append("run-away from step")
    rows = []
    for c in range(samples.num_chains):
        diverged = bool(np.asarray(samples.diverged)[c])
        row: list[Any] = [c]
        flagged = diverged or (runaway is not None and bool(np.asarray(runaway)[c]))
        row.append(not flagged)
        row.append(int(np.asarray(samples.divergence_step)[c]) if diverged else "-")
        if runaway is not None:
            away = bool(np.asarray(runaway)[c])
            step = None if runaway_step is None else int(np.asarray(runaway_step)[c])
            row.append((step if step is not None and step >= 0 else "yes") if away else "-")
        rows.append(row)
    parts = [table(head, rows)]
    marked = events(samples)
    if marked:
        parts.append(
            paragraph(
                "Marked on the traces (dashed: divergence, dotted: run-away): "
                + ", ".join(f"chain {c} {what} at draw {d}" for c, d, what in marked)
                + "."
            )
        )
    if np.any(samples.diverged):
        parts.append(paragraph(samples.divergence_report()))
    if runaway is None:
        parts.append(note("this run records no run-away flags (samples.runaway)."))
    return parts


def adapted_parts(samples: Any) -> list[str]:
    """Step size, friction and the mass's range per chain, as warm-up chose them."""
    adapted = getattr(samples, "adapted", None)
    if not adapted:
        return [note("nothing was adapted: the kernel ran with its own hyper-parameters.")]
    head, columns = ["chain"], []
    for key, value in adapted.items():
        leaves = [np.asarray(x, np.float64) for x in jax.tree.leaves(value)]
        if not leaves:
            continue
        if (
            all(a.ndim == 1 and a.shape[0] == samples.num_chains for a in leaves)
            and len(leaves) == 1
        ):
            head.append(key.replace("_", " "))
            columns.append([float(v) for v in leaves[0]])
        elif key == "inverse_mass":  # dense, (chains, d, d): its diagonal's range per chain
            diagonal = np.diagonal(leaves[0], axis1=-2, axis2=-1)
            head.append("inverse mass (dense: diagonal min … max)")
            columns.append([f"{lo:.3g} … {hi:.3g}" for lo, hi in zip(
                diagonal.min(axis=1), diagonal.max(axis=1), strict=True)])  # fmt: skip
        else:  # a diagonal mass: its range per chain over every coordinate
            per_chain = [a.reshape(samples.num_chains, -1) for a in leaves]
            stacked = np.concatenate(per_chain, axis=1)
            head.append(f"{key.replace('_', ' ')} (min … max)")
            columns.append([f"{lo:.3g} … {hi:.3g}" for lo, hi in zip(
                stacked.min(axis=1), stacked.max(axis=1), strict=True)])  # fmt: skip
    rows = [[c, *(col[c] for col in columns)] for c in range(samples.num_chains)]
    return [table(head, rows)]

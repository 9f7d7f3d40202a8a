"""``write_report``: one self-contained HTML file about a run (docs/report.md)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from bdl.report.held_out import bma_parts, validation_parts
from bdl.report.page import figure, note, page, section
from bdl.report.run_sections import (
    adapted_parts,
    bias_parts,
    chain_parts,
    convergence_parts,
    settings_parts,
)
from bdl.report.temperatures import temperature_parts
from bdl.report.traces import monitored, trace_figures
from bdl.utils.files import can_create_in

#: quantities plotted (trace and rank) and listed with their R̂ and ESS, by default
DEFAULT_QUANTITIES = 6


def write_report(
    samples: Any,
    path: str | os.PathLike,
    *,
    target: Any = None,
    validation: Any = None,
    quantities: int = DEFAULT_QUANTITIES,
) -> Path:
    """Write the run report of ``samples`` to ``path``: one HTML file, figures embedded.

    Args:
        samples: a :class:`bdl.Samples` (what :func:`bdl.sample` returned or
            :func:`bdl.load_samples` read).
        path: the ``.html`` file to write (its directory must exist).
        target: the compiled model or potential the draws came from: needed for a network's
            function-space traces, the configurational temperature and the held-out BMA.
        validation: what :func:`bdl.validate` returned, for the comparison with NUTS.
        quantities: how many quantities (the worst by R̂) to plot, at least 1.

    Returns:
        the path written.

    Raises:
        TypeError: ``samples`` is not a Samples, or ``quantities`` not an integer.
        ValueError: ``path`` does not end in ``.html``, or its directory does not exist or
            cannot be written in (checked before any figure is drawn), or ``quantities`` < 1.
    """
    from bdl import __version__

    _check(samples, path, quantities)
    path = Path(path)
    import matplotlib

    matplotlib.use("Agg")
    found, what = monitored(samples, target)
    with warnings.catch_warnings():  # every chain diverged etc.: said in the report itself
        warnings.simplefilter("ignore")
        parts = {
            "settings": settings_parts(samples, target, __version__),
            "convergence": convergence_parts(samples, found, what, quantities),
            "bias": bias_parts(samples),
            "traces": _trace_parts(samples, found, what, quantities),
            "chains": chain_parts(samples),
            "adapted": adapted_parts(samples),
            "temperatures": temperature_parts(samples, target),
            "validation": (
                [note("not a validation: bdl validate --report (or validation=) adds NUTS.")]
                if validation is None
                else validation_parts(validation, target)
            ),
            "bma": bma_parts(samples, target),
        }
    verdict = getattr(samples, "convergence", None)
    line, good = _verdict(samples, verdict, validation)
    model = (getattr(samples, "meta", None) or {}).get("model") or getattr(target, "name", "run")
    html = page(
        f"bdl run report: {model}, {samples.kernel}",
        (line, good),
        {name: section(name, body) for name, body in parts.items()},
    )
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, path)
    return path


def _trace_parts(samples: Any, found: Any, what: str, count: int) -> list[str]:
    if found is None:
        return [note(what)]
    if samples.num_draws < 4:
        return [note(f"{samples.num_draws} draws per chain: too few to plot traces and ranks.")]
    trace, rank = trace_figures(samples, found, count)
    shown = min(count, len(found.names))
    ranked = (
        "each chain's normal scores within itself, what R̂ reads"
        if found.scored_within_chains
        else "what R̂ reads"
    )
    return [
        figure(
            trace,
            "trace",
            f"the {shown} quantities with the largest R̂ — left, each chain's distribution in a "
            "band of its own (shared bins, each scaled to its peak); right, the traces: "
            f"{what}",
        ),
        figure(
            rank,
            "rank",
            f"rank plots of the same quantities ({ranked}): flat bars in every chain mean the "
            "chains mix.",
        ),
    ]


def _verdict(samples: Any, verdict: Any, validation: Any) -> tuple[str, bool | None]:
    bits, good = [], None
    if verdict is not None:
        bits.append("converged" if verdict.mixing_ok else "NOT converged")
        if getattr(verdict, "bias", None) is not None:
            bits.append("biased" if verdict.biased else "no bias found")
        good = bool(verdict.ok)
    diverged = int(sum(bool(d) for d in samples.diverged))
    if diverged:
        bits.append(f"{diverged} of {samples.num_chains} chains diverged")
        good = False
    runaway = getattr(samples, "runaway", None)
    if runaway is not None and any(bool(r) for r in runaway):
        count = int(sum(bool(r) for r in runaway))
        bits.append(f"{count} run-away chain{'s' if count != 1 else ''}")
        good = False
    if validation is not None:
        bits.append("validation " + ("PASS" if validation.passed else "FAIL"))
        good = bool(validation.passed) and good is not False
    if samples.interrupted:
        bits.append("interrupted")
    return ("; ".join(bits) or "no verdict (nothing was checked)"), good


def _check(samples: Any, path: Any, quantities: Any) -> None:
    if not all(hasattr(samples, a) for a in ("positions", "diverged", "steps", "kernel")):
        raise TypeError(
            f"write_report needs a bdl.Samples (what bdl.sample returns); got "
            f"{type(samples).__name__}."
        )
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"report path must be a str or a path; got {type(path).__name__}.")
    target = Path(path)
    if target.suffix.lower() not in (".html", ".htm"):
        raise ValueError(
            f"report path {str(target)!r} must end in .html (e.g. {target.with_suffix('.html')})."
        )
    if not target.parent.is_dir():
        raise ValueError(
            f"report path {str(target)!r}: the directory {str(target.parent)!r} does not exist; "
            "create it first."
        )
    if not can_create_in(target.parent):
        raise ValueError(
            f"report path {str(target)!r}: this process cannot create files in "
            f"{str(target.parent)!r} (no write permission, or a read-only file system); give a "
            "path in a directory you can write in."
        )
    if isinstance(quantities, bool) or not isinstance(quantities, int):
        raise TypeError(f"quantities must be an integer ≥ 1; got {quantities!r}.")
    if quantities < 1:
        raise ValueError(f"quantities must be ≥ 1 (how many to plot); got {quantities}.")

"""The table of ``docs/experiments/index.md``, rebuilt from the experiments' pages and results.

One row per experiment: its page (and the quick run's), the paper and the claim tested (fixed
here), the status of the run the page shows (full or quick, seeds, units, minutes of runs, when
it started: from the results file) with the page's stale note when it has one, and the page's own
verdict sentence, word for word, so that the table says nothing its page's rule does not. The
text around the table is hand-written and kept; each experiment rewrites the table after writing
its page, or

    python experiments/index.py [--pages DIR] [--results DIR]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from _harness import PAGES, RESULTS, read_results

BEGIN = (
    "<!-- the table below is written by experiments/index.py from the pages and their results; "
    "edit that script, not the table -->"
)
END = "<!-- end of the generated table -->"
VERDICT = "**Verdict:** "
STALE = "> **Stale:** "


class Experiment(NamedTuple):
    """What the table says of an experiment that its page does not."""

    name: str
    title: str
    paper: str
    claim: str


EXPERIMENTS = (
    Experiment(
        "cold_posterior",
        "cold posteriors",
        "Wenzel et al. 2020, Fig. 1, Sec. 5",
        "T = 1 loses to cold T; the gap depends on data augmentation",
    ),
    Experiment(
        "learned_samplers",
        "learned samplers on an unseen task",
        "Kim et al. 2024 Fig. 1; Gong et al. 2019 Sec. 5",
        "L2E / Kinetic-L2E / NNSGHMC beat SGHMC, cyclical SGHMC and a deep ensemble on a task "
        "outside their meta-training; does retraining with MNIST-1D MLPs in the family change "
        "that?",
    ),
    Experiment(
        "entropy_mcmc",
        "Entropy-MCMC",
        "Li & Zhang 2024, Sec. 6",
        "the guide θ_a sits in flatter regions and predicts better",
    ),
)


def page_line(text: str, start: str) -> str | None:
    """The rest of the first line of a page that starts with ``start``."""
    return next((line[len(start) :] for line in text.splitlines() if line.startswith(start)), None)


def page_verdict(text: str) -> str | None:
    """A page's verdict sentence (its ``**Verdict:**`` line, without the label)."""
    return page_line(text, VERDICT)


def page_stale(text: str) -> str | None:
    """A page's stale note (the line under its title), or ``None`` when it has none."""
    return page_line(text, STALE)


def status(experiment: Experiment, results: Path, quick: bool) -> str:
    """Full or quick run, seeds, units and minutes of runs of the records the page shows."""
    path = results / f"{experiment.name}{'-quick' if quick else ''}.jsonl"
    kind = "quick run" if quick else "full run"
    if not path.is_file():
        return f"{kind}: no results file"
    header, by_key = read_results(path)
    config: dict[str, Any] = json.loads(header["config"])
    module = importlib.import_module(experiment.name)
    try:
        records = module.page_records(config, by_key)
    except SystemExit as refusal:  # e.g. a meta-parameter file the configuration names is gone
        return f"{kind}: its records cannot be read ({refusal})"
    minutes = sum(r.get("seconds", 0.0) for r in records) / 60
    seeds = config["experiment"]["seeds"]
    started = f", started {header['started']}" if "started" in header else ""
    return f"{kind}: {len(seeds)} seeds, {len(records)} units, {minutes:.1f} min of runs{started}"


def cell(text: str) -> str:
    """``text`` for a table cell (``|`` escaped)."""
    return text.replace("|", "\\|")


def row(experiment: Experiment, pages: Path, results: Path) -> str:
    """The experiment's row: from the full run's page, or the quick run's when it has none."""
    full, quick = (pages / f"{experiment.name}{s}.md" for s in ("", "-quick"))
    shown = full if full.is_file() else quick
    link = f"[{experiment.title}]({full.name})" + (
        f" ([quick]({quick.name}))" if quick.is_file() else ""
    )
    if not shown.is_file():
        state, verdict = "not run yet", "—"
    else:
        text = shown.read_text()
        state = status(experiment, results, quick=shown is quick)
        stale = page_stale(text)
        if stale is not None:
            state += f". **Stale:** {stale}"
        verdict = page_verdict(text) or "—"
    cells = [link, experiment.paper, experiment.claim, state, verdict]
    return "| " + " | ".join(cell(c) if i > 0 else c for i, c in enumerate(cells)) + " |"


def table(pages: Path = PAGES, results: Path = RESULTS) -> list[str]:
    """The table's lines, between its markers."""
    return [
        BEGIN,
        "",
        "| experiment | paper | claim tested | status | verdict |",
        "|---|---|---|---|---|",
        *(row(e, pages, results) for e in EXPERIMENTS),
        "",
        END,
    ]


def write_index(pages: Path = PAGES, results: Path = RESULTS) -> Path:
    """Rewrite the table of ``pages/index.md`` between its markers (the text around it is
    kept); an index without the markers gets the table at its end."""
    path = pages / "index.md"
    text = path.read_text() if path.is_file() else "# Experiments\n"
    lines = text.rstrip("\n").split("\n")
    if BEGIN in lines and END in lines:
        begin, end = lines.index(BEGIN), lines.index(END)
        lines[begin : end + 1] = table(pages, results)
    else:
        lines += ["", *table(pages, results)]
    path.write_text("\n".join(lines) + "\n")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite the table of ``--pages``/index.md."""
    p = argparse.ArgumentParser(prog="experiments/index.py", description=__doc__.split("\n")[0])
    p.add_argument("--pages", type=Path, default=PAGES, help="directory of the pages")
    p.add_argument("--results", type=Path, default=RESULTS, help="directory of the results")
    args = p.parse_args(argv)
    print(f"wrote {write_index(args.pages, args.results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

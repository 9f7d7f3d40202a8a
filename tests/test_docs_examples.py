"""The code in README.md and the runnable blocks of docs/ execute as written (so they cannot rot).

* README.md: its ```python block runs with the long run ``num_steps=10_000, burn_in=2_000,
  thin=100`` replaced by a short one, in a temporary directory, and must print a labelled test
  accuracy in [0, 1] and the convergence verdict, and write its run report.
* docs/*.md: every ```python block directly preceded by the line ``<!-- runnable -->`` runs in a
  fresh namespace (the convention is stated in docs/dsl.md).
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNNABLE_DOCS = (
    "docs/dsl.md",
    "docs/compiler.md",
    "docs/sampling.md",
    "docs/saving.md",
    "docs/evaluation.md",
    "docs/data.md",
    "docs/augmentation.md",
    "docs/architecture.md",
    "docs/troubleshooting.md",
    "docs/scaling.md",
)
MARKER = "<!-- runnable -->"
README_RUN = "num_steps=10_000, burn_in=2_000, thin=100"
SHORT_RUN = "num_steps=400, burn_in=200, thin=50"

_FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def python_blocks(text: str) -> list[tuple[int, str, bool]]:
    """Every ```python block as (line number, code, marked runnable)."""
    blocks = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        blocks.append((line, match.group(1), before == MARKER))
    return blocks


def run_block(code: str, name: str) -> str:
    """Execute ``code`` in a fresh namespace and return what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, name, "exec", dont_inherit=True), {"__name__": "__docs__"})
    return out.getvalue()


def _runnable() -> list:
    params = []
    for doc in RUNNABLE_DOCS:
        path = ROOT / doc
        if not path.is_file():
            continue
        for line, code, runnable in python_blocks(path.read_text(encoding="utf-8")):
            if runnable:
                params.append(pytest.param(code, f"{doc}:{line}", id=f"{doc}:{line}"))
    return params


def test_readme_example_runs(tmp_path, monkeypatch):
    """The README example, shortened, trains, prints a labelled BMA test accuracy and the
    convergence verdict, and writes its run report."""
    blocks = python_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(blocks) == 1, "README.md should hold exactly one ```python block"
    code = blocks[0][1]
    assert README_RUN in code, f"README example no longer contains {README_RUN!r}; update this test"
    monkeypatch.chdir(tmp_path)  # the example writes run.html where it runs
    printed = run_block(code.replace(README_RUN, SHORT_RUN), "README.md")
    found = re.search(r"^BMA test accuracy: ([0-9.]+) \(4 chains x \d+ draws\)$", printed, re.M)
    assert found, f"the README example should print 'BMA test accuracy: …'; printed {printed!r}"
    accuracy = float(found.group(1))
    assert 0.0 <= accuracy <= 1.0
    assert accuracy > 0.5  # 10 classes: chance is 0.1; a short SGHMC run reaches ~0.9
    assert re.search(r"^convergence: (ok|NOT CONVERGED): max R̂", printed, re.M), printed
    assert re.search(r"^bias: (ok|BIASED): configurational temperature", printed, re.M), printed
    assert (tmp_path / "run.html").stat().st_size > 10_000


def test_some_doc_blocks_are_runnable():
    """The convention is in use (guards against a renamed marker silently skipping every block)."""
    assert len(_runnable()) >= 5


@pytest.mark.parametrize(("code", "name"), _runnable())
def test_runnable_doc_block(code, name):
    run_block(code, name)


def test_the_readme_quotes_the_measured_spread_of_its_example():
    """The ranges the README gives for its example's figures are those measured over seeds by
    scripts/readme_spread.py (docs/readme_spread.json), at the digits quoted, and the quoted
    seed-0 output lies inside them."""
    import json

    spread = json.loads((ROOT / "docs/readme_spread.json").read_text(encoding="utf-8"))["range"]
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())

    def quoted(name: str, digits: int) -> str:
        low, high = spread[name]
        return f"{low:.{digits}f}–{high:.{digits}f}"

    for name, digits in [
        ("accuracy", 3),
        ("max_rhat", 1),
        ("bma_agreement", 3),
        ("bma_total_variation", 3),
    ]:
        assert quoted(name, digits) in text, (name, quoted(name, digits))
    low = spread["configurational_temperature_min"][0]
    high = spread["configurational_temperature_max"][1]
    assert f"configurational temperatures {low:.2f}–{high:.2f}·T" in text
    low, high = spread["accuracy"]
    seed0 = float(re.search(r"BMA test accuracy: ([0-9.]+)", text).group(1))
    assert low - 5e-4 <= seed0 <= high + 5e-4

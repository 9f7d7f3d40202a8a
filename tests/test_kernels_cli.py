"""``bdl kernels`` shows the shipped checker verdicts (bdl/kernels/verdicts.json) without running
the checker or importing what it does not need; the shipped verdicts cover every registered
kernel and agree with a fresh check (on the cheap kernels; ``scripts/kernel_verdicts.py``
rewrites them all)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import bdl
from bdl.cli.main import main
from bdl.kernels import verdicts

ROOT = Path(__file__).resolve().parents[1]


def test_every_registered_kernel_has_a_shipped_verdict_for_its_defaults():
    missing = [name for name in bdl.kernels.names() if verdicts.shipped_verdict(name) is None]
    assert not missing, f"run scripts/kernel_verdicts.py: no shipped verdict for {missing}"


@pytest.mark.parametrize("name", ["sgld", "psgld"])  # one exact, one approximate; both cheap
def test_shipped_verdicts_agree_with_a_fresh_check(name):
    assert verdicts.fresh(name) == verdicts.shipped_verdict(name)


def test_kernels_lists_the_shipped_verdicts_without_running_the_checker(monkeypatch, capsys):
    def forbidden(*args, **kwargs):
        raise AssertionError("bdl kernels ran the checker")

    monkeypatch.setattr(verdicts, "fresh", forbidden)
    monkeypatch.setattr(verdicts, "check", forbidden)
    assert main(["kernels"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == bdl.kernels.names()
    by_name = {line.split()[0]: line.split()[1] for line in lines}
    assert by_name["sgld"] == "exact" and by_name["psgld"] == "approximate"


def test_a_verdict_for_other_defaults_is_not_shown(monkeypatch, capsys):
    entries = verdicts.shipped()
    entries["sgld"] = {**entries["sgld"], "defaults": {"step_size": 123.0}}
    monkeypatch.setattr(verdicts, "shipped", lambda path=None: entries)
    assert main(["kernels", "sgld"]) == 0
    assert "unchecked" in capsys.readouterr().out


def test_check_reruns_the_checker_and_flags_a_disagreement(monkeypatch, capsys):
    monkeypatch.setattr(verdicts, "fresh", lambda name: ("approximate", ["a new reason"]))
    assert main(["kernels", "--check", "sgld"]) == 0
    out = capsys.readouterr().out
    assert "approximate" in out and "the shipped verdict says exact" in out


def test_kernels_imports_only_what_it_needs():
    code = (
        "import sys; from bdl.cli.main import main; main(['kernels']); "
        "print(sorted(m for m in ('numpyro', 'flax', 'optax', 'arviz', 'matplotlib', 'sklearn', "
        "'scipy', 'tensorflow_datasets') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "[]"

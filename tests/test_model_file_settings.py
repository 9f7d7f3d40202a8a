"""A model file's settings per kernel: hyper-parameters and, where a kernel needs them, its own run
lengths, which ``--tuned`` uses; every shipped file's suggestions build a kernel; and (slow) the
script that validates every model file with its settings passes eight schools."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import pytest

import bdl
from bdl.cli.options import run_lengths
from bdl.kernels import registry
from bdl.model_files import ModelFileError, load_spec, model_names

ROOT = Path(__file__).resolve().parent.parent


def _spec() -> bdl.ModelSpec:
    model = bdl.Model(lambda p, x: x @ p["w"], bdl.Gaussian(1.0), params={"w": jnp.zeros(2)})
    return bdl.ModelSpec(
        model,
        kernels={
            "sgld": {"step_size": 1e-3, "num_steps": 9_000, "thin": 30},
            "sghmc": {"step_size": 1e-2, "friction": 2.0},
        },
        num_steps=3_000,
        burn_in=500,
        thin=10,
    )


def _args(kernel: str, tuned: bool, **given) -> argparse.Namespace:
    values = {"steps": None, "burn_in": None, "thin": None, "chains": 4, **given}
    return argparse.Namespace(kernel=kernel, tuned=tuned, **values)


def test_run_lengths_are_not_hyper_parameters():
    spec = _spec()
    assert spec.kernel_hyper("sgld") == {"step_size": 1e-3}
    assert spec.kernel_lengths("sgld") == {"num_steps": 9_000, "thin": 30}
    assert spec.kernel_lengths("sghmc") == {} and spec.kernel_lengths("psgld") == {}


def test_tuned_runs_take_the_kernels_own_lengths():
    spec = _spec()
    tuned = run_lengths(_args("sgld", True), spec)
    assert (tuned.steps, tuned.burn_in, tuned.thin) == (9_000, 500, 30)
    plain = run_lengths(_args("sgld", False), spec)  # without --tuned: the file's defaults
    assert (plain.steps, plain.burn_in, plain.thin) == (3_000, 500, 10)
    given = run_lengths(_args("sgld", True, steps=4_000), spec)  # a flag wins
    assert (given.steps, given.thin) == (4_000, 30)
    other = run_lengths(_args("sghmc", True), spec)
    assert (other.steps, other.thin) == (3_000, 10)


def _shipped() -> list:
    pairs = []
    for name in model_names():
        try:
            spec = load_spec(name)
        except ModelFileError:  # data not prepared here (CIFAR-10 for resnet20_cifar)
            continue
        pairs += [pytest.param(spec, kernel, id=f"{name}-{kernel}") for kernel in spec.kernels]
    return pairs


@pytest.mark.parametrize(("spec", "kernel"), _shipped())
def test_every_shipped_suggestion_builds_its_kernel(spec, kernel):
    """The hyper-parameters are the kernel's, and the run lengths leave draws to keep."""
    registry.get(kernel, **spec.kernel_hyper(kernel))
    lengths = {"num_steps": spec.num_steps, "burn_in": spec.burn_in, "thin": spec.thin}
    lengths.update(spec.kernel_lengths(kernel))
    assert lengths["burn_in"] < lengths["num_steps"]
    assert lengths["thin"] <= lengths["num_steps"] - lengths["burn_in"]


def _validate_eight_schools(tmp_path, *options: str) -> Path:
    """``scripts/validate_model_files.py --models eight_schools`` with ``options``, writing into
    ``tmp_path``; the page's path, once the script has exited 0."""
    out = tmp_path / "model-files.md"
    command = [
        sys.executable,
        str(ROOT / "scripts" / "validate_model_files.py"),
        "--models",
        "eight_schools",
        *options,
        "--out",
        str(out),
        "--plots",
        str(tmp_path / "plots"),
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=3600)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.mark.slow
def test_the_validation_script_passes_eight_schools(tmp_path):
    """``scripts/validate_model_files.py`` on one model: ``bdl validate eight_schools --kernel
    sghmc --tuned`` (4 chains, seed 0) passes, and the page and its results are written."""
    out = _validate_eight_schools(tmp_path)
    rows = json.loads(out.with_suffix(".json").read_text())
    assert [(r["model"], r["kernel"], r["status"]) for r in rows] == [
        ("eight_schools", "sghmc", "PASS")
    ]
    assert "| `eight_schools` | `sghmc` |" in out.read_text()


def test_nuts_settings_come_from_the_file_unless_given():
    spec = _spec()
    assert spec.nuts_settings() == {"num_warmup": 1_000, "num_samples": 1_000}
    own = bdl.ModelSpec(spec.model, nuts={"num_warmup": 2_000, "num_samples": 5_000})
    assert own.nuts_settings() == {"num_warmup": 2_000, "num_samples": 5_000}
    assert own.nuts_settings(samples=300) == {"num_warmup": 2_000, "num_samples": 300}
    assert load_spec("two_mode").nuts_settings()["num_samples"] == 5_000


@pytest.mark.slow
def test_a_pair_without_a_reference_reports_its_own_runs_verdict(tmp_path):
    """A model over ``--max-params`` gets no NUTS reference: its kernel runs alone with the
    file's settings, and the row carries that run's convergence verdict."""
    out = _validate_eight_schools(tmp_path, "--max-params", "5")
    (row,) = json.loads(out.with_suffix(".json").read_text())
    assert row["status"] == "no reference" and row["command"].startswith("bdl sample")
    assert "its own run: converged (4 chains × " in row["note"]
    assert float(row["max_rhat"]) < 1.01 and float(row["min_bulk_ess"]) >= 400
    assert "1 of the 1 pairs without a reference converge" in out.read_text()

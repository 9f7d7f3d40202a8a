"""Chains and minibatches over several devices, and chains over several processes.

XLA fixes the number of CPU devices when a process starts, so the runs happen in subprocesses
with ``--xla_force_host_platform_device_count`` (tests/sharding_runs.py) and are compared here:

* shipped models with the chains in turn give bitwise the same positions, ``Info`` and adapted
  values on 1, 2 and 4 devices (layout_runs.py);
* on a toy network of 16 parameters, chain sharding gives bitwise the draws of one device, on 2
  or 4 devices and on 2 processes × 2 devices (``jax.distributed``, coordinator on
  127.0.0.1), with warm-up adaptation too, and a checkpoint written on 4 devices resumes on 2;
* a data axis gives the one-device draws to float reassociation: the minibatch energy is the
  average over devices of the shares' full-data-scale energies (bdl/sampling/run/layout.py).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import bdl

SCRIPT = Path(__file__).with_name("sharding_runs.py")
MODEL_SCRIPT = Path(__file__).with_name("layout_runs.py")


def _env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{path}" if path else root}


def _script(mode: str, out: Path, script: Path = SCRIPT) -> Path:
    done = subprocess.run(
        [sys.executable, str(script), mode, str(out)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return _script("devices", tmp_path_factory.mktemp("devices"))


@pytest.fixture(scope="module")
def more_runs(tmp_path_factory):
    return _script("more-devices", tmp_path_factory.mktemp("more-devices"))


@pytest.fixture(scope="module")
def model_quick_runs(tmp_path_factory):
    return _script("quick", tmp_path_factory.mktemp("models-quick"), MODEL_SCRIPT)


@pytest.fixture(scope="module")
def model_runs(tmp_path_factory):
    return _script("models", tmp_path_factory.mktemp("models"), MODEL_SCRIPT)


def _load(out: Path, name: str) -> bdl.Samples:
    return bdl.load_samples(out / f"{name}.npz")


def assert_bitwise(a: bdl.Samples, b: bdl.Samples) -> None:
    for x, y in zip(jax.tree.leaves(a.positions), jax.tree.leaves(b.positions), strict=True):
        np.testing.assert_array_equal(x, y)
    for k in a.info:
        np.testing.assert_array_equal(a.info[k], b.info[k])
    np.testing.assert_array_equal(a.steps, b.steps)
    np.testing.assert_array_equal(a.diverged, b.diverged)


def assert_same_run(a: bdl.Samples, b: bdl.Samples) -> None:
    """Positions, every ``Info`` field, steps, divergences and adapted values bitwise equal."""
    assert set(a.info) == set(b.info) and a.info
    assert_bitwise(a, b)
    assert (a.adapted is None) == (b.adapted is None)
    if a.adapted is not None:
        assert set(a.adapted) == set(b.adapted)
        for name in a.adapted:
            pairs = zip(jax.tree.leaves(a.adapted[name]), jax.tree.leaves(b.adapted[name]),
                        strict=True)  # fmt: skip
            for x, y in pairs:
                np.testing.assert_array_equal(x, y)


def test_chains_in_turn_give_a_shipped_model_bitwise_the_same_run_on_any_layout(
    model_quick_runs,
):
    """linear_regression, SGHMC with its fixed step, 4 chains in turn on 1, 2 and 4 devices
    (4, 2 and 1 chains per device): positions and every ``Info`` field bitwise equal."""
    one = _load(model_quick_runs, "linear_regression-fixed-1")
    for devices in (2, 4):
        other = _load(model_quick_runs, f"linear_regression-fixed-{devices}")
        assert other.meta["layout"]["chain_devices"] == devices
        assert_same_run(one, other)


def _model_cases() -> list[tuple[str, str, tuple]]:
    from layout_runs import MODELS

    return [
        (name, mode, layouts)
        for name, both in MODELS.items()
        for mode, layouts in zip(("fixed", "adapted"), both, strict=True)
        if layouts
    ]


@pytest.mark.slow
@pytest.mark.parametrize(("model", "mode", "layouts"), _model_cases())
def test_chains_in_turn_give_shipped_models_bitwise_the_same_run_on_any_layout(
    model_runs, model, mode, layouts
):
    """Each model of layout_runs.MODELS, SGHMC with a fixed step and adapted in warm-up, 4
    chains in turn on the listed layouts (1, 2 and 4 devices; each device runs the one-device
    program on its chains): positions, ``Info`` and adapted values bitwise."""
    first = _load(model_runs, f"{model}-{mode}-{layouts[0]}")
    assert (first.adapted is not None) == (mode == "adapted")
    for devices in layouts[1:]:
        assert_same_run(first, _load(model_runs, f"{model}-{mode}-{devices}"))


def test_chains_over_devices_are_bitwise_one_device(runs):
    one, four = _load(runs, "one"), _load(runs, "four")
    assert one.num_chains == 4 and "layout" not in one.meta
    assert four.meta["layout"]["chain_devices"] == 4  # the default: every local device
    assert_bitwise(one, four)


def test_the_blocked_loop_over_devices_gives_the_same_draws(runs):
    """The accelerator loop (steps in blocks of static length, ``thin`` static), run on 4 CPU
    devices, passes its static lengths through the device layout and gives the same draws."""
    four, blocked = _load(runs, "four"), _load(runs, "four_blocked")
    assert blocked.meta["layout"]["chain_devices"] == 4
    assert_bitwise(four, blocked)


@pytest.mark.slow
def test_two_chains_per_device_are_bitwise_one_device(runs, more_runs):
    two = _load(more_runs, "two")
    assert two.meta["layout"]["chain_devices"] == 2
    assert_bitwise(_load(runs, "one"), two)


@pytest.mark.slow
def test_the_command_line_selects_devices(more_runs):
    """``bdl sample --devices 4 --data-devices 2``: 2 × 2 mesh, 4 chains by default."""
    samples = _load(more_runs, "cli")
    assert samples.meta["layout"] == {
        "chain_devices": 2,
        "data_devices": 2,
        "processes": 1,
        "chains": [0, 4],
    }
    assert samples.num_chains == 4


@pytest.mark.slow
def test_a_checkpoint_on_four_devices_resumes_on_two(runs, more_runs):
    assert_bitwise(_load(runs, "one"), _load(more_runs, "resumed"))


@pytest.mark.slow
def test_warm_up_adapts_bitwise_as_on_one_device(more_runs):
    """On the toy network, with the chains in turn, adapted step sizes, frictions and draws on 4
    devices are bitwise one device's (under vmap they need not be: docs/scaling.md)."""
    one, four = _load(more_runs, "adapt_one"), _load(more_runs, "adapt_four")
    assert four.num_chains == one.num_chains == 4
    for name in ("step_size", "friction"):
        np.testing.assert_array_equal(four.adapted[name], one.adapted[name])
    assert_bitwise(one, four)


def test_a_data_axis_gives_the_one_device_draws_to_reassociation(runs):
    """Each of D devices sums the log-likelihood over |B|/D examples; the one device sums all
    |B|. The energies differ by float32 rounding of those sums (≈ 1e-7 relative per addition),
    and SGHMC with a fixed step carries the difference along without amplifying it over the
    160 steps here: θ agrees to 1e-5 (|θ| ≲ 3), the energy to 1e-5 relative."""
    one, data = _load(runs, "one"), _load(runs, "data")
    assert data.meta["layout"] == {
        "chain_devices": 2,
        "data_devices": 2,
        "processes": 1,
        "chains": [0, 4],
    }
    for x, y in zip(jax.tree.leaves(one.positions), jax.tree.leaves(data.positions), strict=True):
        np.testing.assert_allclose(y, x, rtol=0, atol=1e-5)
    np.testing.assert_allclose(data.info["energy"], one.info["energy"], rtol=1e-5)


def test_a_data_axis_averages_energy_gradient_and_curvature(runs):
    """On a data axis of 4, the minibatch energy, its gradient (returned, and by autodiff of the
    averaged energy, as warm-up takes it) and a Hessian-vector product (warm-up's curvature)
    are the one-device ones to float32 rounding of sums of |B| = 16 terms."""
    errors = json.loads((runs / "derivatives.json").read_text())
    assert set(errors) == {"energy", "grad", "autodiff_grad", "hvp"}
    for name, error in errors.items():
        assert error < 1e-5, (name, error)


def test_uneven_layouts_are_refused_before_compiling(runs):
    errors = json.loads((runs / "errors.json").read_text())
    assert "num_chains=3 cannot be split evenly over 4 device(s)" in errors["chains"]
    assert "multiple of 4 (4, 8, 12, 16" in errors["chains"]
    assert "batch_size=16 cannot be split over the 3 devices" in errors["batch"]
    assert "[1, 2]" in errors["batch"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_give_the_draws_of_one(runs, tmp_path):
    """2 processes × 2 CPU devices (``jax.distributed``, coordinator on 127.0.0.1): each runs
    chains 2i, 2i + 1 and saves them; ``merge_samples`` joins them into the one-process run."""
    port = str(_free_port())
    workers = [
        subprocess.Popen(
            [sys.executable, str(SCRIPT), "process", str(i), port, str(tmp_path)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for w in workers:
        _, err = w.communicate(timeout=600)
        assert w.returncode == 0, err[-3000:]
    parts = [bdl.load_samples(tmp_path / f"part-{i}.npz") for i in (1, 0)]
    assert [p.meta["layout"]["chains"] for p in parts] == [[2, 4], [0, 2]]
    merged = bdl.merge_samples(parts)
    assert merged.meta["layout"]["processes"] == 2
    assert_bitwise(_load(runs, "one"), merged)
    with pytest.raises(ValueError, match="the parts of chains 2–3 are missing"):
        bdl.merge_samples(parts[1:])


def _part(start: int, stop: int, total: int = 4, steps: int = 10, seed: int = 0) -> bdl.Samples:
    """A hand-made part of a run: chains ``[start, stop)`` of ``total``, 3 draws each."""
    chains = np.arange(start, stop, dtype=np.float32)
    return bdl.Samples(
        positions={"w": np.repeat(chains[:, None], 3, axis=1)},
        extra={},
        info={"energy": np.zeros((stop - start, 3), np.float32)},
        steps=np.arange(3),
        kernel="sgld",
        steps_done=steps,
        meta={
            "model": "m",
            "kernel": {"name": "sgld"},
            "settings": {"num_chains": total, "seed": seed},
            "layout": {"chain_devices": 1, "data_devices": 1, "processes": 2,
                       "chains": [start, stop]},
        },
    )  # fmt: skip


def test_merge_samples_orders_the_parts_and_checks_they_cover_the_run():
    merged = bdl.merge_samples([_part(2, 4), _part(0, 2)])
    np.testing.assert_array_equal(merged.positions["w"][:, 0], [0, 1, 2, 3])
    assert merged.meta["layout"]["chains"] == [0, 4] and merged.num_chains == 4
    with pytest.raises(ValueError, match="chains 0–1 are covered twice"):
        bdl.merge_samples([_part(0, 2), _part(0, 2), _part(2, 4)])
    with pytest.raises(ValueError, match="chains 0–1 are covered by no part"):
        bdl.merge_samples([_part(2, 4)])
    with pytest.raises(ValueError, match="their settings differ"):
        bdl.merge_samples([_part(0, 2), _part(2, 4, seed=1)])
    with pytest.raises(ValueError, match="stopped at different steps"):
        bdl.merge_samples([_part(0, 2), _part(2, 4, steps=20)])
    with pytest.raises(TypeError, match="a list of Samples"):
        bdl.merge_samples(_part(0, 2))

"""The experiments under ``experiments/``: every configuration loads and names what its script
needs, and every full-scale configuration (``<name>_cifar10.toml``) runs one epoch of two steps
of its ``[smoke]`` settings on ``tfds.testing.mock_data`` (nothing is downloaded), writing its
results and page outside the repository."""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "experiments"
sys.path.insert(0, os.fspath(EXPERIMENTS))

import _harness  # noqa: E402

CONFIGS = sorted(p for p in EXPERIMENTS.glob("*.toml"))
FULL_SCALE = [p for p in CONFIGS if p.stem.endswith("_cifar10")]
# every table each script reads
TABLES = {
    "cold_posterior": {"experiment", "model", "augmentation", "sampler", "sgd"},
    "entropy_mcmc": {"experiment", "model", "sampler", "ood", "flatness"},
}


def script_of(config: Path) -> str:
    return next(name for name in TABLES if config.stem.startswith(name))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_every_config_loads_with_its_quick_and_smoke_tables(config: Path) -> None:
    from bdl.model_files import resolve

    name = script_of(config)
    for quick, smoke in ((False, False), (True, False), (False, True)):
        if smoke and config not in FULL_SCALE:
            with pytest.raises(SystemExit, match=r"no \[smoke\] table"):
                _harness.load_config(config, quick, smoke)
            continue
        loaded = _harness.load_config(config, quick, smoke)
        assert TABLES[name] <= set(loaded), f"{config.name} lacks {TABLES[name] - set(loaded)}"
        assert "quick" not in loaded and "smoke" not in loaded
        assert resolve(loaded["model"]["name"]).is_file()
        assert loaded["experiment"]["seeds"]


def test_full_scale_configs_exist_for_every_experiment() -> None:
    assert {script_of(p) for p in FULL_SCALE} == set(TABLES)


def test_quick_and_smoke_are_exclusive(capsys) -> None:
    with pytest.raises(SystemExit):
        _harness.parse_args("entropy_mcmc", "x", ["--quick", "--smoke"])
    assert "not both" in capsys.readouterr().err


@pytest.fixture(scope="module")
def cifar_metadata(tmp_path_factory) -> Path:
    pytest.importorskip("tensorflow_datasets")
    from test_data_tfds import _write_metadata

    data_dir = tmp_path_factory.mktemp("tfds_cifar_metadata")
    _write_metadata(data_dir, "cifar10", {"train": 50_000, "test": 10_000})
    return data_dir


@pytest.mark.slow  # compiling the ResNet's sampling, prediction and diagnostics: minutes on 2 cores
@pytest.mark.parametrize("config", FULL_SCALE, ids=lambda p: p.name)
def test_full_scale_config_runs_one_smoke_epoch_on_mock_data(
    config: Path, cifar_metadata: Path, tmp_path: Path, monkeypatch
) -> None:
    import tensorflow_datasets as tfds

    monkeypatch.setenv("BDL_CACHE_DIR", os.fspath(tmp_path / "cache"))
    name = script_of(config)
    script = importlib.import_module(name)
    argv = ["--config", os.fspath(config), "--smoke", "--fresh"]
    argv += ["--results", os.fspath(tmp_path), "--pages", os.fspath(tmp_path)]
    with tfds.testing.mock_data(num_examples=24, data_dir=os.fspath(cifar_metadata)):
        assert script.run(argv) == 0
    lines = (tmp_path / f"{name}-smoke.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines[1:]]
    smoke = _harness.load_config(config, False, True)
    assert records and all(not r.get("diverged") for r in records)
    assert all(r["seconds"] > 0 for r in records)
    if name == "entropy_mcmc":
        assert len(records) == len(smoke["experiment"]["methods"])
        assert all("guide" in r["bma"] and "guide" in r["flatness"] for r in records)
    else:  # one sampling run and one SGD run per setting
        assert len(records) == 2
    page = (tmp_path / f"{name}-smoke.md").read_text()
    assert "(smoke run)" in page and "**Verdict:**" in page
    assert f"--config experiments/{config.name} --smoke" in page
    assert (tmp_path / "img" / f"{name}-smoke.png").is_file()
    assert not list((ROOT / "docs").rglob("*-smoke*"))  # nothing of the smoke run in docs/

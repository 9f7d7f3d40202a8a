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
    "learned_samplers": {"experiment", "model", "sampling", "samplers"},
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
    with pytest.raises(SystemExit):
        _harness.parse_args("entropy_mcmc", "x", ["--page-only", "--fresh"])
    assert "--page-only" in capsys.readouterr().err


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
    # every line, the header too, records the code that wrote it
    code = _harness.code_version()
    assert all(json.loads(line)["code"] == code for line in lines)
    smoke = _harness.load_config(config, False, True)
    assert records and all(not r.get("diverged") for r in records)
    assert all(r["seconds"] > 0 for r in records)
    if name == "entropy_mcmc":
        assert len(records) == len(smoke["experiment"]["methods"])
        assert all("guide" in r["bma"] and "guide" in r["flatness"] for r in records)
    elif name == "learned_samplers":
        assert [r["sampler"] for r in records] == smoke["experiment"]["samplers"]
        draws = smoke["sampling"]["draws"]
        assert all(len(r["nll"]) == draws and r["healthy_chains"] == 2 for r in records)
    else:  # one sampling run and one SGD run per setting
        assert len(records) == 2
    page = (tmp_path / f"{name}-smoke.md").read_text()
    assert "(smoke run)" in page and "**Verdict:**" in page
    assert f"--config experiments/{config.name} --smoke" in page
    # stale exactly when the checkout has uncommitted changes (or no git)
    current = code["commit"] is not None and not code["dirty"]
    assert ("> **Stale:**" in page) is not current
    if current:
        assert f"- Code: commit {code['commit'][:7]}, clean" in page
    assert (tmp_path / "img" / f"{name}-smoke.png").is_file()
    assert not list((ROOT / "docs").rglob("*-smoke*"))  # nothing of the smoke run in docs/
    # --page-only rewrites the page from these results and runs nothing
    argv.remove("--fresh")
    assert script.run([*argv, "--page-only"]) == 0
    assert (tmp_path / f"{name}-smoke.jsonl").read_text().splitlines() == lines
    page = (tmp_path / f"{name}-smoke.md").read_text()
    assert "rewritten from the results with `--page-only`" in page


# --- learned samplers: what the script computes and decides, without compiling a network ---


@pytest.fixture(scope="module")
def learned() -> object:
    return importlib.import_module("learned_samplers")


def test_learned_sampler_meta_params_are_files_and_key_the_results(learned, tmp_path) -> None:
    from bdl.kernels.elementwise_mlp import shipped_meta_params_path

    config = _harness.load_config(EXPERIMENTS / "learned_samplers.toml", quick=True)
    learned.check_config(config)
    entry = config["samplers"]["l2e"]
    assert learned.meta_params_file(entry) == shipped_meta_params_path("l2e")
    previous = config["samplers"]["l2e-previous"]
    assert learned.meta_params_file(previous).is_file()
    key = learned.unit_key(config, "l2e", 0)
    assert key == f"l2e/0/{learned.digest(shipped_meta_params_path('l2e'))}"
    assert learned.unit_key(config, "sghmc", 0) == "sghmc/0"
    # another file (a retrained family) gives another key: its units are run again
    other = tmp_path / "other.npz"
    other.write_bytes(shipped_meta_params_path("l2e").read_bytes() + b"\0")
    entry["meta_params"] = os.fspath(other)
    assert learned.unit_key(config, "l2e", 0) != key


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c["experiment"]["samplers"].append("nope"), r"\[samplers.nope\] table"),
        (lambda c: c["samplers"]["sghmc"].update(kernel="hmc"), r"\[samplers.sghmc\] kernel"),
        (
            lambda c: c["samplers"]["l2e"].update(meta_params="no/such.npz"),
            r"\[samplers.l2e\] meta_params = 'no/such.npz': no such file",
        ),
        (
            lambda c: c["samplers"]["ensemble"].update(optimizer="lbfgs"),
            r"\[samplers.ensemble\] optimizer",
        ),
    ],
)
def test_learned_samplers_config_errors_name_the_table(learned, change, message) -> None:
    config = _harness.load_config(EXPERIMENTS / "learned_samplers.toml", quick=True)
    change(config)
    with pytest.raises(SystemExit, match=message):
        learned.check_config(config)


def test_learned_samplers_scores_bma_curve_diversity_and_divergence(learned) -> None:
    import numpy as np

    from bdl import metrics

    rng = np.random.default_rng(0)
    chains, draws, n, k = 3, 6, 50, 4
    logits = rng.normal(size=(chains, draws, n, k))
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    labels = rng.integers(0, k, n)
    probs[1] = np.nan  # a diverged chain is left out
    out = learned.scores(probs, labels)
    kept = probs[[0, 2]]
    assert out["healthy_chains"] == 2 and out["models"] == [2 * j for j in range(1, draws + 1)]
    first = kept[:, :1].mean(axis=(0, 1))
    every = kept.mean(axis=(0, 1))
    np.testing.assert_allclose(out["nll"][0], float(metrics.nll(first, labels)), rtol=1e-5)
    np.testing.assert_allclose(out["nll"][-1], float(metrics.nll(every, labels)), rtol=1e-5)
    np.testing.assert_allclose(out["accuracy"][-1], float(metrics.accuracy(every, labels)))
    flat = kept.reshape(-1, n, k)
    top = flat.argmax(-1)
    pairs = [(i, j) for i in range(len(flat)) for j in range(len(flat)) if i != j]
    expected = np.mean([np.mean(top[i] != top[j]) for i, j in pairs])
    np.testing.assert_allclose(out["disagreement"], expected, rtol=1e-5)
    assert out["pairwise_kl"] > 0 and "ess_median" in out
    same = learned.scores(np.repeat(probs[:1, :1], draws, axis=1).repeat(2, 0), labels)
    assert same["disagreement"] == pytest.approx(0.0, abs=1e-6)
    assert same["pairwise_kl"] == pytest.approx(0.0, abs=1e-6)
    assert learned.scores(np.full_like(probs, np.nan), labels) == {"healthy_chains": 0}
    assert "ess_median" not in learned.scores(probs, labels, independent=True)


def _records(name: str, nll: list[float], acc: list[float]) -> list[dict]:
    return [
        {"sampler": name, "seed": s, "nll": [v], "accuracy": [a], "diverged_chains": 0}
        for s, (v, a) in enumerate(zip(nll, acc, strict=True))
    ]


def test_learned_samplers_verdict_follows_paired_differences(learned) -> None:
    config = _harness.load_config(EXPERIMENTS / "learned_samplers.toml", quick=True)
    config["experiment"]["samplers"] = ["sghmc", "l2e"]
    base = _records("sghmc", [0.50, 0.52, 0.51], [0.80, 0.81, 0.80])
    better = _records("l2e", [0.40, 0.43, 0.41], [0.82, 0.83, 0.82])
    assert learned.verdict(config, base + better).startswith("**reproduced**")
    noisy = _records("l2e", [0.40, 0.60, 0.51], [0.82, 0.79, 0.80])
    assert learned.verdict(config, base + noisy).startswith("**not reproduced**")
    # lower NLL but lower accuracy beyond 2 se: not a win
    mixed = _records("l2e", [0.40, 0.43, 0.41], [0.70, 0.72, 0.71])
    assert learned.verdict(config, base + mixed).startswith("**not reproduced**")
    config["experiment"]["samplers"] = ["sghmc", "cyclical", "l2e"]
    other = _records("cyclical", [0.30, 0.31, 0.30], [0.85, 0.86, 0.85])
    assert learned.verdict(config, base + other + better).startswith("**partly**")


def test_learned_samplers_family_comparison_of_identical_files_says_so(learned) -> None:
    config = _harness.load_config(EXPERIMENTS / "learned_samplers.toml", quick=True)
    old = config["samplers"]["l2e-previous"]
    old["meta_params"] = os.fspath(learned.meta_params_file(config["samplers"]["l2e"]))
    text = "\n".join(learned.family_comparison(config, []))
    assert "byte-identical" in text


@pytest.mark.parametrize("name", ["learned_samplers.toml", "learned_samplers_cifar10.toml"])
def test_learned_samplers_kernels_draw_at_the_same_rate(learned, name: str) -> None:
    config = _harness.load_config(EXPERIMENTS / name, quick=False)
    learned.check_config(config)
    p = {"step_size": 0.01, "friction": 5.0, "thin": 20}
    tables = {n: t for n, t in config["samplers"].items() if t["kernel"] != "ensemble"}
    made = {n: learned.make_kernel(t, p, n) for n, t in tables.items()}
    for name, (kernel, thin, factor) in made.items():
        entry = config["samplers"][name]
        if entry["kernel"] == "cyclical":  # draws from the sampling half of each cycle only
            cycle, explore = kernel.cycle_length, kernel.exploration
            assert cycle == entry["draws_per_cycle"] * p["thin"]
            assert (cycle - round(explore * cycle)) // thin == entry["draws_per_cycle"]
        else:  # a smaller step runs proportionally longer between draws
            assert thin == p["thin"] * factor
            assert factor * entry.get("step_factor", 1.0) == pytest.approx(1.0)
    assert made["nnsghmc-half"][1:] == (40, 2)


def test_learned_samplers_family_comparison_says_whether_the_outcome_changes(
    learned, tmp_path
) -> None:
    from bdl.kernels.elementwise_mlp import shipped_meta_params_path

    config = _harness.load_config(EXPERIMENTS / "learned_samplers.toml", quick=True)
    config["experiment"]["samplers"] = ["sghmc", "l2e", "l2e-previous"]
    other = tmp_path / "previous.npz"
    other.write_bytes(shipped_meta_params_path("l2e").read_bytes() + b"\0")
    config["samplers"]["l2e-previous"]["meta_params"] = os.fspath(other)
    base = _records("sghmc", [0.50, 0.52, 0.51], [0.80, 0.81, 0.80])
    old = _records("l2e-previous", [0.50, 0.53, 0.50], [0.80, 0.80, 0.81])
    new = _records("l2e", [0.40, 0.43, 0.41], [0.82, 0.83, 0.82])
    text = "\n".join(learned.family_comparison(config, base + old + new))
    assert "byte-identical" not in text
    assert "Yes: against SGHMC it now wins" in text and "its NLL is lower" in text
    text = "\n".join(learned.family_comparison(config, base + new + _records(
        "l2e-previous", [0.41, 0.42, 0.42], [0.82, 0.82, 0.83])))  # fmt: skip
    assert "No: it beats the same baselines (SGHMC)" in text
    assert "does not differ beyond 2 se" in text


# --- provenance, paired differences, pages and the index: without compiling anything ---


def test_results_record_the_code_in_every_line(tmp_path) -> None:
    path = tmp_path / "x.jsonl"
    results = _harness.Results(path, {"a": 1})
    results.add("u/0", {"seed": 0, "value": 1.0})
    results.add("u/1", {"seed": 1, "value": 2.0})
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    code = _harness.code_version()
    assert len(lines) == 3 and all(line["code"] == code for line in lines)
    assert set(code) >= {"commit", "dirty", "trees"} and set(code["trees"]) == {
        "bdl",
        "experiments",
    }
    assert set(_harness.Results(path, {"a": 1}, create=False).records) == {"u/0", "u/1"}
    with pytest.raises(SystemExit, match="no results"):
        _harness.Results(tmp_path / "none.jsonl", {"a": 1}, create=False)


def test_results_record_the_environment_in_every_line(tmp_path) -> None:
    import jax
    import numpy as np

    path = tmp_path / "x.jsonl"
    _harness.Results(path, {"a": 1}).add("u/0", {"seed": 0})
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    env = _harness.run_environment()
    assert len(lines) == 2 and all(line["environment"] == env for line in lines)
    assert env["versions"]["jax"] == jax.__version__ and env["versions"]["numpy"] == np.__version__
    assert env["cores"] == os.cpu_count() and env["backend"] == jax.default_backend()
    assert env["cpu"]


def _elsewhere(cpu: str) -> dict:
    return {**_harness.run_environment(), "cpu": cpu}


def test_a_page_names_the_environment_its_runs_recorded() -> None:
    here = _harness.run_environment()["cpu"]
    # rewritten from results of another machine: that machine, not this one, and no load
    text = _harness.environment(True, [{"environment": _elsewhere("Other CPU 9000")}] * 3)
    assert "(Other CPU 9000)" in text and f"({here})" not in text
    assert "load not recorded" in text and "environments" not in text
    # a run resumed here on results of another machine names both, with this run's load
    text = _harness.environment(False, [{"environment": _elsewhere("Other CPU 9000")}])
    assert text.startswith("2 environments: ") and f"({here})" in text
    assert "(Other CPU 9000)" in text and "load average" in text
    # records from before environments were recorded are counted as such
    text = _harness.environment(True, [{}, {}, {"environment": _elsewhere("Other CPU 9000")}])
    assert "2 units on a machine not recorded" in text
    assert _harness.environment(True, [{}]).startswith("1 unit on a machine not recorded")


def test_code_version_names_head_and_its_trees() -> None:
    import subprocess

    code = _harness.code_version()
    if code["commit"] is None:
        pytest.skip("not a git checkout")

    def git(*argv: str) -> str:
        return subprocess.check_output(["git", "-C", os.fspath(ROOT), *argv], text=True).strip()

    assert code["commit"] == git("rev-parse", "HEAD")
    assert code["trees"]["bdl"] == git("rev-parse", "HEAD:./bdl")
    # the experiments tree less results/: nothing left out gives git's own tree
    assert _harness.tree_without("HEAD:./experiments", "no such entry") == git(
        "rev-parse", "HEAD:./experiments"
    )
    assert isinstance(code["dirty"], bool) and ("dirty_digest" in code) == code["dirty"]


def test_code_version_without_git_records_none(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", os.fspath(tmp_path))  # no git on the path
    _harness._code_version.cache_clear()
    try:
        assert _harness.code_version() == {
            "commit": None,
            "dirty": None,
            "trees": {"bdl": None, "experiments": None},
        }
    finally:
        _harness._code_version.cache_clear()


def test_paired_differences_pair_by_seed() -> None:
    import math

    a = {0: 1.0, 1: 2.0, 2: 3.0, 3: 9.0}  # seed 3 has no partner: left out
    b = {0: 0.9, 1: 1.8, 2: 2.85}
    d = _harness.paired(a, b)
    assert d.n == 3 and d.mean == pytest.approx(0.15)
    assert d.se == pytest.approx(0.05 / math.sqrt(3))  # sd of (0.1, 0.2, 0.15) over √3
    unpaired = math.hypot(_harness.mean_se([1.0, 2.0, 3.0])[1], _harness.mean_se(b.values())[1])
    assert unpaired > 20 * d.se  # the seeds' shared part cancels only when paired
    assert d.side() == 1 and d.text() == "+0.150 ± 0.029"
    assert _harness.paired(a, {9: 1.0}).n == 0 and _harness.paired(a, {9: 1.0}).text() == "—"


CURRENT = {"commit": "a" * 40, "dirty": False, "trees": {"bdl": "b" * 40, "experiments": "c" * 40}}


def _with(**change: object) -> dict:
    return {**CURRENT, **change}


@pytest.mark.parametrize(
    "versions, stale, says",
    [
        ([CURRENT, CURRENT], False, "commit aaaaaaa, clean"),
        ([_with(commit="d" * 40)], False, "commit ddddddd, clean"),  # same trees
        ([_with(trees={"bdl": "e" * 40, "experiments": "c" * 40})], True, "bdl/ changed since"),
        ([None], True, "do not record the code"),
        ([_with(dirty=True, dirty_digest="0123")], True, "uncommitted changes (digest 0123)"),
        ([CURRENT, None], True, "mix 2 code versions"),
    ],
)
def test_provenance_says_which_code_produced_the_records(versions, stale, says) -> None:
    records = [{"seed": i} | ({"code": v} if v else {}) for i, v in enumerate(versions)]
    p = _harness.provenance(records, "python experiments/x.py --fresh", current=CURRENT)
    assert p.stale is stale
    assert says in (p.note if stale else p.code)
    if stale:
        assert p.header()[0].startswith("> **Stale:** ")
        assert p.note.endswith("Re-run `python experiments/x.py --fresh` to refresh them.")
        assert p.verdict("**partly**").startswith("*From ") and p.verdict("x").endswith(" x")
    else:
        assert p.header() == [] and p.verdict("**partly**") == "**partly**"


def test_provenance_of_a_dirty_or_unknown_checkout_is_never_current() -> None:
    records = [{"code": CURRENT}]
    dirty = _harness.provenance(records, "r", current=_with(dirty=True, dirty_digest="1"))
    assert dirty.stale and "working tree now has uncommitted changes" in dirty.note
    unknown = _harness.provenance(records, "r", current=_harness.UNKNOWN_CODE)
    assert unknown.stale and "cannot be matched" in unknown.note


NAMES = ["cold_posterior", "entropy_mcmc", "learned_samplers"]


@pytest.mark.parametrize("name", NAMES)
def test_page_from_old_records_says_stale_and_from_current_ones_does_not(
    name: str, monkeypatch
) -> None:
    import argparse

    script = importlib.import_module(name)
    path = _harness.RESULTS / f"{name}-quick.jsonl"
    if not path.is_file():
        pytest.skip(f"no {path.name}")
    config = _harness.load_config(EXPERIMENTS / f"{name}.toml", quick=True)
    header, by_key = _harness.read_results(path)
    assert header["config"] == json.dumps(config, sort_keys=True)
    records = [
        {k: v for k, v in r.items() if k != "code"} for r in script.page_records(config, by_key)
    ]
    args = argparse.Namespace(
        quick=True, smoke=False, page_only=True, config=EXPERIMENTS / f"{name}.toml"
    )
    monkeypatch.setattr(_harness, "code_version", lambda: CURRENT)

    old = script.page(args, config, records, "x.png").splitlines()
    assert old[2].startswith("> **Stale:** these results do not record the code")
    assert f"`python experiments/{name}.py --quick --fresh`" in old[2]
    verdict = next(line for line in old if line.startswith("**Verdict:** "))
    assert verdict.startswith("**Verdict:** *From code that was not recorded")

    now = script.page(args, config, [{**r, "code": CURRENT} for r in records], "x.png")
    assert "Stale" not in now and "*From " not in now
    assert "- Code: commit aaaaaaa, clean (bdl/ tree bbbbbbb" in now
    assert "rewritten from the results with `--page-only`" in now


def test_cold_posterior_gap_is_paired_by_seed() -> None:
    cold = importlib.import_module("cold_posterior")
    config = {
        "experiment": {"augmentations": ["none"], "temperatures": [0.1, 1.0], "seeds": [0, 1, 2]}
    }
    nll = {1.0: [0.50, 0.60, 0.70], 0.1: [0.40, 0.49, 0.61], "sgd": [0.45, 0.55, 0.66]}
    records = [
        {"augmentation": "none", "temperature": t, "seed": s, "nll": v}
        for t, vs in nll.items()
        for s, v in enumerate(vs)
    ]
    text = cold.verdict(config, records)
    # unpaired, gap 0.1 against se hypot(0.058, 0.061) = 0.084: no effect; paired by seed
    # the differences (0.10, 0.11, 0.09) have se 0.006: T = 1 loses
    assert text.startswith("**reproduced**") and "gap +0.100 ± 0.006 over 3 seeds" in text
    assert "none: SGD is worse (NLL 0.553 vs 0.500 at T = 0.1, difference +0.053 ± 0.003)" in text


def _table_cells(line: str) -> list[str]:
    import re

    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [c.strip().replace("\\|", "|") for c in cells]


def test_index_rows_carry_each_page_verdict_and_stale_note() -> None:
    index = importlib.import_module("index")
    rows = [line for line in index.table() if line.startswith("| [")]
    assert len(rows) == len(index.EXPERIMENTS) == len(NAMES)
    for experiment, line in zip(index.EXPERIMENTS, rows, strict=True):
        cells = _table_cells(line)
        page = (_harness.PAGES / f"{experiment.name}.md").read_text()
        assert cells[0].startswith(f"[{experiment.title}]({experiment.name}.md)")
        assert cells[-1] == index.page_verdict(page)
        assert cells[3].startswith("full run: ")
        stale = index.page_stale(page)
        assert (stale is not None) == ("**Stale:**" in cells[3])
        if stale is not None:
            assert stale in cells[3]


def test_index_is_up_to_date_and_keeps_its_text(tmp_path) -> None:
    import shutil

    index = importlib.import_module("index")
    committed = (_harness.PAGES / "index.md").read_text()
    assert "\n".join(index.table()) in committed  # python experiments/index.py was run
    for page in _harness.PAGES.glob("*.md"):
        shutil.copy(page, tmp_path / page.name)
    (tmp_path / "index.md").write_text(committed.replace(index.table()[-3], "| stale row |"))
    index.write_index(tmp_path)
    assert (tmp_path / "index.md").read_text() == committed

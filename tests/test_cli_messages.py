"""What the command line says: every option has help text; a run that did not converge names
``--tuned`` when the model file has validated settings it did not use; a ``--report`` that
cannot be written is refused before anything runs (exit 2); ``--resume`` compares ``--hyper``
values as numbers."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import pytest

from bdl.cli.main import build_parser, main
from bdl.cli.resume_record import resumed_command
from bdl.diagnostics.convergence import assess
from bdl.model_files import load_spec
from bdl.sampling import Samples
from bdl.utils.files import can_create_in

TINY = ["--steps", "40", "--burn-in", "0", "--chains", "1"]


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(found[0].choices)


@pytest.mark.parametrize("command", sorted(subcommands()))
def test_every_option_of_every_command_has_help(command, capsys):
    missing = [
        "/".join(action.option_strings) or action.dest
        for action in subcommands()[command]._actions
        if not isinstance(action, argparse._HelpAction) and not action.help
    ]
    assert not missing, f"bdl {command}: no help for {missing}"
    assert main([command, "--help"]) == 0
    if command == "validate":
        text = " ".join(capsys.readouterr().out.split())
        for flag in ("--hyper", "--steps", "--burn-in", "--thin", "--nuts-warmup"):
            assert text.split(flag, 1)[1].split("--", 1)[0].strip(), flag  # words after the flag


# ------------------------------------------------------------------ --report that cannot be written
@pytest.fixture
def unwritable(tmp_path):
    """A directory this process cannot create files in (root ignores permission bits: /proc)."""
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        yield locked
        locked.chmod(0o700)
        return
    if not Path("/proc").is_dir() or can_create_in(Path("/proc")):
        pytest.skip("no directory here that root cannot write in")
    yield Path("/proc")


@pytest.fixture
def nothing_runs(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the command got as far as compiling or running")

    monkeypatch.setattr("bdl.spec.ModelSpec.compile", forbidden)
    monkeypatch.setattr("bdl.sampling.sample", forbidden)
    monkeypatch.setattr("bdl.validation.validate", forbidden)


@pytest.mark.parametrize(
    "command",
    [
        ["sample", "linear_regression", "--kernel", "sgld", "--tuned", *TINY],
        ["validate", "linear_regression", "--kernel", "sgld", "--tuned", *TINY],
    ],
)
def test_a_report_that_cannot_be_written_is_refused_before_the_run(
    command, unwritable, nothing_runs, capsys
):
    assert main([*command, "--report", str(unwritable / "run.html")]) == 2
    err = capsys.readouterr().err
    assert f"--report {unwritable / 'run.html'}: this process cannot create files in" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_validate_report_without_a_name_needs_a_writable_output_directory(
    tmp_path, monkeypatch, nothing_runs, capsys
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bdl-output").write_text("a file where the directory goes")
    command = ["validate", "linear_regression", "--kernel", "sgld", "--tuned", *TINY, "--report"]
    assert main(command) == 2
    assert "--report writes into bdl-output/, but bdl-output is a file" in capsys.readouterr().err


# --------------------------------------------------------------------- --tuned when it would help
def unconverged(draws: int = 30) -> object:
    """A verdict that fails ESS (30 draws per chain cannot reach 100)."""
    rng = np.random.default_rng(0)
    return assess(rng.normal(size=(2, draws, 3)), ["a", "b", "c"], space="parameter")


class FakeValidation:
    """What bdl.validate returns, as far as ``bdl validate`` reads it."""

    def __init__(self, samples):
        self.samples, self.passed, self.plot = samples, False, Path("figure.png")

    def __str__(self):
        return "(table)"


def fake_samples(positions) -> Samples:
    leaf = np.asarray(next(iter(positions["net"].values())))
    chains, draws = leaf.shape[:2]
    return Samples(positions, {}, {"energy": np.zeros((chains, draws))}, np.arange(draws),
                   "sghmc", draws, convergence=unconverged(draws))  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "hinted"),
    [([], "adapted its step size, mass and friction during burn-in instead"),
     (["--hyper", "step_size=0.3"], "ran with --hyper step_size=0.3 instead"),
     (["--tuned"], None)],
)  # fmt: skip
def test_validate_names_tuned_when_the_model_file_has_settings_it_did_not_use(
    extra, hinted, monkeypatch, capsys
):
    rng = np.random.default_rng(0)
    positions = {"net": {"theta": rng.normal(size=(2, 30, 8))}}
    monkeypatch.setattr("bdl.validation.validate",
                        lambda *a, **k: FakeValidation(fake_samples(positions)))  # fmt: skip
    assert main(["validate", "eight_schools", "--kernel", "sghmc", *extra, "--plot",
                 "figure.png"]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "the kernel's run was not compared" in err
    if hinted is None:
        assert "rerun with --tuned" not in err
    else:
        suggested = load_spec("eight_schools").kernel_hyper("sghmc")
        settings = ", ".join(f"{k}={v}" for k, v in suggested.items())
        assert f"eight_schools has validated settings for sghmc ({settings})" in err
        assert f"{hinted}: rerun with --tuned to use them." in err


def test_sample_names_tuned_when_it_did_not_converge(monkeypatch, capsys):
    rng = np.random.default_rng(0)
    positions = {"net": {"w": rng.normal(size=(2, 30, 5)).astype(np.float32)}}
    monkeypatch.setattr("bdl.sampling.sample", lambda *a, **k: fake_samples(positions))
    command = [
        "sample",
        "linear_regression",
        "--kernel",
        "sghmc",
        "--steps",
        "300",
        "--chains",
        "2",
    ]
    assert main([*command, "--burn-in", "200"]) == 4
    err = capsys.readouterr().err
    assert "linear_regression has validated settings for sghmc" in err and "--tuned" in err
    assert main([*command, "--burn-in", "0", "--tuned"]) == 4
    assert "rerun with --tuned" not in capsys.readouterr().err


# ------------------------------------------------------------------ --resume compares numbers
def record(directory: Path, hyper: list[str]) -> None:
    directory.mkdir()
    command = {"model": "linear_regression", "kernel": "sgld", "hyper": hyper, "option": None,
               "tuned": False, "chains": 1, "seed": 0, "burn_in": 0, "thin": 1, "evaluate": False,
               "no_keep_draws": False, "stream_to": None, "steps": 40, "init": None}  # fmt: skip
    (directory / "command.json").write_text(json.dumps(command))


@pytest.mark.parametrize(
    ("given", "same"),
    [(["step_size=0.005"], True), (["step_size=5e-3"], True), (["step_size=0.0050"], True),
     (["step_size=0.006"], False), (["step_size=0.005", "momentum=0.9"], False)],
)  # fmt: skip
def test_resume_compares_hyper_parameters_as_numbers(tmp_path, given, same):
    record(tmp_path / "ck", ["step_size=5e-3"])
    flags = [f"--hyper={g}" for g in given]
    args = build_parser().parse_args(["sample", "--resume", str(tmp_path / "ck"), *flags])
    if same:
        resumed_command(args)
        assert args.hyper == ["step_size=5e-3"]  # the record's, as it was written
    else:
        with pytest.raises(ValueError, match=r"--hyper .* conflicts with the run in --resume"):
            resumed_command(args)


def test_cli_resume_accepts_the_same_step_size_written_differently(tmp_path, capsys):
    directory = tmp_path / "ck"
    run = ["sample", "linear_regression", "--kernel", "sgld", "--hyper", "step_size=2e-4", *TINY]
    ran = (0, 4)  # 4: a one-chain run of 40 steps has not converged; the draws are what matters
    assert main([*run, "--checkpoint", str(directory)]) in ran
    resumed = ["sample", "--resume", str(directory), "--steps", "60"]
    assert main([*resumed, "--hyper", "step_size=0.0002"]) in ran
    assert "conflicts" not in capsys.readouterr().err
    assert main([*resumed, "--hyper", "step_size=0.0003"]) == 2
    assert "--hyper ['step_size=0.0003'] conflicts" in capsys.readouterr().err

"""Bad command lines end in one message naming the argument and the fix, with exit status 2 —
before anything is compiled, sampled, checked or trained (every case is fast by construction).

One row per case: the arguments (``{tmp}`` is a folder holding broken model files), the exit
status and a fragment of the message on stderr.
"""

from __future__ import annotations

import pytest

from bdl.cli.main import main

MODEL_FILES = {
    "syntax.py": "import bdl\n\n\ndef build(:\n    pass\n",
    "raises.py": ("import bdl\n\n\ndef build():\n    scale = 0.0\n    return 1.0 / scale\n"),
    "import_error.py": "import bdl\n\nLIMIT = 1 / 0\n\n\ndef build():\n    pass\n",
    "no_build.py": "import bdl\n\nMODEL = None\n",
    "not_a_spec.py": "def build():\n    return 3\n",
    "wrong_model.py": (
        "import bdl\n\n\ndef build():\n    model = bdl.Model(network=None)\n    return model\n"
    ),
}

LR = ["sample", "linear_regression", "--kernel", "sgld"]
VAL = ["validate", "linear_regression", "--kernel", "sgld"]

CASES = [
    # bdl sample: run lengths, never replaced by the model file's defaults
    ([*LR, "--steps", "0"], 2, "--steps 0 must be >= 1"),
    ([*LR, "--steps", "-5"], 2, "--steps -5 must be >= 1"),
    ([*LR, "--thin", "0"], 2, "--thin 0 must be >= 1"),
    ([*LR, "--chains", "0"], 2, "--chains 0 must be >= 1"),
    ([*LR, "--burn-in", "-1"], 2, "--burn-in -1 must be >= 0"),
    ([*LR, "--steps", "100"], 2, "--burn-in (the model file's default, 2000) must be smaller"),
    ([*LR, "--steps", "100", "--burn-in", "100"], 2, "--burn-in 100 must be smaller than --steps"),
    ([*LR, "--steps", "100", "--burn-in", "50", "--thin", "51"], 2, "pass --thin 50 or less"),
    ([*LR, "--steps", "ten"], 2, "argument --steps: invalid int value"),
    ([*LR, "--seed", "-1"], 2, "--seed -1: must be an integer in [0"),
    ([*LR, "--seed", str(2**40)], 2, "must be an integer in [0, 2147483647]"),
    # kernels, starts, options
    (["sample", "linear_regression", "--kernel", "nope"], 2, "--kernel 'nope' is not a regis"),
    (["sample", "linear_regression", "--kernel", "sgdl"], 2, "did you mean 'sgld'"),
    (["sample", "linear_regression"], 2, "needs a MODEL and --kernel NAME"),
    (["sample", "--kernel", "sgld"], 2, "needs a MODEL and --kernel NAME"),
    (["sample", "--resume", "{tmp}/nothing"], 2, "no command.json there"),
    ([*LR, "--checkpoint", "{tmp}/other.toml"], 2, "is a file"),
    ([*LR, "--checkpoint-every", "-1"], 2, "--checkpoint-every must be >= 0"),
    ([*LR, "--checkpoint", "{tmp}/ck", "--stream-to", "{tmp}/ck"], 2, "checkpoint's directory"),
    (
        ["sample", "linear_regression", "--kernel", "sghmc", "--burn-in", "10"],
        2,
        "--burn-in 10 is too short to adapt",
    ),
    ([*LR, "--init", "bogus"], 2, "--init 'bogus': the start of a model is one of auto"),
    (["sample", "two_mode", "--kernel", "sgld", "--init", "prior"], 2, "a potential is one of"),
    ([*LR, "--hyper", "step_size"], 2, "--hyper expects KEY=VALUE"),
    ([*LR, "--hyper", "stepsize=1e-3"], 2, "stepsize"),
    ([*LR, "--option", "depth=3"], 2, "has no option(s) ['depth']"),
    ([*LR, "--option", "n"], 2, "--option expects KEY=VALUE"),
    # devices and processes (this process has one CPU device)
    ([*LR, "--devices", "2"], 2, "--devices 2: this process has 1 cpu device(s); give 1 to 1"),
    ([*LR, "--devices", "0"], 2, "--devices 0: this process has 1"),
    ([*LR, "--data-devices", "0"], 2, "--data-devices must be >= 1"),
    ([*LR, "--devices", "1", "--data-devices", "2"], 2, "--data-devices 2 does not divide"),
    ([*LR, "--coordinator", "host0:1234"], 2, "need --distributed"),
    ([*LR, "--distributed", "--process-id", "0"], 2, "go together (give all three"),
    (["merge", "{tmp}/missing.npz", "--out", "{tmp}/m.npz"], 2, "no such file: "),
    (["merge", "{tmp}/syntax.py", "--out", "{tmp}/m.txt"], 2, ".txt"),
    # models and model files
    (["sample", "no_such_model", "--kernel", "sgld"], 2, "unknown model 'no_such_model'"),
    (["sample", "{tmp}/missing.py", "--kernel", "sgld"], 2, "does not exist"),
    (["sample", "{tmp}/syntax.py", "--kernel", "sgld"], 2, "syntax.py:4: SyntaxError"),
    (["sample", "{tmp}/raises.py", "--kernel", "sgld"], 2, "raises.py:6 (in build): ZeroDiv"),
    (["sample", "{tmp}/import_error.py", "--kernel", "sgld"], 2, "import_error.py:3: ZeroDiv"),
    (["sample", "{tmp}/no_build.py", "--kernel", "sgld"], 2, "must define build(**options)"),
    (["sample", "{tmp}/not_a_spec.py", "--kernel", "sgld"], 2, "must return a bdl.ModelSpec"),
    (["sample", "{tmp}/wrong_model.py", "--kernel", "sgld"], 2, "wrong_model.py:5 (in build)"),
    # bdl validate
    ([*VAL, "--steps", "0"], 2, "--steps 0 must be >= 1"),
    ([*VAL, "--thin", "0"], 2, "--thin 0 must be >= 1"),
    ([*VAL, "--chains", "0"], 2, "--chains 0 must be >= 1"),
    ([*VAL, "--burn-in", "30000"], 2, "--burn-in 30000 must be smaller than --steps"),
    ([*VAL, "--nuts-samples", "0"], 2, "--nuts-samples 0 must be >= 1"),
    ([*VAL, "--nuts-warmup", "-1"], 2, "--nuts-warmup -1 must be >= 0"),
    ([*VAL, "--plot", "figure.txt"], 2, "the figure's format comes from its suffix"),
    ([*VAL, "--plot", "{tmp}"], 2, "is a directory"),
    ([*VAL, "--init", "bogus"], 2, "--init 'bogus'"),
    (["validate", "linear_regression", "--kernel", "nope"], 2, "--kernel 'nope' is not a"),
    (["validate", "{tmp}/syntax.py", "--kernel", "sgld"], 2, "syntax.py:4: SyntaxError"),
    # bdl kernels
    (["kernels", "nope"], 2, "kernel 'nope' is not a registered kernel"),
    (["kernels", "--check", "--no-check"], 2, "not allowed with argument"),
    # bdl check
    (["check", "nope"], 2, "kernel 'nope' is not a registered kernel"),
    (["check", "sgld", "--temperature", "-1"], 2, "--temperature -1.0: must be a finite number"),
    (["check", "sgld", "--temperature", "nan"], 2, "--temperature nan: must be a finite"),
    (
        ["check", "sgld", "--temperature", "0"],
        2,
        "--temperature 0.0: must be a finite number >= 0.01",
    ),
    (["check", "sgld", "--hyper", "step_size"], 2, "--hyper expects KEY=VALUE"),
    (["check", "sgld", "--hyper", "momentum=0.9"], 2, "momentum"),
    (["check", "sgld", "--seed", "-2"], 2, "--seed -2"),
    # bdl meta-train
    (["meta-train", "sgld"], 2, "argument kernel: invalid choice: 'sgld'"),
    (["meta-train", "l2e", "--config", "{tmp}/missing.toml"], 2, "config: no file at"),
    (["meta-train", "l2e", "--out", "{tmp}/syntax.py"], 2, "is a file; pass a directory"),
    (["meta-train", "l2e", "--config", "{tmp}/other.toml"], 2, "is for kernel 'nnsghmc'"),
    # bdl demo
    (["demo", "--seed", "-3"], 2, "--seed -3"),
    (["demo", "--out-dir", "{tmp}/syntax.py"], 2, "--out-dir"),
    # no command, unknown command
    ([], 2, "the following arguments are required: COMMAND"),
    (["frobnicate"], 2, "invalid choice: 'frobnicate'"),
]


@pytest.fixture
def nothing_runs(monkeypatch):
    """Compiling a model, sampling, validating, checking or training fails the test: every bad
    command line must be refused before any of them."""

    def forbidden(*args, **kwargs):
        raise AssertionError("a bad command line got as far as compiling or running")

    monkeypatch.setattr("bdl.spec.ModelSpec.compile", forbidden)
    monkeypatch.setattr("bdl.sampling.sample", forbidden)
    monkeypatch.setattr("bdl.sampling.merge_samples", forbidden)
    monkeypatch.setattr("bdl.validation.validate", forbidden)
    monkeypatch.setattr("bdl.validation.nuts_reference", forbidden)
    monkeypatch.setattr("bdl.kernels.check", forbidden)
    monkeypatch.setattr("bdl.kernels.verdicts.fresh", forbidden)
    monkeypatch.setattr("bdl.meta.trainer", forbidden)


@pytest.mark.parametrize(
    ("argv", "status", "fragment"), CASES, ids=[" ".join(a) or "(none)" for a, _, _ in CASES]
)
def test_bad_command_line(argv, status, fragment, tmp_path, capsys, nothing_runs):
    for name, text in MODEL_FILES.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "other.toml").write_text('kernel = "nnsghmc"\n')
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(args) == status
    err = capsys.readouterr().err
    assert fragment in err, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    # one message (argparse adds its usage line; a model-file error may quote its code line)
    assert len(lines) <= 3 or err.startswith("usage:"), err


def test_there_are_enough_cases_and_every_command_is_covered():
    assert len(CASES) >= 25
    commands = {argv[0] for argv, _, _ in CASES if argv}
    assert commands >= {"sample", "validate", "kernels", "check", "meta-train", "demo"}

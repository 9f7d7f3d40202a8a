"""The command line as a user meets it: Ctrl-C at any moment (exit 130, with the draws kept),
errors in model code located in the model file, quiet broken pipes, one-line warnings, the exit
codes in --help, and summaries that name parameters (parameter space) or monitor predictions
(networks, function space)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

import bdl
from bdl.cli.main import main
from bdl.cli.summary import function_space_lines, parameter_space_lines
from bdl.model_files import load_spec, resolve
from bdl.sampling import Samples

ROOT = Path(__file__).resolve().parents[1]
LR = ["sample", "linear_regression", "--kernel", "sgld", "--tuned"]
SHORT = ["--steps", "300", "--burn-in", "100", "--thin", "2", "--chains", "2"]


def fake_samples(num_draws: int, steps_done: int, interrupted: bool = True) -> Samples:
    """What bdl.sample returns for linear_regression (5 weights) after an interruption."""
    rng = np.random.default_rng(0)
    positions = {"net": {"w": rng.normal(size=(2, num_draws, 5)).astype(np.float32)}}
    info = {"energy": np.zeros((2, num_draws), np.float32)}
    steps = np.arange(num_draws) * 2 + 101
    return Samples(positions, {}, info, steps, "sgld", steps_done, interrupted)


# ------------------------------------------------------------------------------ Ctrl-C
def test_ctrl_c_while_compiling_exits_130(monkeypatch, capsys):
    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr("bdl.spec.ModelSpec.compile", interrupted)
    assert main([*LR, *SHORT]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "bdl sample: interrupted."


def test_ctrl_c_during_burn_in_says_there_are_no_draws(monkeypatch, capsys, tmp_path):
    """bdl.sample returns an interrupted Samples with zero draws: no crash, nothing saved."""
    monkeypatch.setattr("bdl.sampling.sample", lambda *a, **k: fake_samples(0, 40))
    out = tmp_path / "draws.npz"
    assert main([*LR, *SHORT, "--out", str(out)]) == 130
    captured = capsys.readouterr()
    assert "interrupted after 40 of 300 steps (during burn-in): no draws yet" in captured.err
    assert "Traceback" not in captured.err
    assert not out.exists()


def test_ctrl_c_in_the_real_loop_during_burn_in(monkeypatch, capsys):
    """The first compiled chunk raises KeyboardInterrupt, as Ctrl-C there would."""
    import bdl.sampling.run.program as program

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(program, "run_chunk", interrupted)
    assert main([*LR, *SHORT]) == 130
    err = capsys.readouterr().err
    assert "interrupted after 0 of 300 steps (during burn-in): no draws yet" in err
    assert "warning" not in err  # the library's warning is replaced by the command's message


def test_ctrl_c_while_sampling_summarises_and_saves_the_draws(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr("bdl.sampling.sample", lambda *a, **k: fake_samples(20, 140))
    out = tmp_path / "draws.npz"
    assert main([*LR, *SHORT, "--out", str(out)]) == 130
    captured = capsys.readouterr()
    assert "interrupted after 140 of 300 steps; summarising the 20 draws" in captured.err
    assert "net/w[0]" in captured.out
    assert out.is_file()


def test_ctrl_c_during_validation_exits_130(monkeypatch, capsys):
    validate_module = importlib.import_module("bdl.validation.validate")  # not the function
    monkeypatch.setattr(validate_module, "nuts_reference", lambda *a, **k: None)
    monkeypatch.setattr(validate_module, "sample", lambda *a, **k: fake_samples(3, 120))
    args = ["validate", "linear_regression", "--kernel", "sgld", "--steps", "300"]
    assert main([*args, "--burn-in", "100", "--hyper", "step_size=1e-4"]) == 130
    assert capsys.readouterr().err.strip().endswith("bdl validate: interrupted.")


def test_ctrl_c_during_meta_training_exits_130(monkeypatch, capsys, tmp_path):
    def train(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("bdl.meta.trainer", lambda kernel: train)
    assert main(["meta-train", "l2e", "--out", str(tmp_path / "run"), "--quiet"]) == 130
    assert "bdl meta-train: interrupted." in capsys.readouterr().err


def test_interruption_wins_over_divergence(monkeypatch, capsys):
    samples = fake_samples(20, 140)
    object.__setattr__(samples, "diverged", np.array([True, False]))
    object.__setattr__(samples, "divergence_step", np.array([120, -1]))
    monkeypatch.setattr("bdl.sampling.sample", lambda *a, **k: samples)
    assert main([*LR, *SHORT]) == 130


# ------------------------------------------------------------------------------ model code
BROKEN_NETWORK = """\
import jax.numpy as jnp

import bdl
from bdl.data.synthetic import linear_regression


def network(params, x):
    raise RuntimeError("this network is not written yet")


def build():
    data = linear_regression(n=20, dim=3, noise_sd=0.5, seed=0)
    model = bdl.Model(network=network, params={"w": jnp.zeros(3)},
                      likelihood=bdl.Gaussian(scale=0.5), prior=bdl.Normal(1.0))
    return bdl.ModelSpec(model, data, num_steps=10, burn_in=0, thin=1)
"""


def test_an_error_raised_in_the_model_code_names_the_file_and_line(tmp_path, capsys):
    path = tmp_path / "broken_network.py"
    path.write_text(BROKEN_NETWORK)
    assert main(["sample", str(path), "--kernel", "sgld", "--hyper", "step_size=1e-3"]) == 2
    err = capsys.readouterr().err
    assert "RuntimeError: this network is not written yet" in err
    assert f"raised at {path}:8, in network" in err
    assert "Traceback" not in err


def test_load_spec_raises_model_file_error_with_the_cause(tmp_path):
    from bdl.model_files import ModelFileError

    path = tmp_path / "typo.py"
    path.write_text("def build():\n    return undefined_name\n")
    with pytest.raises(ModelFileError, match=r"typo.py:2 \(in build\): NameError") as info:
        load_spec(str(path))
    assert isinstance(info.value.__cause__, NameError)


# ------------------------------------------------------------------------------ pipes, warnings
class ClosedPipe:
    def write(self, text):
        raise BrokenPipeError

    def flush(self):
        raise BrokenPipeError


def test_a_closed_pipe_ends_quietly_in_process(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert main(["kernels", "--no-check"]) == 141
    assert capsys.readouterr().err == ""


def test_a_closed_pipe_ends_quietly_in_the_console_script():
    """`bdl kernels | head -0`: the reader is gone before anything is written."""
    env = {**os.environ, "BDL_XLA_CACHE": "0", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bdl.cli.main", "kernels", "--no-check"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == ""


def test_warnings_print_as_one_line(monkeypatch, capsys):
    class Report:
        exact = True

        def __str__(self):
            return "nnsghmc: exact"

    monkeypatch.setattr("bdl.kernels.check", lambda *a, **k: Report())
    before = warnings.showwarning
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        args = ["check", "nnsghmc", "--hyper", "step_size=0.02", "--hyper", "alpha=5.0"]
        assert main(args) == 0
    err = capsys.readouterr().err
    assert err.startswith("bdl: warning: nnsghmc: h·(α·max f_Q² + c) = 2.5 ≥ 2"), err
    assert len(err.strip().splitlines()) == 1  # no source line, no file name
    assert warnings.showwarning is before  # library users keep Python's format


def test_help_lists_the_exit_codes(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for code in ("0 ", "1 ", "2 ", "3 ", "4 ", "130", "141"):
        assert f"\n  {code}" in out
    assert "interrupted" in out and "diverged" in out and "not converged" in out


# ------------------------------------------------------------------------------ summaries
def test_sample_names_the_parameters_and_reports_test_metrics(capsys):
    assert main([*LR, *SHORT]) == 4  # 2 chains x 100 draws: too short to have converged
    out = capsys.readouterr().out
    assert "net/w[0]" in out and "net/w[4]" in out
    assert "over all 5 parameters: min bulk ESS" in out
    assert "test BMA: rmse" in out
    assert "#0" not in out


def test_parameter_summary_uses_the_feature_names_of_the_data():
    spec = load_spec("logistic_breast_cancer")
    rng = np.random.default_rng(1)
    positions = {"net": {"b": rng.normal(size=(2, 8)), "w": rng.normal(size=(2, 8, 30))}}
    lines = parameter_space_lines(positions, spec.parameter_labels)
    text = "\n".join(lines)
    assert "net/w[mean radius]" in text and "net/b" in text
    assert lines[-1].startswith("... 19 more; over all 31 parameters: min bulk ESS")


def test_network_summary_is_in_function_space():
    """A Flax network: predictive means and log-likelihoods on held-out inputs, no weights."""
    target = load_spec("regression_1d").compile()
    positions = target.init_positions(jax.random.key(0), 12)
    positions = jax.tree.map(lambda a: np.asarray(a).reshape(2, 6, *a.shape[1:]), positions)
    text = "\n".join(function_space_lines(target, positions))
    assert "function space" in text
    assert "log-likelihood per input (mean over inputs)" in text
    assert "predictive mean, worst of" in text
    assert "Dense_0" not in text and "kernel[" not in text


def test_network_sample_prints_the_function_space_summary(monkeypatch, capsys):
    spec = load_spec("regression_1d")
    target = spec.compile()
    positions = target.init_positions(jax.random.key(0), 12)
    positions = jax.tree.map(lambda a: np.asarray(a).reshape(2, 6, *a.shape[1:]), positions)
    info = {"energy": np.zeros((2, 6), np.float32)}
    samples = Samples(positions, {}, info, np.arange(6), "sgld", 12)
    monkeypatch.setattr("bdl.spec.ModelSpec.compile", lambda self: target)
    monkeypatch.setattr("bdl.sampling.sample", lambda *a, **k: samples)
    args = ["sample", "regression_1d", "--kernel", "sgld", "--steps", "12", "--burn-in", "0"]
    assert main([*args, "--thin", "1", "--chains", "2", "--hyper", "step_size=1e-4"]) == 0
    out = capsys.readouterr().out
    assert "function space" in out and "Dense_0" not in out


def test_the_interrupted_samples_helper_matches_the_model():
    target = load_spec("linear_regression").compile()
    assert jax.tree.structure(target.initial_position) == jax.tree.structure(
        fake_samples(1, 1).positions
    )
    assert bdl.sample  # the lazy top-level names resolve


# ------------------------------------------------------------------- checkpoint and resume
def test_cli_checkpoint_resume_and_extend(tmp_path, capsys):
    """`--checkpoint DIR` then `--resume DIR --steps N` gives bitwise the draws of one run of N
    steps; the settings come back from DIR, and a flag that contradicts them is refused."""
    run = ["sample", "linear_regression", "--kernel", "sghmc", "--chains", "2", "--thin", "2"]
    directory = tmp_path / "ck"
    ran = (0, 4)  # 4: not converged, which these short runs may be; the draws are what matters
    assert main([*run, "--steps", "600", "--burn-in", "200", "--checkpoint", str(directory)]) in ran
    assert main(["sample", "--resume", str(directory), "--seed", "3"]) == 2
    assert "--seed 3 conflicts" in capsys.readouterr().err
    resumed = tmp_path / "resumed.npz"
    assert (
        main(["sample", "--resume", str(directory), "--steps", "900", "--out", str(resumed)]) in ran
    )
    whole = tmp_path / "whole.npz"
    assert main([*run, "--steps", "900", "--burn-in", "200", "--out", str(whole)]) in ran
    a, b = bdl.load_samples(resumed), bdl.load_samples(whole)
    np.testing.assert_array_equal(a.positions["net"]["w"], b.positions["net"]["w"])
    np.testing.assert_array_equal(a.info["energy"], b.info["energy"])
    assert a.steps_done == b.steps_done == 900
    # the extension is recorded: a plain --resume goes on to (here: is already at) 900 steps
    again = tmp_path / "again.npz"
    assert main(["sample", "--resume", str(directory), "--out", str(again)]) in ran
    assert bdl.load_samples(again).steps_done == 900


def test_cli_resume_from_another_directory(tmp_path, monkeypatch, capsys):
    """A model file and the stream's directory are recorded as absolute paths."""
    model = tmp_path / "mine.py"
    model.write_text(resolve("linear_regression").read_text())
    monkeypatch.chdir(tmp_path)
    run = ["sample", "mine.py", "--kernel", "sgld", "--hyper", "step_size=1e-4", "--chains", "1"]
    ran = (0, 4)  # 4: not converged, as one chain of 150 steps at h = 1e-4 is
    assert main([*run, "--steps", "100", "--burn-in", "0", "--checkpoint", "ck"]) in ran
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["sample", "--resume", str(tmp_path / "ck"), "--steps", "150"]) in ran
    assert "150 steps" in capsys.readouterr().out


def test_cli_tuned_hyper_overrides_the_suggestion(capsys):
    """--tuned with --hyper: the given values over the model's suggestion, a step size dropping a
    suggested learning rate and momentum; --tuned without a suggestion is refused."""
    base = ["sample", "mlp_digits", "--steps", "20", "--burn-in", "0", "--thin", "10"]
    base += ["--chains", "1"]
    tuned = [*base, "--kernel", "sghmc", "--tuned", "--hyper", "step_size=1e-4"]
    assert main(tuned) == 4  # 2 draws: not converged
    assert "{'step_size': 0.0001}" in capsys.readouterr().out
    assert main([*base, "--kernel", "psgld", "--tuned"]) == 2
    err = capsys.readouterr().err
    assert "suggests no hyper-parameters for psgld" in err and "sghmc, sgld" in err


def test_the_parameter_summary_is_in_the_models_constrained_parameters():
    """A learned noise scale is summarised as σ, not as the log σ the sampler moves in."""
    import numpyro.distributions as dist

    from bdl.cli.summary import summary_lines
    from bdl.data import linear_regression

    model = bdl.Model(
        network=lambda p, x: x @ p["w"],
        params={"w": jax.numpy.zeros(2)},
        likelihood=bdl.Gaussian(scale=None, scale_prior=dist.HalfNormal(1.0)),
    )
    target = bdl.compile(model, linear_regression(n=40, dim=2, noise_sd=0.5, seed=1))
    rng = np.random.default_rng(0)
    positions = {
        "net": {"w": rng.normal(size=(2, 50, 2)).astype(np.float32)},
        "lik": {"scale": np.full((2, 50), np.log(0.5), np.float32)},
    }
    samples = Samples(positions, {}, {}, np.arange(50), "sgld", 50)
    line = next(x for x in summary_lines(target, samples) if x.startswith("lik/scale"))
    assert float(line.split()[1]) == pytest.approx(0.5, rel=1e-5)


def test_options_read_true_and_false_as_booleans():
    """``--option centred=true`` reached a model's ``build`` as the string 'true' (truthy, and
    refused by a check that wants a bool)."""
    from bdl.cli.options import parse_options

    parsed = parse_options(["centred=true", "raw=False", "depth=3", "name=mlp"], "--option")
    assert parsed == {"centred": True, "raw": False, "depth": 3, "name": "mlp"}


def test_the_adapted_line_says_which_chains_re_centred_their_gradients():
    from bdl.cli.sample_cmd import adapted_line

    adapted = {
        "step_size": np.array([0.1, 0.2, 0.3]),
        "friction": np.array([1.0, 1.0, 2.0]),
        "control_variate": np.array([True, False, True]),
    }
    line = adapted_line(adapted)
    assert line.startswith("step_size 0.1 0.2 0.3; friction 1 1 2")
    assert line.endswith("gradients re-centred on the mode in 2 of 3 chains")

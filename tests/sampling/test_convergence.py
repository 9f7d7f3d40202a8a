"""Never a silent unconverged answer: ``bdl.sample`` checks every run (R̂, bulk and tail ESS,
stuck chains), warns when the check fails, keeps the verdict in ``samples.convergence`` (saved,
loaded, merged, shown), ``bdl sample`` exits 4 on it, and ``bdl validate`` refuses to compare such
a run with NUTS.

The pyproject filters ``bdl.ConvergenceWarning`` for the suite, whose runs are short on purpose;
here ``pytest.warns`` records it whatever the filters, and the converged run turns it into an
error.
"""

import dataclasses
import json
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bdl
from bdl.cli.main import main
from bdl.model_files import load_spec
from bdl.sampling import FixedChunks, check_convergence
from bdl.sampling.kept.writing import HEADER_KEY

#: SGHMC settings under which the conjugate regression mixes (tests/test_validate.py)
SGHMC = {"step_size": 5e-3, "friction": 20.0}


@pytest.fixture(scope="module")
def regression():
    """The conjugate linear regression (Gaussian prior and likelihood, known noise)."""
    return load_spec("linear_regression").compile()


@pytest.fixture(scope="module")
def converged(regression):
    """4 chains × 3,800 draws: at seed 1, max R̂ 1.001 and min bulk ESS ≈ 5,400 (13× the 400
    asked for), so the check passes with a wide margin."""
    kernel = bdl.kernels.get("sghmc", **SGHMC)
    with warnings.catch_warnings():
        warnings.simplefilter("error", bdl.ConvergenceWarning)
        return bdl.sample(
            regression, kernel, num_steps=40_000, burn_in=2_000, thin=10, num_chains=4, seed=1
        )


@pytest.fixture(scope="module")
def apart():
    """Two chains of a standard Gaussian started at ±30, with too few steps to meet: R̂ ≫ 1.01.
    The draws and the warnings issued."""
    target = bdl.compile(
        bdl.Potential(lambda t: -0.5 * jnp.sum(t["x"] ** 2), init={"x": jnp.zeros(3)})
    )
    init = {"x": jnp.array([[-30.0, -30.0, -30.0], [30.0, 30.0, 30.0]])}
    with pytest.warns(bdl.ConvergenceWarning, match=r"R̂ [0-9.]+ at x\[") as record:
        samples = bdl.sample(target, bdl.kernels.sgld(0.01), num_steps=60, num_chains=2,
                             init=init)  # fmt: skip
    return samples, list(record)


@pytest.fixture(scope="module")
def network():
    """A tanh MLP (regression_1d), 2 chains of 40 steps: far from converged."""
    target = load_spec("regression_1d").compile()
    kernel = bdl.kernels.get("sgld", step_size=1e-5)
    return target, bdl.sample(target, kernel, num_steps=40, num_chains=2)


def test_the_warning_fires_on_chains_that_have_not_met(apart):
    samples, record = apart
    verdict = samples.convergence
    assert not verdict.ok and verdict.max_rhat > 2 and verdict.space == "parameter"
    assert verdict.chains == 2 and verdict.draws == 60 and verdict.min_ess == 200
    message = str(record[0].message)
    assert "the draws have not converged" in message and "burn-in" in message
    assert "docs/troubleshooting.md" in message
    assert record[0].filename == __file__  # points at the call of bdl.sample


def test_no_warning_on_a_converged_run(converged):
    verdict = converged.convergence
    assert verdict.ok, verdict.report()
    assert verdict.max_rhat < 1.005 and min(verdict.min_ess_bulk, verdict.min_ess_tail) > 2_000
    assert verdict.quantities == verdict.of == 5 and verdict.stuck == ()
    assert repr(converged).endswith(", converged)")


def test_a_chain_that_cannot_move_is_named():
    """Chain 2 starts at 10⁸ in a Cauchy's tail: a gradient of 2·10⁻⁸ and noise √(2h) = 0.3 are
    far below float32's spacing there (8), so every update rounds away."""
    cauchy = bdl.compile(
        bdl.Potential(lambda t: -jnp.sum(jnp.log1p(t["x"] ** 2)), init={"x": jnp.zeros(2)})
    )
    init = {"x": jnp.array([[0.0, 0.0], [0.5, -0.5], [1e8, 0.0], [-0.5, 0.5]])}
    with pytest.warns(bdl.ConvergenceWarning, match=r"chain 2: x\[0\] has not moved \(sd 0 at"):
        samples = bdl.sample(
            cauchy, bdl.kernels.sgld(0.05), num_steps=2_000, num_chains=4, init=init
        )
    assert [s.chain for s in samples.convergence.stuck] == [2]
    assert np.all(samples.positions["x"][2, :, 0] == np.float32(1e8))


def test_a_chain_whose_adapted_step_is_far_below_the_others_is_named(converged):
    adapted = dict(converged.adapted or {}, step_size=np.array([7e-4, 8e-4, 1.2e-5, 7.5e-4]))
    verdict = check_convergence(dataclasses.replace(converged, adapted=adapted))
    assert not verdict.ok
    assert [str(s) for s in verdict.stuck] == [
        "chain 2: adapted step size 1.2e-05, 62× below the other chains' median 0.00075"
    ]


def test_a_network_is_checked_on_its_predictions(network):
    target, samples = network
    verdict = samples.convergence
    assert verdict.space == "function" and not verdict.ok
    assert verdict.max_rhat_at.startswith(("E[y | x_test[", "log p(y | x_test["))
    assert verdict.quantities <= 256 and verdict.of == 2 * len(target.x_test)


@pytest.mark.parametrize("thin, burn_in, chunk", [(1, 0, None), (3, 7, None), (3, 7, 10)])
def test_predictions_computed_during_the_run_give_the_verdict_of_the_draws(thin, burn_in, chunk):
    """bdl.sample evaluates a network's predictions on each chunk's draws while they are on the
    device (chunk 10: a few draws per call in buffers of 256 rows); the verdict must be the one
    computed afterwards from the kept draws."""
    target = load_spec("regression_1d").compile()
    kernel = bdl.kernels.get("sgld", step_size=1e-5)
    loop = None if chunk is None else bdl.sampling.LoopOptions(chunks=FixedChunks(chunk))
    samples = bdl.sample(
        target, kernel, num_steps=400, burn_in=burn_in, thin=thin, num_chains=3, seed=2,
        loop=loop,
    )  # fmt: skip
    during, after = samples.convergence, check_convergence(samples, target)
    assert during.space == after.space == "function"
    assert (during.quantities, during.max_rhat_at, during.min_ess_bulk_at) == (
        after.quantities, after.max_rhat_at, after.min_ess_bulk_at,
    )  # fmt: skip
    for name in ("max_rhat", "min_ess_bulk", "min_ess_tail"):
        assert getattr(during, name) == pytest.approx(getattr(after, name), rel=1e-4), name


def test_nothing_is_checked_when_no_draws_are_kept(regression, tmp_path):
    kernel = bdl.kernels.get("sghmc", **SGHMC)
    samples = bdl.sample(regression, kernel, num_steps=50, keep_draws=False, stream_to=tmp_path)
    assert samples.convergence is None


@pytest.mark.parametrize("suffix", [".npz", ".nc"])
def test_the_verdict_is_saved_and_loaded(tmp_path, suffix, apart):
    samples, _ = apart
    path = samples.save(tmp_path / f"draws{suffix}")
    loaded = bdl.load_samples(path)
    assert loaded.convergence.as_dict() == samples.convergence.as_dict()
    assert repr(loaded).endswith(", NOT converged)")


def test_a_file_written_before_the_check_loads_without_a_verdict(tmp_path, apart):
    samples, _ = apart
    path = samples.save(tmp_path / "draws.npz")
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    header = json.loads(str(arrays[HEADER_KEY]))
    del header["convergence"]
    arrays[HEADER_KEY] = np.asarray(json.dumps(header))
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    assert bdl.load_samples(path).convergence is None


def parts_of(samples, cut):
    """The run as two processes would have returned it: chains [0, cut) and [cut, C), each
    with its own verdict."""
    parts = []
    for start, stop in ((0, cut), (cut, samples.num_chains)):
        part = dataclasses.replace(
            samples,
            positions=jax.tree.map(lambda a, s=start, e=stop: a[s:e], samples.positions),
            info={k: v[start:stop] for k, v in samples.info.items()},
            diverged=samples.diverged[start:stop],
            divergence_step=samples.divergence_step[start:stop],
            runaway=samples.runaway[start:stop],
            runaway_step=samples.runaway_step[start:stop],
            runaway_reason=samples.runaway_reason[start:stop],
            adapted=None,
            meta={**samples.meta, "layout": {"chains": [start, stop]}},
        )
        parts.append(dataclasses.replace(part, convergence=check_convergence(part)))
    return parts


def test_merging_recomputes_the_verdict_over_every_chain(converged):
    """Two processes' verdicts, each over two chains, become the verdict over four."""
    merged = bdl.merge_samples(parts_of(converged, 2))
    whole = check_convergence(dataclasses.replace(converged, adapted=None))
    assert merged.convergence.as_dict() == whole.as_dict()
    assert merged.convergence.chains == 4


def test_a_networks_merged_verdict_needs_the_model(network):
    target, samples = network
    parts = [
        dataclasses.replace(
            samples,
            positions=jax.tree.map(lambda a, i=i: a[i : i + 1], samples.positions),
            info={k: v[i : i + 1] for k, v in samples.info.items()},
            diverged=samples.diverged[i : i + 1],
            divergence_step=samples.divergence_step[i : i + 1],
            meta={**samples.meta, "layout": {"chains": [i, i + 1]}},
        )
        for i in (0, 1)
    ]
    assert bdl.merge_samples(parts).convergence is None
    merged = bdl.merge_samples(parts, target=target)
    assert merged.convergence.as_dict() == samples.convergence.as_dict()
    with pytest.raises(TypeError, match=r"merge_samples\(target=...\) must be the compiled model"):
        bdl.merge_samples(parts, target="regression_1d")


# ------------------------------------------------------------------------- command line
LR = ["sample", "linear_regression", "--kernel", "sghmc"]
LR += [f"--hyper={k}={v}" for k, v in SGHMC.items()]


def test_the_command_line_exits_4_when_the_draws_have_not_converged(capsys, tmp_path):
    out = tmp_path / "draws.npz"
    args = [*LR, "--steps", "300", "--burn-in", "100", "--chains", "2", "--out", str(out)]
    assert main(args) == 4
    captured = capsys.readouterr()
    assert "convergence: NOT CONVERGED: max R̂" in captured.out
    assert "bdl sample: warning: the draws have not converged" in captured.err
    assert "To do:" in captured.err
    assert out.is_file()  # the draws are still saved


def test_the_command_line_exits_0_on_a_converged_run(capsys):
    args = [*LR, "--steps", "40000", "--burn-in", "2000", "--thin", "10", "--seed", "1"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "convergence: ok: max R̂" in captured.out and "warning" not in captured.err


def test_divergence_takes_precedence_over_convergence(monkeypatch, capsys, apart):
    """Both reported; status 3."""
    rng = np.random.default_rng(0)
    positions = {"net": {"w": rng.normal(size=(2, 30, 5)).astype(np.float32)}}
    unconverged = apart[0].convergence
    samples = bdl.Samples(
        positions, {}, {"energy": np.zeros((2, 30), np.float32)}, np.arange(30), "sghmc", 30,
        diverged=np.array([True, False]), divergence_step=np.array([12, -1]),
        convergence=unconverged,
    )  # fmt: skip
    monkeypatch.setattr("bdl.sampling.sample", lambda *a, **k: samples)
    assert main([*LR, "--steps", "30", "--burn-in", "0", "--chains", "2"]) == 3
    err = capsys.readouterr().err
    assert "have not converged" in err and "1 of 2 chains diverged" in err


# ------------------------------------------------------------------------- validation
def test_validate_fails_an_unconverged_run_without_comparing_it(regression, converged):
    reference = bdl.validation.Reference(
        positions=converged.positions, space="parameter", monitored=np.zeros((4, 10, 1)),
        max_rhat=1.0, min_ess=1e4, settings={},
    )  # fmt: skip
    kernel = bdl.kernels.get("sghmc", **SGHMC)
    report = bdl.validate(regression, kernel, num_steps=300, burn_in=100, reference=reference)
    assert not report.passed
    names = [r.name for r in report.rows]
    assert names[0] == "diverged chains (left out)"
    failed = [r.name for r in report.rows if r.passed is False]
    assert "kernel max R̂ (parameter space)" in failed
    assert "kernel min bulk ESS (convergence)" in failed
    assert not any("mean" in n or "sd ratio" in n or "energy" in n for n in names)  # not compared
    assert "kernel max R̂" in report.table()


def test_validate_compares_a_converged_run(regression, converged):
    reference = bdl.validation.Reference(
        positions=converged.positions, space="parameter", monitored=np.zeros((4, 10, 1)),
        max_rhat=1.0, min_ess=1e4, settings={},
    )  # fmt: skip
    kernel = bdl.kernels.get("sghmc", **SGHMC)
    report = bdl.validate(regression, kernel, num_steps=40_000, burn_in=2_000, thin=10, seed=2,
                          reference=reference)  # fmt: skip
    gated = {r.name: r.passed for r in report.rows}
    assert gated["kernel max R̂ (parameter space)"] and gated["kernel stuck chains"]
    assert len(report.rows) > 5  # the comparison rows follow


def test_check_convergence_names_a_bad_argument(converged):
    with pytest.raises(TypeError, match=r"check_convergence needs a bdl.Samples .* got dict"):
        check_convergence({"x": np.zeros((2, 10))})
    with pytest.raises(TypeError, match=r"target=...\) must be the compiled model"):
        check_convergence(converged, "linear_regression")
    with pytest.raises(ValueError, match=r"space must be 'parameter' or 'function'"):
        check_convergence(converged, space="weights")

"""`bdl.validate`: a correct kernel passes against NUTS, a biased one fails, and an untrusted
reference is refused with advice — on the conjugate linear regression (seconds of NUTS)."""

import sys

import numpy as np
import pytest

import bdl
from bdl.cli.main import main
from bdl.model_files import load_spec
from bdl.validation import UntrustedReferenceError
from bdl.validation.reference_draws import ReferenceSamples

NUTS = {"num_warmup": 500, "num_samples": 500, "use_cache": False}


@pytest.fixture(scope="module")
def target():
    return load_spec("linear_regression").compile()


@pytest.fixture(scope="module")
def reference(target):
    return bdl.validation.nuts_reference(target, **NUTS)


def test_sghmc_passes_against_nuts(target, reference):
    kernel = bdl.kernels.get("sghmc", step_size=5e-3, friction=20.0)
    report = bdl.validate(
        target, kernel, num_steps=40_000, burn_in=2_000, thin=10, reference=reference, seed=5
    )
    assert report.passed, report.table()


def test_a_biased_kernel_fails(target, reference):
    # SGLD far above its stable step size range inflates the spread well beyond 10 %.
    kernel = bdl.kernels.get("sgld", step_size=3e-3)
    report = bdl.validate(
        target, kernel, num_steps=20_000, burn_in=2_000, thin=10, reference=reference, seed=5
    )
    assert not report.passed, report.table()


def test_untrusted_reference_is_refused_with_advice(target):
    with pytest.raises(UntrustedReferenceError, match=r"num_samples|chains|warm"):
        bdl.validation.nuts_reference(target, num_warmup=20, num_samples=30, use_cache=False)


def test_cli_exit_code(tmp_path, monkeypatch):
    monkeypatch.setenv("BDL_CACHE_DIR", str(tmp_path / "cache"))
    args = ["validate", "linear_regression", "--kernel", "sgld", "--hyper", "step_size=3e-3"]
    args += ["--steps", "20000", "--burn-in", "2000", "--thin", "10"]
    args += ["--nuts-warmup", "500", "--nuts-samples", "500", "--plot", str(tmp_path / "v.png")]
    assert main(args) == 1
    assert (tmp_path / "v.png").is_file()


def test_reference_draws_from_bdl_reference_are_accepted(target, reference):
    """What ``bdl.reference`` returns is unwrapped: the same report as its NUTS run."""
    draws = np.arange(reference.monitored.shape[1])
    drawn = ReferenceSamples(
        positions=reference.positions, extra={}, info={}, steps=draws, kernel="nuts",
        steps_done=draws.size, meta={}, reference=reference,
    )  # fmt: skip
    kernel = bdl.kernels.get("sghmc", step_size=5e-3, friction=20.0)
    run = dict(num_steps=2_000, burn_in=500, thin=10, seed=5)
    a = bdl.validate(target, kernel, reference=drawn, **run)
    b = bdl.validate(target, kernel, reference=reference, **run)
    assert a.reference is reference
    assert [r.value for r in a.rows] == [r.value for r in b.rows]


@pytest.mark.parametrize(
    "bad, error, match",
    [
        ("not a reference", TypeError, "reference=.*bdl.reference"),
        ({"w": 1.0}, TypeError, "reference=.*got dict"),
    ],
)
def test_a_bad_reference_is_refused_before_anything_runs(target, bad, error, match, monkeypatch):
    monkeypatch.setattr(sys.modules["bdl.validation.validate"], "sample", None)  # nothing runs
    kernel = bdl.kernels.get("sghmc", step_size=5e-3, friction=20.0)
    with pytest.raises(error, match=match):
        bdl.validate(target, kernel, num_steps=100, reference=bad)


def test_a_reference_of_another_model_is_refused(target, reference):
    other = load_spec("logistic_breast_cancer").compile()
    kernel = bdl.kernels.get("sghmc", step_size=5e-3, friction=20.0)
    with pytest.raises(ValueError, match=r"reference=.*another model"):
        bdl.validate(other, kernel, num_steps=100, reference=reference)

"""`bdl.validate`: a correct kernel passes against NUTS, a biased one fails, and an untrusted
reference is refused with advice — on the conjugate linear regression (seconds of NUTS)."""

import pytest

import bdl
from bdl.cli.main import main
from bdl.model_files import load_spec
from bdl.validation import UntrustedReferenceError

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

"""``bdl.reference`` and ``bdl reference MODEL``: trusted NUTS draws in the model's constrained,
named parameters, cached, refused by the validation gate."""

import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from stat_utils import assert_moments

import bdl
from bdl.cli.main import main
from bdl.data import linear_regression, linear_regression_posterior
from bdl.validation import UntrustedReferenceError

NUTS = {"num_warmup": 300, "num_samples": 500}


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BDL_CACHE_DIR", str(tmp_path / "cache"))


def _data():
    return linear_regression(n=40, dim=2, noise_sd=0.5, seed=1)


def _model(scale=0.5):
    return bdl.Model(
        network=lambda p, x: x @ p["w"],
        params={"w": jnp.zeros(2)},
        likelihood=bdl.Gaussian(scale=scale, scale_prior=dist.HalfNormal(1.0)),
        name="linreg",
    )


@pytest.mark.slow
def test_draws_are_named_and_match_the_closed_form():
    data = _data()
    ref = bdl.reference(_model(), data, **NUTS)
    assert ref.trusted and ref.names() == ["net/w"]
    assert ref["net/w"].shape == (4, 500, 2)
    mean, cov = linear_regression_posterior(data.x_train, data.y_train, 0.5)
    assert_moments(ref["net/w"].astype(np.float64), mean, cov, min_ess=400)
    with pytest.raises(KeyError, match="net/w"):
        ref["net/v"]


def test_learned_scale_is_returned_constrained_and_the_run_is_cached():
    compiled = bdl.compile(_model(scale=None), _data())
    ref = bdl.reference(compiled, **NUTS)
    u = np.asarray(ref.positions["lik"]["scale"])
    np.testing.assert_allclose(ref["lik/scale"], np.exp(u), rtol=1e-6)
    assert np.all(ref["lik/scale"] > 0)
    assert set(ref.mean()) == {"net/w", "lik/scale"}
    again = bdl.reference(compiled, **NUTS)  # from the cache: the same draws
    np.testing.assert_array_equal(again["lik/scale"], ref["lik/scale"])
    predictive = compiled.predictive(ref, compiled.x_test[:3])  # accepted as samples
    assert predictive.mean.shape == (3,)


def test_untrusted_reference_is_refused_or_flagged():
    compiled = bdl.compile(_model(), _data())
    with pytest.raises(UntrustedReferenceError, match="num_warmup"):
        bdl.reference(compiled, num_warmup=5, num_samples=8, use_cache=False)
    ref = bdl.reference(
        compiled, num_warmup=5, num_samples=8, use_cache=False, require_trusted=False
    )
    assert not ref.trusted and "NOT trusted" in ref.summary()


@pytest.mark.parametrize(
    "args, error, match",
    [
        ((_model(),), ValueError, "needs its data"),
        ((3.0,), TypeError, "compiled model"),
    ],
)
def test_bad_arguments(args, error, match):
    with pytest.raises(error, match=match):
        bdl.reference(*args)


@pytest.mark.slow
def test_cli_prints_the_summary_and_saves(tmp_path, capsys):
    out = tmp_path / "ref.npz"
    code = main(
        ["reference", "linear_regression", "--warmup", "500", "--samples", "500", "--out", str(out)]
    )  # 300 and 300 gave R̂ 1.011 at seed 0, at the gate's edge; 500 and 500 give 1.004
    text = capsys.readouterr().out
    assert code == 0, text
    assert "net/w[0]" in text and "trusted" in text and out.is_file()
    loaded = bdl.load_samples(out)
    assert loaded.num_draws == 500


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--chains", "2"], "--chains 2 must be >= 4"),
        (["--out", "ref.txt"], "--out ref.txt"),
        (["--warmup", "-1"], "--warmup"),
    ],
)
def test_cli_bad_usage_exits_2(argv, match, capsys):
    assert main(["reference", "linear_regression", *argv]) == 2
    assert match in capsys.readouterr().err


def test_hierarchical_hyper_parameters_are_named_and_constrained():
    """A hierarchical prior's scales are draws like any parameter: ``hyper/<name>/...``,
    in their constrained space (σ = exp(u))."""
    prior = bdl.ByPath(
        {"net/w": bdl.HierarchicalNormal(scale=dist.HalfNormal(1.0), per="input", name="ard")},
        default=bdl.Normal(1.0),
    )
    model = bdl.Model(
        network=lambda p, x: x @ p["w"],
        params={"w": jnp.zeros(2)},
        likelihood=bdl.Gaussian(scale=0.5),
        prior=prior,
        name="ard",
    )
    ref = bdl.reference(
        bdl.compile(model, _data()), num_warmup=50, num_samples=50, require_trusted=False
    )
    hyper = [name for name in ref.names() if name.startswith("hyper/ard/")]
    assert hyper, ref.names()
    for name in hyper:
        assert np.all(ref[name] > 0) and ref[name].shape[:2] == (4, 50)
    assert set(ref.mean()) == set(ref.names()) and len(ref.names()) == 1 + len(hyper)


def test_cache_keys_tell_priors_with_other_parameters_apart():
    """Two models that differ only in a prior's parameters (Student-t with 3 and 5 degrees of
    freedom) must not share a cached reference; the same declaration built twice does."""
    from bdl.validation.reference import cache_key

    def compiled(df: float):
        model = bdl.Model(
            network=lambda p, x: x @ p["w"],
            params={"w": jnp.zeros(2)},
            likelihood=bdl.Gaussian(scale=0.5),
            prior=bdl.Distribution(dist.StudentT(df)),
            name="linreg",
        )
        return bdl.compile(model, _data())

    assert cache_key(compiled(3.0), 1.0, {}) != cache_key(compiled(5.0), 1.0, {})
    assert cache_key(compiled(3.0), 1.0, {}) == cache_key(compiled(3.0), 1.0, {})

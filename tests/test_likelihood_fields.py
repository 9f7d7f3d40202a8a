"""Per-example known scales: ``Gaussian(scale="sigma")`` / ``StudentT(scale="sigma")`` read σ_i from
a named data field; log-densities against NumPyro, minibatches carry the field row by row."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest

import bdl
from bdl.data import Dataset

RTOL, ATOL = 1e-5, 1e-5


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _linear(p, x):
    return x @ p["w"] + p["b"]


def _model(likelihood, **kw):
    return bdl.Model(
        network=_linear,
        params={"w": jnp.full((2, 1), 0.3), "b": jnp.full((1,), -0.2)},
        likelihood=likelihood,
        **kw,
    )


@pytest.mark.parametrize(
    "likelihood, reference",
    [
        (bdl.Gaussian(scale="sigma"), lambda f, s: dist.Normal(f, s)),
        (bdl.StudentT(df=3.0, scale="sigma"), lambda f, s: dist.StudentT(3.0, f, s)),
    ],
)
def test_per_example_scale_matches_numpyro(rng, likelihood, reference):
    """log p(y_i | f_i) = log N(y_i; f_i, σ_i²) (resp. StudentT) with σ_i from params['sigma']."""
    f = rng.normal(size=(9, 1)).astype(np.float32)
    y = rng.normal(size=(9,)).astype(np.float32)
    s = rng.uniform(0.2, 3.0, size=9).astype(np.float32)
    got = jax.jit(likelihood.log_prob)(jnp.asarray(f), jnp.asarray(y), {"sigma": jnp.asarray(s)})
    want = reference(jnp.asarray(f[:, 0]), jnp.asarray(s)).log_prob(jnp.asarray(y))
    assert got.shape == (9,)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    assert likelihood.fields == ("sigma",)


def test_per_example_scale_broadcasts_over_target_entries(rng):
    """Targets (n, d) with σ_i of shape (n,): σ_i scales every entry of example i."""
    f = rng.normal(size=(5, 3)).astype(np.float32)
    y = rng.normal(size=(5, 3)).astype(np.float32)
    s = rng.uniform(0.5, 2.0, size=5).astype(np.float32)
    got = bdl.Gaussian(scale="sigma").log_prob(jnp.asarray(f), jnp.asarray(y), {"sigma": s})
    want = dist.Normal(f, s[:, None]).log_prob(y).sum(-1)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_compiled_energy_uses_each_examples_scale(rng):
    """U(θ) = −Σ_i log N(y_i; f(x_i), σ_i²) − log p(θ), through a dict data set."""
    x = rng.normal(size=(12, 2)).astype(np.float32)
    y = rng.normal(size=12).astype(np.float32)
    s = rng.uniform(0.3, 2.0, size=12).astype(np.float32)
    compiled = bdl.compile(_model(bdl.Gaussian(scale="sigma")), {"x": x, "y": y, "sigma": s})
    position = compiled.initial_position
    f = x @ np.full((2, 1), 0.3, np.float32) - 0.2
    want = -(
        dist.Normal(f[:, 0], s).log_prob(y).sum()
        + dist.Normal(0.0, 1.0).log_prob(jnp.asarray([0.3, 0.3, -0.2])).sum()
    )
    np.testing.assert_allclose(compiled.energy(position), want, rtol=1e-5)


def test_minibatches_carry_the_field_row_by_row(rng):
    """Every minibatch pairs each (x_i, y_i) with its own σ_i: encode i in all three and check
    them, and Ũ on a minibatch equals −(n/B) Σ_B log p − log p(θ) computed by hand."""
    n, b = 16, 4
    x = np.stack([np.arange(n), np.zeros(n)], 1).astype(np.float32)
    y = np.arange(n, dtype=np.float32)
    s = 1.0 + np.arange(n, dtype=np.float32)
    data = Dataset("indexed", x, y, fields={"sigma": s})
    compiled = bdl.compile(_model(bdl.Gaussian(scale="sigma")), data, batch_size=b)
    stream = compiled.init_batches(jax.random.key(3))
    position = compiled.initial_position
    for step in range(6):
        batch, stream = compiled.next_batch(stream, jnp.asarray(step))
        xb, yb, fb = batch
        np.testing.assert_array_equal(xb[:, 0], yb)
        np.testing.assert_array_equal(fb["sigma"], yb + 1.0)
        f = 0.3 * np.asarray(xb[:, 0]) - 0.2
        ll = dist.Normal(f, fb["sigma"]).log_prob(yb).sum()
        want = -((n / b) * ll + compiled.log_prior(position))
        got = compiled.stochastic_energy(position, batch)
        np.testing.assert_allclose(got, want, rtol=1e-5)
    _, ys, fs = compiled.epoch_batches(jax.random.key(0))
    assert fs["sigma"].shape == (n // b, b)
    np.testing.assert_array_equal(fs["sigma"], ys + 1.0)


def test_test_split_fields_reach_the_validation_summaries(rng):
    """Held-out log-likelihoods use the test split's σ_i."""
    from bdl.validation.reference import evaluation_fields, function_summaries

    x = rng.normal(size=(10, 2)).astype(np.float32)
    s = rng.uniform(0.5, 2.0, size=10).astype(np.float32)
    data = Dataset(
        "split",
        x[:6],
        x[:6, 0],
        x[6:],
        x[6:, 0],
        fields={"sigma": s[:6]},
        fields_test={"sigma": s[6:]},
    )
    compiled = bdl.compile(_model(bdl.Gaussian(scale="sigma")), data)
    np.testing.assert_array_equal(evaluation_fields(compiled)["sigma"], s[6:])
    positions = jax.tree.map(lambda a: a[None, None], compiled.initial_position)
    summaries = function_summaries(compiled, positions)
    f = x[6:] @ np.full((2, 1), 0.3, np.float32) - 0.2
    want_ll = dist.Normal(f[:, 0], s[6:]).log_prob(x[6:, 0])
    np.testing.assert_allclose(summaries[0, 0, 4:], want_ll, rtol=1e-5)


@pytest.mark.parametrize(
    "data, match",
    [
        ({"x": np.zeros((4, 2)), "y": np.zeros(4)}, "reads the per-example field 'sigma'"),
        ({"x": np.zeros((4, 2)), "y": np.zeros(4), "sigma": np.ones(3)}, "one entry per example"),
        ({"x": np.zeros((4, 2)), "y": np.zeros(4), "sigma": np.array([1, 0, 1, 1.0])}, "> 0"),
        ({"x": np.zeros((4, 2)), "y": np.zeros(4), "sigma": np.array([1, np.nan, 1, 1])}, "NaN"),
        ({"y": np.zeros(4)}, "needs keys 'x' and 'y'"),
    ],
)
def test_bad_fields_raise_before_compiling(data, match):
    with pytest.raises(ValueError, match=match):
        bdl.compile(_model(bdl.Gaussian(scale="sigma")), data)


def test_missing_test_fields_named():
    data = Dataset(
        "d",
        np.zeros((4, 2)),
        np.zeros(4),
        np.zeros((2, 2)),
        np.zeros(2),
        fields={"sigma": np.ones(4)},
    )
    with pytest.raises(ValueError, match="fields_test"):
        bdl.compile(_model(bdl.Gaussian(scale="sigma")), data)


def test_scale_field_name_must_be_an_identifier():
    with pytest.raises(ValueError, match="field of the data set"):
        bdl.Gaussian(scale="my sigma")


def test_log_likelihood_without_the_field_says_so():
    data = {"x": np.zeros((4, 2)), "y": np.zeros(4), "sigma": np.ones(4)}
    compiled = bdl.compile(_model(bdl.Gaussian(scale="sigma")), data)
    with pytest.raises(ValueError, match="fields="):
        compiled.log_likelihood(compiled.initial_position, compiled.x_train, compiled.y_train)


def test_predictions_need_no_scale_but_test_metrics_use_the_test_fields(rng):
    """The predictive mean is f whatever σ_i; the held-out NLL scores each y_i with its σ_i."""
    from bdl.evaluation import test_metrics

    x = rng.normal(size=(10, 2)).astype(np.float32)
    y = rng.normal(size=10).astype(np.float32)
    s = rng.uniform(0.5, 2.0, size=10).astype(np.float32)
    data = Dataset(
        "split", x[:6], y[:6], x[6:], y[6:], fields={"sigma": s[:6]}, fields_test={"sigma": s[6:]}
    )
    compiled = bdl.compile(_model(bdl.Gaussian(scale="sigma")), data)
    positions = jax.tree.map(lambda a: a[None], compiled.initial_position)
    f = x[6:] @ np.full((2, 1), 0.3, np.float32) - 0.2
    np.testing.assert_allclose(compiled.predict(positions, x[6:]), f[:, 0], rtol=1e-6)
    metrics = test_metrics(compiled, positions)
    want = -dist.Normal(f[:, 0], s[6:]).log_prob(y[6:]).mean()
    np.testing.assert_allclose(metrics["nll"], want, rtol=1e-5)

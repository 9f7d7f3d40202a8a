"""Models without a network: ``bdl.Model(likelihood=…, params=…)``.

The likelihood reads its learned parameters directly; minibatches, tempering, NUTS (and
``bdl.reference``), the predictive, constrained draws by name, ArviZ and the command line work as
for any model. The shipped bdl/models/gaussian_mixture.py and bdl/models/lkj_correlation.py are
validated against NUTS in the slow tests.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer.util import potential_energy
from stat_utils import mean_and_mcse, z_threshold

import bdl
from bdl.cli.main import main
from bdl.data.dataset import Dataset
from bdl.model_files import load_spec

Y = np.random.default_rng(0).normal(1.0, 1.0, size=40).astype(np.float32)


def _normal_mean(prior_sd: float = 10.0) -> bdl.Likelihood:
    """y_i ~ N(μ, 1), μ ~ N(0, prior_sd²): the conjugate normal mean."""
    return bdl.Likelihood.from_numpyro(dist.Normal, loc=dist.Normal(0.0, prior_sd), scale=1.0)


def _mixture() -> bdl.Likelihood:
    return load_spec("gaussian_mixture").model.likelihood


# ------------------------------------------------------------------------------ declaring
@pytest.mark.parametrize(
    "declare, error, fragment",
    [
        (lambda: bdl.Model(likelihood=bdl.Gaussian(1.0)), ValueError, "reads a network output"),
        (
            lambda: bdl.Model(lambda p, x: x @ p["w"], _normal_mean(), params={"w": np.ones(1)}),
            ValueError,
            "reads no network output",
        ),
        (
            lambda: bdl.Model(likelihood=bdl.Likelihood.from_numpyro(dist.Normal, loc=0.0)),
            ValueError,
            "there is nothing to sample",
        ),
        (
            lambda: bdl.Model(likelihood=_normal_mean(), params={"scale": 1.0}),
            ValueError,
            "names ['scale'], which are not learned parameters",
        ),
        (
            lambda: bdl.Model(likelihood=_normal_mean(), params=[1.0]),
            TypeError,
            "gives starting values of the likelihood's learned parameters",
        ),
        (lambda: bdl.Model(), TypeError, "Model(likelihood=...) must be a bdl likelihood"),
    ],
)
def test_declaration_refuses_what_cannot_be_a_model(declare, error, fragment):
    with pytest.raises(error) as info:
        declare()
    assert fragment in str(info.value)


def test_starting_values_are_checked_at_compile():
    mixture = _mixture()
    with pytest.raises(ValueError, match=r"has shape \(3,\); the learned parameter 'loc'"):
        bdl.compile(bdl.Model(likelihood=mixture, params={"loc": np.zeros(3)}), Y)
    with pytest.raises(ValueError, match="lies outside the support"):
        bdl.compile(bdl.Model(likelihood=mixture, params={"loc": np.array([1.0, -1.0])}), Y)


def test_data_as_an_array_a_dict_or_a_dataset_give_one_model():
    model = bdl.Model(likelihood=_mixture(), params={"loc": np.array([-1.0, 1.0])})
    x = np.zeros((Y.size, 0), np.float32)
    compiled = [
        bdl.compile(model, data)
        for data in (Y, {"y": Y}, (x, Y), Dataset("d", x, Y), jnp.asarray(Y))
    ]
    energies = [float(c.energy(c.initial_position)) for c in compiled]
    assert energies == [energies[0]] * len(energies)
    net, lik = compiled[0].constrain(compiled[0].initial_position)
    assert net == {}
    np.testing.assert_array_equal(lik["loc"], [-1.0, 1.0])  # the declared start
    np.testing.assert_allclose(lik["weights"], [0.5, 0.5])  # the simplex's centre


def test_energy_is_numpyros_potential_and_minibatches_are_unbiased():
    """U equals NumPyro's potential energy of the mixture; the mean of Ũ over the minibatches of
    one epoch (disjoint, covering the data) is U exactly."""
    compiled = bdl.compile(bdl.Model(likelihood=_mixture()), Y, batch_size=8)
    position = jax.tree.map(lambda a: a[0], compiled.init_positions(jax.random.key(3), 1))

    def numpyro_model():
        w = numpyro.sample("weights", dist.Dirichlet(jnp.array([5.0, 5.0])))
        mu = numpyro.sample("loc", bdl.Ordered(dist.Normal(0.0, 2.0), 2))
        s = numpyro.sample("scale", dist.HalfNormal(2.0).expand([2]))
        mix = dist.MixtureSameFamily(dist.Categorical(probs=w), dist.Normal(mu, s))
        numpyro.sample("y", mix, obs=Y)

    want = float(potential_energy(numpyro_model, (), {}, position["lik"]))
    assert float(compiled.energy(position)) == pytest.approx(want, rel=1e-5)
    x, y = compiled.epoch_batches(jax.random.key(0))
    minibatch = jax.jit(lambda p, b: compiled.stochastic_energy(p, b))
    batches = [minibatch(position, (x[b], y[b])) for b in range(x.shape[0])]
    assert float(np.mean(batches)) == pytest.approx(float(compiled.energy(position)), rel=1e-5)


@pytest.mark.parametrize("tempering", ["posterior", "likelihood"])
def test_tempering(tempering):
    """U_T = −Σ log p(y_i | μ) − w(T) log p(μ), w = 1 or T; the potential is U_T / T."""
    t = 0.5
    model = bdl.Model(likelihood=_normal_mean(), temperature=t, tempering=tempering)
    compiled = bdl.compile(model, Y)
    position = {"net": {}, "lik": {"loc": jnp.asarray(0.7)}}
    ll = float(jnp.sum(dist.Normal(0.7, 1.0).log_prob(Y)))
    lp = float(dist.Normal(0.0, 10.0).log_prob(0.7))
    weight = 1.0 if tempering == "posterior" else t
    want = -(ll + weight * lp)
    assert float(compiled.energy(position)) == pytest.approx(want, rel=1e-6)
    assert float(compiled.potential_fn()(position)) == pytest.approx(want / t, rel=1e-6)


def test_nuts_reference_names_the_parameters_and_matches_the_closed_form():
    """bdl.reference on the conjugate normal mean: the draws of ``lik/loc`` have the posterior
    mean Σy/(n + 1/100) (z-test with the ESS-based MCSE) and sd 1/√(n + 1/100)."""
    compiled = bdl.compile(bdl.Model(likelihood=_normal_mean()), Y)
    ref = bdl.reference(compiled, num_warmup=200, num_samples=600, use_cache=False)
    assert ref.names() == ["lik/loc"]
    precision = Y.size + 1 / 100
    mean, sd = Y.sum() / precision, 1 / math.sqrt(precision)
    m, se, ess = mean_and_mcse(ref["lik/loc"])
    assert ess > 400
    assert abs(m - mean) / se < z_threshold(2)
    # sd: its standard error is ≈ sd/√(2 ESS) for a Gaussian
    assert abs(ref["lik/loc"].std() - sd) / (sd / math.sqrt(2 * ess)) < z_threshold(2)


def test_draws_predictive_and_arviz_are_constrained_and_named():
    model = bdl.Model(likelihood=_mixture(), params={"loc": np.array([-1.0, 1.0])})
    compiled = bdl.compile(model, Y, batch_size=10)
    kernel = bdl.kernels.get("sghmc", step_size=1e-3, friction=20.0)
    samples = bdl.sample(
        compiled, kernel, num_steps=300, burn_in=100, thin=10, num_chains=2, init="fixed"
    )
    named = samples.named(compiled)
    assert sorted(named) == ["lik/loc", "lik/scale", "lik/weights"]
    assert named["lik/weights"].shape == (2, 20, 2)
    np.testing.assert_allclose(named["lik/weights"].sum(-1), 1.0, atol=1e-6)
    assert np.all(np.diff(named["lik/loc"], axis=-1) > 0) and np.all(named["lik/scale"] > 0)
    posterior = samples.to_arviz(compiled).posterior
    np.testing.assert_array_equal(posterior["lik.loc"].values, named["lik/loc"])
    # the predictive mean at any (empty) input is the average mixture mean Σ_k w_k μ_k
    pred = compiled.predictive(samples, jnp.zeros((3, 0)), quantiles=(0.5,))
    want = np.mean(np.sum(named["lik/weights"] * named["lik/loc"], -1))
    np.testing.assert_allclose(pred.mean, np.full(3, want), rtol=1e-5)
    assert pred.quantiles.shape == (1, 3)


def test_command_line_samples_a_model_file_without_a_network(capsys, tmp_path):
    """`bdl sample lkj_correlation` (a model file without a network): the summary names the
    constrained parameters, the draws are saved; a run this short is reported as not converged
    (exit 4), its draws kept."""
    out = tmp_path / "draws.npz"
    args = [
        "sample",
        "lkj_correlation",
        "--kernel",
        "sghmc",
        "--hyper",
        "step_size=0.002",
        "--hyper",
        "friction=20",
        "--steps",
        "200",
        "--burn-in",
        "100",
        "--thin",
        "10",
        "--chains",
        "2",
        "--out",
        str(out),
    ]
    assert main(args) == 4
    printed = capsys.readouterr().out
    assert "lik/corr_cholesky[1,0]" in printed and "lik/loc[2]" in printed
    loaded = bdl.load_samples(out)
    assert loaded.positions["lik"]["corr_cholesky"].shape == (2, 10, 3)
    assert loaded.positions["net"] == {}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gaussian_mixture", "lkj_correlation"])
def test_shipped_models_pass_validate_with_adapted_sghmc(name, tmp_path, capsys):
    """`bdl validate NAME --kernel sghmc`: the kernel by name (adapted in burn-in), the model
    file's budget, against NUTS in parameter space: exit 0 (docs/validation.md)."""
    assert main(["validate", name, "--kernel", "sghmc", "--plot", str(tmp_path / "v.png")]) == 0
    assert "verdict: PASS" in capsys.readouterr().out

"""Tempering modes and the effective data-set size on the conjugate linear regression, where
both tempered posteriors are Gaussian in closed form:

* ``tempering="posterior"``: π ∝ exp(−U/T), U = −(N/n) Σ log p(y_i | x_i, w) − log p(w);
* ``tempering="likelihood"``: π ∝ p(w) Π p(y_i | x_i, w)^(N/(nT)).

The compiled potential is checked exactly (its Hessian is the closed-form precision, its gradient
vanishes at the closed-form mean); NUTS and SGHMC draws are checked against the closed form with
ESS-based z-scores. A small data set and a tight prior make the two modes far apart.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from stat_utils import assert_moments

import bdl
from bdl.data import linear_regression, linear_regression_posterior

N, DIM, NOISE, PRIOR_SD = 10, 2, 0.5, 0.1
T, N_EFF = 0.25, 20.0  # c = N/n = 2: the likelihood counts double, then tempered


def _model(tempering, temperature=T, effective_size=N_EFF):
    return bdl.Model(
        network=lambda p, x: x @ p["w"],
        params={"w": jnp.zeros(DIM)},
        likelihood=bdl.Gaussian(scale=NOISE),
        prior=bdl.Normal(PRIOR_SD),
        temperature=temperature,
        tempering=tempering,
        effective_size=effective_size,
    )


@pytest.fixture(scope="module")
def data():
    return linear_regression(n=N, dim=DIM, noise_sd=NOISE, seed=3, prior_sd=PRIOR_SD)


def _exact(data, tempering, temperature=T, effective_size=N_EFF):
    return linear_regression_posterior(
        data.x_train,
        data.y_train,
        NOISE,
        PRIOR_SD,
        temperature=temperature,
        tempering=tempering,
        effective_size=effective_size,
    )


def _flat(positions):
    return np.asarray(positions["net"]["w"], np.float64)


@pytest.mark.parametrize("tempering", ["posterior", "likelihood"])
def test_potential_is_the_closed_form_gaussian(data, tempering):
    """U/T = ½ (w − μ)ᵀ Σ⁻¹ (w − μ) + const: Hessian Σ⁻¹ everywhere, gradient 0 at μ."""
    compiled = bdl.compile(_model(tempering), data)
    mean, cov = _exact(data, tempering)
    with jax.enable_x64(True):
        potential = compiled.potential_fn()

        def u(w):
            return potential({"net": {"w": w}})

        hessian = jax.hessian(u)(jnp.zeros(DIM, jnp.float64))
        grad_at_mean = jax.grad(u)(jnp.asarray(mean))
    np.testing.assert_allclose(hessian, np.linalg.inv(cov), rtol=1e-5)
    np.testing.assert_allclose(grad_at_mean, 0.0, atol=1e-3 * np.abs(np.linalg.inv(cov)).max())


def test_the_two_modes_and_the_effective_size_give_different_posteriors(data):
    """The closed forms the tests rely on are far apart (else the tests could not tell them)."""
    _, cov_post = _exact(data, "posterior")
    _, cov_lik = _exact(data, "likelihood")
    _, cov_n = _exact(data, "likelihood", effective_size=None)
    for a, b in ((cov_post, cov_lik), (cov_n, cov_lik)):
        assert np.all(np.abs(np.log(np.diag(a) / np.diag(b))) > np.log(1.3))


def test_stochastic_energy_scales_by_the_effective_size(data):
    """Ũ = −(N/|B|) Σ_B log p − T log p(w) in likelihood mode; its mean over all minibatches of
    an epoch is U."""
    compiled = bdl.compile(_model("likelihood"), data, batch_size=5)
    position = {"net": {"w": jnp.asarray([0.3, -0.2])}}
    xs, ys = compiled.epoch_batches(jax.random.key(0))
    parts = [compiled.stochastic_energy(position, (x, y)) for x, y in zip(xs, ys, strict=True)]
    np.testing.assert_allclose(np.mean(parts), compiled.energy(position), rtol=1e-5)
    ll = compiled.log_likelihood(position, xs[0], ys[0]).sum()
    want = -(N_EFF / 5 * ll + T * compiled.log_prior(position))
    np.testing.assert_allclose(parts[0], want, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("tempering", ["posterior", "likelihood"])
def test_nuts_reference_follows_the_tempering(data, tempering):
    compiled = bdl.compile(_model(tempering), data)
    mean, cov = _exact(data, tempering)
    reference = bdl.validation.nuts_reference(
        compiled, num_warmup=500, num_samples=1_000, use_cache=False
    )
    assert_moments(_flat(reference.positions), mean, cov, min_ess=400)


@pytest.mark.slow
@pytest.mark.parametrize("tempering", ["posterior", "likelihood"])
def test_sghmc_follows_the_tempering(data, tempering):
    """SGHMC sees Ũ and T only; its draws match the closed form of the declared mode."""
    compiled = bdl.compile(_model(tempering), data)
    mean, cov = _exact(data, tempering)
    samples = bdl.sample(
        compiled,
        bdl.kernels.get("sghmc", step_size=5e-3, friction=10.0),
        num_steps=20_000,
        burn_in=1_000,
        thin=5,
        num_chains=4,
        seed=11,
    )
    assert_moments(_flat(samples.positions), mean, cov, min_ess=400)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"tempering": "prior"}, ValueError, "tempering must be"),
        (
            {"tempering": "likelihood", "temperature": bdl.linear_ramp(0.1, 1.0, 10)},
            ValueError,
            "needs a constant temperature",
        ),
        ({"effective_size": 0}, ValueError, "effective_size must be a number N > 0"),
        ({"effective_size": "all"}, ValueError, "effective_size must be"),
    ],
)
def test_bad_tempering_arguments_raise_at_declaration(kwargs, error, match):
    base = {"tempering": "posterior", "temperature": 1.0, "effective_size": None}
    with pytest.raises(error, match=match):
        _model(**{**base, **kwargs})


def test_likelihood_tempering_at_zero_temperature_drops_the_prior(data):
    """T = 0 in likelihood mode is the maximum-likelihood limit: U = −(N/n) Σ log p."""
    compiled = bdl.compile(_model("likelihood", temperature=0.0), data)
    position = {"net": {"w": jnp.asarray([0.3, -0.2])}}
    ll = compiled.log_likelihood(position, compiled.x_train, compiled.y_train).sum()
    np.testing.assert_allclose(compiled.energy(position), -(N_EFF / N) * ll, rtol=1e-6)


def test_nutscache_keys_tell_the_modes_and_sizes_apart(data):
    from bdl.validation.reference import cache_key

    keys = {
        cache_key(bdl.compile(_model(mode, effective_size=size), data), T, {})
        for mode in ("posterior", "likelihood")
        for size in (None, N_EFF)
    }
    assert len(keys) == 4

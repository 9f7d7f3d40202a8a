"""Learned scales accept any NumPyro prior whose support lies in (0, ∞), judged by value; each is
sampled through its bijector with the log-Jacobian, checked against NumPyro's own log density."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.distributions import constraints
from numpyro.infer.util import potential_energy

import bdl

PRIORS = {
    "uniform": dist.Uniform(0.0, 100.0),
    "truncated-normal": dist.TruncatedNormal(1.0, 2.0, low=0.0),
    "improper": dist.ImproperUniform(constraints.positive, (), ()),
    "half-cauchy": dist.HalfCauchy(1.0),
    "shifted-uniform": dist.Uniform(2.0, 5.0),
}

X = np.linspace(-1.0, 1.0, 12, dtype=np.float32)[:, None]
Y = (0.5 * X[:, 0] + 0.3 * np.sin(7.0 * X[:, 0])).astype(np.float32)


def compiled(prior):
    model = bdl.Model(
        network=lambda p, x: x @ p["w"],
        params={"w": jnp.zeros(1)},
        likelihood=bdl.Gaussian(scale=None, scale_prior=prior),
        prior=bdl.Normal(1.0),
    )
    return bdl.compile(model, (X, Y))


@pytest.mark.parametrize("name", sorted(PRIORS))
def test_energy_equals_numpyro_potential(name):
    prior = PRIORS[name]
    target = compiled(prior)

    def numpyro_model():
        w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([1]).to_event(1))
        scale = numpyro.sample("scale", prior)
        numpyro.sample("y", dist.Normal(jnp.asarray(X) @ w, scale), obs=jnp.asarray(Y))

    for u in (-1.3, 0.2, 2.5):  # the sampled (unconstrained) value of the scale
        position = {"net": {"w": jnp.array([0.4])}, "lik": {"scale": jnp.asarray(u)}}
        ours = float(target.energy(position))
        theirs = float(
            potential_energy(
                numpyro_model, (), {}, {"w": jnp.array([0.4]), "scale": jnp.asarray(u)}
            )
        )
        assert ours == pytest.approx(theirs, rel=1e-5, abs=1e-4), (name, u)


@pytest.mark.parametrize("name", sorted(PRIORS))
def test_start_lies_in_the_support(name):
    target = compiled(PRIORS[name])
    scale = jax.vmap(target.constrain)(target.init_positions(jax.random.key(0), 2))[1]["scale"]
    assert np.all(np.isfinite(scale)) and np.all(PRIORS[name].support(scale))


def test_improper_prior_refuses_prior_draws_with_a_clear_error():
    target = compiled(PRIORS["improper"])
    with pytest.raises(ValueError, match="init='prior' needs a proper prior"):
        target.init_positions(jax.random.key(0), 2, "prior")


@pytest.mark.parametrize(
    "prior", [dist.Normal(0.0, 1.0), dist.Uniform(-1.0, 1.0), dist.Exponential(1.0).expand([2])]
)
def test_priors_off_the_positive_half_line_are_rejected(prior):
    with pytest.raises(ValueError, match="scale_prior"):
        bdl.Gaussian(scale=None, scale_prior=prior)

"""Hierarchical priors: the compiled energy equals NumPyro's potential of the same hierarchical
model (centred and non-centred, per group, per leaf, per input unit), hyper-parameters are named
in the position and in ``Samples``, and bad declarations fail before anything is compiled."""

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer.util import potential_energy

import bdl
from bdl.model_files import load_spec
from bdl.validation.reference import UntrustedReferenceError, nuts_reference

Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0], np.float32)
SIGMA = 10.0
X = np.eye(8, dtype=np.float32)


def schools(centred: bool) -> bdl.CompiledModel:
    prior = bdl.HierarchicalNormal(
        loc=dist.Normal(0.0, 5.0), scale=dist.HalfCauchy(5.0), centred=centred, name="schools"
    )
    model = bdl.Model(
        lambda p, x: x @ p["theta"],
        bdl.Gaussian(SIGMA),
        prior=prior,
        params={"theta": jnp.zeros(8)},
    )
    return bdl.compile(model, (X, Y))


def numpyro_schools(centred: bool, sigma=SIGMA, y=Y):
    def model():
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
        tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
        if centred:
            theta = numpyro.sample("theta", dist.Normal(mu, tau).expand([8]).to_event(1))
        else:
            z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([8]).to_event(1))
            theta = mu + tau * z
        numpyro.sample("y", dist.Normal(theta, sigma), obs=jnp.asarray(y))

    return model


@pytest.mark.parametrize("centred", [True, False])
def test_eight_schools_energy_equals_numpyro_potential(centred):
    target = schools(centred)
    rng = np.random.default_rng(0)
    for _ in range(3):
        u = jnp.asarray(rng.normal(size=8), jnp.float32)
        mu, log_tau = (jnp.asarray(v, jnp.float32) for v in rng.normal(size=2))
        position = {"net": {"theta": u}, "hyper": {"schools": {"loc": mu, "scale": log_tau}}}
        unconstrained = {"mu": mu, "tau": log_tau, ("theta" if centred else "z"): u}
        theirs = potential_energy(numpyro_schools(centred), (), {}, unconstrained)
        assert float(target.energy(position)) == pytest.approx(float(theirs), rel=1e-5)


@pytest.mark.parametrize("centred", [True, False])
def test_the_network_sees_the_constrained_weights(centred):
    target = schools(centred)
    position = {
        "net": {"theta": jnp.arange(8.0)},
        "hyper": {"schools": {"loc": jnp.asarray(1.5), "scale": jnp.log(2.0)}},
    }
    net, _ = target.constrain(position)
    want = np.arange(8.0) if centred else 1.5 + 2.0 * np.arange(8.0)
    np.testing.assert_allclose(net["theta"], want, rtol=1e-6)
    hyper = target.constrain_hyper(position)
    assert float(hyper["schools"]["scale"]) == pytest.approx(2.0)
    back = target.unconstrain(net, hyper=hyper)
    np.testing.assert_allclose(back["net"]["theta"], position["net"]["theta"], atol=1e-5)
    np.testing.assert_allclose(back["hyper"]["schools"]["scale"], np.log(2.0), atol=1e-6)


def test_per_input_ard_energy_equals_numpyro_potential():
    """ARD: w_j ~ N(0, 1/λ_j), λ_j ~ Gamma(2, 1) per input feature j of a linear model."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(20, 3)).astype(np.float32)
    y = (x @ np.array([1.0, 0.0, -2.0]) + 0.1 * rng.normal(size=20)).astype(np.float32)
    prior = bdl.ByPath(
        {"w": bdl.HierarchicalNormal(precision=dist.Gamma(2.0, 1.0), per="input", name="ard")},
        default=bdl.Normal(1.0),
    )
    model = bdl.Model(
        lambda p, x: x @ p["w"] + p["b"],
        bdl.Gaussian(0.5),
        prior=prior,
        params={"w": jnp.zeros(3), "b": jnp.zeros(())},
    )
    target = bdl.compile(model, (x, y))
    assert target.initial_position["hyper"]["ard"]["w"]["precision"].shape == (3,)

    def numpyro_model():
        lam = numpyro.sample("lam", dist.Gamma(2.0, 1.0).expand([3]).to_event(1))
        w = numpyro.sample("w", dist.Normal(0.0, lam**-0.5).to_event(1))
        b = numpyro.sample("b", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(jnp.asarray(x) @ w + b, 0.5), obs=jnp.asarray(y))

    w, log_lam, b = jnp.array([0.5, -0.2, 1.0]), jnp.array([0.3, -1.0, 2.0]), jnp.asarray(0.1)
    position = {"net": {"b": b, "w": w}, "hyper": {"ard": {"w": {"precision": log_lam}}}}
    theirs = potential_energy(numpyro_model, (), {}, {"lam": log_lam, "w": w, "b": b})
    assert float(target.energy(position)) == pytest.approx(float(theirs), rel=1e-5)


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2, name="out")(nn.tanh(nn.Dense(4, name="hidden")(x)))


def test_per_leaf_and_per_input_groups_follow_the_layout():
    x, y = np.ones((6, 3), np.float32), np.zeros(6, np.int32)
    per_leaf = bdl.ByPath(
        {"kernel": bdl.HierarchicalNormal(precision=dist.Gamma(1.0, 1.0), per="leaf", name="lam")},
        default=bdl.Normal(1.0),
    )
    target = bdl.compile(bdl.Model(MLP(), bdl.Categorical(), prior=per_leaf), (x, y))
    groups = target.initial_position["hyper"]["lam"]
    assert sorted(groups) == ["hidden/kernel", "out/kernel"]
    assert groups["hidden/kernel"]["precision"].shape == ()

    ard = bdl.ByPath(
        {
            "hidden/kernel": bdl.HierarchicalNormal(
                scale=dist.HalfNormal(1.0), per="input", name="ard"
            )
        },
        default=bdl.Normal(1.0),
    )
    target = bdl.compile(bdl.Model(MLP(), bdl.Categorical(), prior=ard), (x, y))
    assert target.initial_position["hyper"]["ard"]["hidden/kernel"]["scale"].shape == (3,)

    # Equinox stores (out, in): the inputs are its second axis
    net = eqx.nn.Linear(3, 2, key=jax.random.key(0))
    eqx_ard = bdl.ByPath(
        {"weight": bdl.HierarchicalNormal(scale=dist.HalfNormal(1.0), per="input", name="ard")},
        default=bdl.Normal(1.0),
    )
    target = bdl.compile(bdl.Model(net, bdl.Categorical(), prior=eqx_ard), (x, y))
    position = target.initial_position
    assert position["hyper"]["ard"]["weight"]["scale"].shape == (3,)
    # each input column j of the (out, in) weight is scored with its own scale σ_j
    scales = jnp.array([0.5, 1.0, 2.0])
    position["hyper"]["ard"]["weight"]["scale"] = jnp.log(scales)
    w, b = position["net"].weight, position["net"].bias
    want = (
        dist.Normal(0.0, scales).log_prob(w).sum()
        + dist.Normal(0.0, 1.0).log_prob(b).sum()
        + (dist.HalfNormal(1.0).log_prob(scales) + jnp.log(scales)).sum()
    )
    assert float(target.log_prior(position)) == pytest.approx(float(want), rel=1e-5)


def test_prior_draws_and_samples_name_the_hyper_parameters():
    target = schools(centred=False)
    starts = target.init_positions(jax.random.key(0), 4, "prior")
    assert starts["hyper"]["schools"]["scale"].shape == (4,)
    samples = bdl.sample(
        target,
        bdl.kernels.get("sghmc", step_size=0.05, friction=2.0),
        num_steps=200,
        burn_in=100,
        thin=10,
        num_chains=2,
        seed=0,
        init="prior",
    )
    assert samples.positions["hyper"]["schools"]["loc"].shape == (2, 10)
    assert "hyper.schools.scale" in samples.to_arviz().posterior


def test_hierarchical_prior_draws_match_the_declared_prior():
    """init='prior' draws (τ, θ): log τ and θ's marginal moments against direct NumPyro draws."""
    target = schools(centred=True)
    draws = target.init_positions(jax.random.key(1), 20_000, "prior")
    net = jax.vmap(target.constrain)(draws)[0]["theta"]
    mu = dist.Normal(0.0, 5.0).sample(jax.random.key(2), (20_000,))
    tau = dist.HalfCauchy(5.0).sample(jax.random.key(3), (20_000,))
    # θ is a scale mixture: compare the medians of |θ − μ|/τ (≈ 0.674 for N(0, 1)) exactly
    z = (net[:, 0] - draws["hyper"]["schools"]["loc"]) / jnp.exp(draws["hyper"]["schools"]["scale"])
    assert float(jnp.median(jnp.abs(z))) == pytest.approx(0.6745, abs=0.03)
    log_tau = draws["hyper"]["schools"]["scale"]
    assert float(jnp.median(log_tau)) == pytest.approx(float(jnp.median(jnp.log(tau))), abs=0.05)
    assert float(jnp.std(draws["hyper"]["schools"]["loc"])) == pytest.approx(
        float(jnp.std(mu)), rel=0.05
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": "a"}, "give scale"),
        ({"scale": 1.0, "precision": dist.Gamma(1.0, 1.0), "name": "a"}, "not both"),
        ({"scale": 1.0, "name": "a"}, "all fixed numbers"),
        ({"scale": dist.Normal(0.0, 1.0), "name": "a"}, r"subset of \(0, ∞\)"),
        ({"scale": dist.HalfNormal(jnp.ones(3)), "name": "a"}, "scalar distribution"),
        ({"scale": dist.HalfNormal(1.0), "per": "layer", "name": "a"}, "must be one of 'group'"),
        ({"scale": -1.0, "loc": dist.Normal(0.0, 1.0), "name": "a"}, "scale"),
    ],
)
def test_bad_declarations_name_the_argument(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        bdl.HierarchicalNormal(**kwargs)


def test_name_is_required_and_unique():
    with pytest.raises(TypeError):
        bdl.HierarchicalNormal(scale=dist.HalfNormal(1.0))
    prior = bdl.ByPath(
        {
            "hidden": bdl.HierarchicalNormal(scale=dist.HalfNormal(1.0), name="s"),
            "out": bdl.HierarchicalNormal(scale=dist.HalfNormal(2.0), name="s"),
        }
    )
    x, y = np.ones((6, 3), np.float32), np.zeros(6, np.int32)
    with pytest.raises(ValueError, match="both named 's'"):
        bdl.compile(bdl.Model(MLP(), bdl.Categorical(), prior=prior), (x, y))


def test_per_input_needs_a_dense_weight_or_a_vector():
    conv = nn.Conv(2, (2, 2))
    prior = bdl.HierarchicalNormal(scale=dist.HalfNormal(1.0), per="input", name="ard")
    x, y = np.ones((4, 3, 3, 1), np.float32), np.zeros((4, 3, 3, 2), np.float32)
    with pytest.raises(ValueError, match="per='input'"):
        bdl.compile(bdl.Model(conv, bdl.Gaussian(1.0), prior=prior), (x, y))


def test_eight_schools_model_file_has_per_school_scales():
    """bdl/models/eight_schools.py: its energy is NumPyro's with the known σ_j, in both forms."""
    for centred in (True, False):
        spec = load_spec("eight_schools", centred=centred)
        target = spec.compile()
        model = numpyro_schools(centred, jnp.asarray(spec.data.fields["sigma"]), spec.data.y_train)
        u = jnp.linspace(-1.0, 1.0, 8)
        position = {
            "net": {"theta": u},
            "hyper": {"schools": {"loc": jnp.asarray(0.5), "scale": jnp.asarray(1.2)}},
        }
        values = {"mu": 0.5, "tau": 1.2, ("theta" if centred else "z"): u}
        theirs = potential_energy(model, (), {}, values)
        assert float(target.energy(position)) == pytest.approx(float(theirs), rel=1e-5)


@pytest.mark.slow
def test_the_trust_gate_refuses_nuts_on_centred_eight_schools(tmp_path, monkeypatch):
    """NUTS (4 × 1,000 draws) on the centred funnel fails R̂ < 1.01 / ESS ≥ 400; on the
    non-centred form of the same model it is trusted."""
    monkeypatch.setenv("BDL_CACHE_DIR", str(tmp_path))
    with pytest.raises(UntrustedReferenceError):
        nuts_reference(load_spec("eight_schools", centred=True).compile())
    assert nuts_reference(load_spec("eight_schools", centred=False).compile()).trusted

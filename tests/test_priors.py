"""Priors: log-densities by hand, fan-in conventions, constrained supports, ByPath, prior draws."""

import math

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from scipy import stats

import bdl

RNG = np.random.default_rng(0)
X = RNG.normal(size=(6, 3)).astype(np.float32)
Y = RNG.normal(size=(6,)).astype(np.float32)


def _compile(prior, network=None, x=X, y=None):
    """A Gaussian regression with 4 outputs (default: a linen Dense(4)) under ``prior``."""
    network = nn.Dense(4) if network is None else network
    y = np.zeros((x.shape[0], 4), np.float32) if y is None else y
    return bdl.compile(bdl.Model(network, bdl.Gaussian(1.0), prior=prior), (x, y))


def _log_prior(compiled, position=None):
    position = compiled.initial_position if position is None else position
    return float(eqx.filter_jit(compiled.log_prior)(position))


def _by_path(compiled, position=None):
    """{'net/...': constrained numpy array} for every weight leaf."""
    position = compiled.initial_position if position is None else position
    net, _ = eqx.filter_jit(compiled.constrain)(position)
    leaves = compiled.net_treedef.flatten_up_to(net)
    return {info.path: np.asarray(v) for info, v in zip(compiled.leaf_infos, leaves, strict=True)}


def test_normal_prior_log_density():
    """Normal(σ): log p(θ) = Σ log N(θ_i; 0, σ²) over every weight."""
    compiled = _compile(bdl.Normal(2.0))
    values = np.concatenate([v.ravel() for v in _by_path(compiled).values()])
    np.testing.assert_allclose(
        _log_prior(compiled), stats.norm.logpdf(values, 0, 2.0).sum(), rtol=1e-5
    )


def test_laplace_prior_log_density():
    """Laplace(b): log p(θ) = Σ log Laplace(θ_i; 0, b)."""
    compiled = _compile(bdl.Laplace(0.5))
    values = np.concatenate([v.ravel() for v in _by_path(compiled).values()])
    np.testing.assert_allclose(
        _log_prior(compiled), stats.laplace.logpdf(values, 0, 0.5).sum(), rtol=1e-5
    )


def test_numpyro_distribution_as_prior():
    """Any NumPyro distribution is an elementwise prior: dist.StudentT(3) gives Σ log t_3(θ_i)."""
    compiled = _compile(dist.StudentT(3.0))
    assert isinstance(compiled.leaf_priors[0], bdl.Distribution)
    values = np.concatenate([v.ravel() for v in _by_path(compiled).values()])
    np.testing.assert_allclose(_log_prior(compiled), stats.t.logpdf(values, 3.0).sum(), rtol=1e-5)


def test_he_normal_flax_kernel_fan_in_is_leading_axes():
    """HeNormal on Flax: kernel (in, out) has fan_in = in, sd = gain/√in; bias sd = bias_scale."""
    compiled = _compile(bdl.HeNormal(gain=1.5, bias_scale=0.7))
    infos = {i.path: i for i in compiled.leaf_infos}
    assert infos["net/kernel"].shape == (3, 4) and infos["net/kernel"].fan_in == 3
    v = _by_path(compiled)
    want = (
        stats.norm.logpdf(v["net/kernel"], 0, 1.5 / math.sqrt(3)).sum()
        + stats.norm.logpdf(v["net/bias"], 0, 0.7).sum()
    )
    np.testing.assert_allclose(_log_prior(compiled), want, rtol=1e-5)


def test_he_normal_equinox_weight_fan_in_is_trailing_axes():
    """HeNormal on Equinox: weight (out, in) has fan_in = in (not out)."""
    net = eqx.nn.Linear(3, 4, key=jax.random.key(0))
    compiled = _compile(bdl.HeNormal(gain=1.5, bias_scale=0.7), network=net)
    infos = {i.path: i for i in compiled.leaf_infos}
    assert infos["net/weight"].shape == (4, 3) and infos["net/weight"].fan_in == 3
    v = _by_path(compiled)
    want = (
        stats.norm.logpdf(v["net/weight"], 0, 1.5 / math.sqrt(3)).sum()
        + stats.norm.logpdf(v["net/bias"], 0, 0.7).sum()
    )
    np.testing.assert_allclose(_log_prior(compiled), want, rtol=1e-5)


def test_conv_fan_in_conventions():
    """Convolutions: Flax (kh, kw, in, out) and Equinox (out, in, kh, kw) both give kh·kw·in."""
    x = RNG.normal(size=(2, 5, 5, 2)).astype(np.float32)

    class FlaxConv(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Conv(3, (3, 3))(x).sum(axis=(1, 2, 3))

    class EqxConv(eqx.Module):
        conv: eqx.nn.Conv2d

        def __call__(self, x):  # a single example (5, 5, 2)
            return jnp.sum(self.conv(jnp.moveaxis(x, -1, 0)), keepdims=True)[0, 0]

    y = np.zeros(2, np.float32)
    flax_infos = {i.path: i for i in _compile(bdl.HeNormal(), FlaxConv(), x, y).leaf_infos}
    assert flax_infos["net/Conv_0/kernel"].fan_in == 3 * 3 * 2
    eqx_net = EqxConv(eqx.filter_jit(lambda k: eqx.nn.Conv2d(2, 3, 3, key=k))(jax.random.key(0)))
    eqx_infos = {i.path: i for i in _compile(bdl.HeNormal(), eqx_net, x, y).leaf_infos}
    assert eqx_infos["net/conv/weight"].shape == (3, 2, 3, 3)
    assert eqx_infos["net/conv/weight"].fan_in == 2 * 3 * 3


def _scaled_function(params, x):
    return params["s"] * (x @ params["w"])


def test_constrained_prior_is_sampled_unconstrained_with_log_jacobian():
    """HalfNormal on a leaf: stored as u = log s; log p(u) = log HalfNormal(e^u) + u."""
    prior = bdl.ByPath({"s": dist.HalfNormal(1.0)}, default=bdl.Normal(1.0))
    params = {"s": jnp.asarray([0.5, 2.0]), "w": jnp.asarray(RNG.normal(size=(3, 2)), jnp.float32)}
    compiled = bdl.compile(
        bdl.Model(_scaled_function, bdl.Gaussian(1.0), prior=prior, params=params),
        (X, np.zeros((6, 2), np.float32)),
    )
    u = np.asarray(compiled.initial_position["net"]["s"])
    np.testing.assert_allclose(u, np.log([0.5, 2.0]), rtol=1e-6)  # unconstrained storage
    position = {"net": {"s": jnp.asarray([-0.3, 0.8]), "w": params["w"]}}

    @eqx.filter_jit
    def evaluate(position, key):
        draws = compiled.init_positions(key, 64, "prior")
        return (
            compiled.log_prior(position),
            compiled.constrain(position)[0]["s"],
            compiled.forward(position, jnp.asarray(X)),
            jax.vmap(compiled.constrain)(draws)[0]["s"],
        )

    log_prior, s, out, s_draws = evaluate(position, jax.random.key(0))
    want = (
        stats.halfnorm.logpdf(np.exp([-0.3, 0.8])).sum()
        + (-0.3 + 0.8)
        + stats.norm.logpdf(np.asarray(params["w"])).sum()
    )
    np.testing.assert_allclose(log_prior, want, rtol=1e-5)
    np.testing.assert_allclose(s, np.exp([-0.3, 0.8]), rtol=1e-6)  # constrain gives s = e^u > 0
    # the network sees the constrained value s = e^u
    np.testing.assert_allclose(
        out, _scaled_function({"s": np.exp([-0.3, 0.8]), "w": params["w"]}, X), rtol=1e-5
    )
    assert bool(jnp.all(s_draws > 0)) and not np.allclose(s_draws[0], s_draws[1])


def test_by_path_applies_priors_by_path():
    """ByPath: bias ~ N(0, 10²), kernel ~ Laplace(0.5); total = sum of the hand-computed parts."""
    prior = bdl.ByPath(
        {"bias": bdl.Normal(10.0), "kernel": bdl.Laplace(0.5)}, default=bdl.Normal(1.0)
    )
    compiled = _compile(prior)
    kinds = {
        i.path: type(p).__name__
        for i, p in zip(compiled.leaf_infos, compiled.leaf_priors, strict=True)
    }
    assert kinds == {"net/bias": "Normal", "net/kernel": "Laplace"}
    v = _by_path(compiled)
    want = (
        stats.norm.logpdf(v["net/bias"], 0, 10.0).sum()
        + stats.laplace.logpdf(v["net/kernel"], 0, 0.5).sum()
    )
    np.testing.assert_allclose(_log_prior(compiled), want, rtol=1e-5)


def test_by_path_default_catches_unmatched_leaves():
    """Unmatched leaves get ByPath's default prior."""
    prior = bdl.ByPath({"kernel": bdl.Laplace(0.5)}, default=bdl.Normal(3.0))
    compiled = _compile(prior)
    v = _by_path(compiled)
    want = (
        stats.norm.logpdf(v["net/bias"], 0, 3.0).sum()
        + stats.laplace.logpdf(v["net/kernel"], 0, 0.5).sum()
    )
    np.testing.assert_allclose(_log_prior(compiled), want, rtol=1e-5)


def test_by_path_without_default_raises_for_unmatched_leaf():
    """ByPath with no default: an unmatched leaf is a clear error naming the leaf."""
    with pytest.raises(ValueError, match=r"no pattern matches parameter 'net/bias'.*default"):
        _compile(bdl.ByPath({"kernel": bdl.Normal(1.0)}))


# ---------------------------------------------------------------- prior draws (init="prior")

NUM_CHAINS = 4
PRIOR_LAYERS = {  # layer name: (prior, sd of one entry, kurtosis κ)
    "normal": (bdl.Normal(0.3), 0.3, 3.0),
    "he_normal": (bdl.HeNormal(gain=2.0), 2.0 / math.sqrt(16), 3.0),  # kernel (16, 64): fan_in 16
    "laplace": (bdl.Laplace(0.2), 0.2 * math.sqrt(2), 6.0),
}


def _three_layers(params, x):
    """Three parallel linear maps 16 → 64 (kernels in Flax's (in, out) layout)."""
    return sum(x @ params[name]["kernel"] for name in PRIOR_LAYERS)


@pytest.fixture(scope="module")
def prior_draws():
    """init='prior' draws of each layer's kernel (one ByPath model, one compilation)."""
    prior = bdl.ByPath({f"/{name}/kernel": p for name, (p, _, _) in PRIOR_LAYERS.items()})
    params = {name: {"kernel": jnp.zeros((16, 64))} for name in PRIOR_LAYERS}
    x = RNG.normal(size=(4, 16)).astype(np.float32)
    compiled = bdl.compile(
        bdl.Model(_three_layers, bdl.Gaussian(1.0), prior=prior, params=params),
        (x, np.zeros((4, 64), np.float32)),
    )
    assert all(i.fan_in == 16 for i in compiled.leaf_infos)
    pos = eqx.filter_jit(compiled.init_positions)(jax.random.key(7), NUM_CHAINS, "prior")
    return {
        name: np.asarray(pos["net"][name]["kernel"], np.float64).ravel() for name in PRIOR_LAYERS
    }


@pytest.mark.parametrize("layer", list(PRIOR_LAYERS))
def test_prior_draws_have_the_right_sd(prior_draws, layer):
    """init='prior' draws: |mean| < 5 SE and |sd_hat − sd| < 5 SE, SE(sd_hat) = sd·√((κ−1)/4N)."""
    _, sd, kurtosis = PRIOR_LAYERS[layer]
    draws = prior_draws[layer]
    n = draws.size
    assert n == NUM_CHAINS * 16 * 64
    se_mean = sd / math.sqrt(n)
    se_sd = sd * math.sqrt((kurtosis - 1) / (4 * n))  # = sd/√(2N) for a Gaussian
    assert abs(draws.mean()) < 5 * se_mean
    assert abs(draws.std() - sd) < 5 * se_sd, (draws.std(), sd, se_sd)


def test_prior_init_draws_learned_likelihood_scale():
    """init='prior' also draws a learned Gaussian σ from its HalfNormal(1) prior (E σ = √(2/π))."""
    model = bdl.Model(
        lambda p, x: x @ p["w"], bdl.Gaussian(scale=None), params={"w": jnp.zeros((3, 1))}
    )
    compiled = bdl.compile(model, (X, Y))
    k = 2000
    pos = eqx.filter_jit(compiled.init_positions)(jax.random.key(3), k, "prior")
    sigma = np.exp(np.asarray(pos["lik"]["scale"], np.float64))
    mean, sd = math.sqrt(2 / math.pi), math.sqrt(1 - 2 / math.pi)
    assert abs(sigma.mean() - mean) < 5 * sd / math.sqrt(k)

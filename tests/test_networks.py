"""Network flavours (Flax linen, Flax nnx, Equinox, plain functions) and initial positions."""

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from scipy import stats

import bdl

N, D, B = 8, 3, 4
RNG = np.random.default_rng(0)
X = RNG.normal(size=(N, D)).astype(np.float32)
Y = (X @ np.array([1.0, -2.0, 0.5]) + 0.1 * RNG.normal(size=N)).astype(np.float32)
W = RNG.normal(size=(D, 1)).astype(np.float32)  # shared weights, Flax (in, out) layout
BIAS = RNG.normal(size=(1,)).astype(np.float32)
SIGMA = 0.5


class LinenMLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(1)(nn.tanh(nn.Dense(4)(x)))


class NNXMLP(nnx.Module):
    def __init__(self, rngs):
        self.l1 = nnx.Linear(D, 4, rngs=rngs)
        self.l2 = nnx.Linear(4, 1, rngs=rngs)

    def __call__(self, x):
        return self.l2(jnp.tanh(self.l1(x)))


def function_mlp(params, x):
    return jnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


def function_params(key):
    k1, k2 = jax.random.split(key)
    return {
        "w1": jax.random.normal(k1, (D, 4)),
        "b1": jnp.zeros(4),
        "w2": jax.random.normal(k2, (4, 1)),
        "b2": jnp.zeros(1),
    }


def _compile(network, **kw):
    return bdl.compile(bdl.Model(network, bdl.Gaussian(SIGMA), **kw), (X, Y), batch_size=B)


def _check_energy_and_grad(compiled):
    energy, grad = eqx.filter_jit(compiled.energy_and_grad)(compiled.initial_position)
    assert np.isfinite(float(energy))
    assert jax.tree.structure(grad) == jax.tree.structure(compiled.initial_position)
    for g, p in zip(jax.tree.leaves(grad), jax.tree.leaves(compiled.initial_position), strict=True):
        assert g.shape == p.shape and bool(jnp.all(jnp.isfinite(g)))
    assert any(float(jnp.abs(g).max()) > 0 for g in jax.tree.leaves(grad))


def test_linen_forward_matches_module_apply():
    """A linen module: forward(position, x) == module.apply({'params': net}, x)."""
    module = LinenMLP()
    compiled = _compile(module)
    position = compiled.initial_position
    want = jax.jit(module.apply)({"params": position["net"]}, jnp.asarray(X))
    got = eqx.filter_jit(compiled.forward)(position, jnp.asarray(X))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    _check_energy_and_grad(compiled)


def test_nnx_forward_matches_module_call():
    """An nnx module instance: the compiled position holds its weights; forward == module(x)."""
    module = NNXMLP(nnx.Rngs(1))
    compiled = _compile(module)
    got = eqx.filter_jit(compiled.forward)(compiled.initial_position, jnp.asarray(X))
    np.testing.assert_allclose(got, nnx.jit(module)(jnp.asarray(X)), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(
        compiled.initial_position["net"]["l1"]["kernel"], module.l1.kernel[...]
    )
    _check_energy_and_grad(compiled)


def test_equinox_forward_is_vmapped_over_examples():
    """An Equinox module acts on single examples: forward == vmap(module)(x)."""
    module = eqx.filter_jit(
        lambda k: eqx.nn.MLP(D, 1, width_size=4, depth=1, activation=jnp.tanh, key=k)
    )(jax.random.key(2))
    compiled = _compile(module)
    got = eqx.filter_jit(compiled.forward)(compiled.initial_position, jnp.asarray(X))
    assert got.shape == (N, 1)
    want = eqx.filter_jit(lambda m, x: jax.vmap(m)(x))(module, jnp.asarray(X))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    _check_energy_and_grad(compiled)


def test_plain_function_forward_matches_function():
    """A plain f(params, x) with params=pytree: forward == f(params, x)."""
    params = function_params(jax.random.key(3))
    compiled = _compile(function_mlp, params=params)
    got = eqx.filter_jit(compiled.forward)(compiled.initial_position, jnp.asarray(X))
    want = jax.jit(function_mlp)(params, jnp.asarray(X))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    _check_energy_and_grad(compiled)


def _linear_models():
    """The same linear model y = xW + b in the four flavours, with identical weights."""
    linen = _compile(nn.Dense(1))
    linen = eqx.tree_at(
        lambda c: c.initial_position,
        linen,
        {"net": {"kernel": jnp.asarray(W), "bias": jnp.asarray(BIAS)}},
    )
    lin = nnx.Linear(D, 1, rngs=nnx.Rngs(0))
    lin.kernel[...], lin.bias[...] = jnp.asarray(W), jnp.asarray(BIAS)
    eq = eqx.nn.Linear(D, 1, key=jax.random.key(0))
    eq = eqx.tree_at(lambda m: (m.weight, m.bias), eq, (jnp.asarray(W.T), jnp.asarray(BIAS)))
    fn = _compile(
        lambda p, x: x @ p["kernel"] + p["bias"],
        params={"kernel": jnp.asarray(W), "bias": jnp.asarray(BIAS)},
    )
    return {"linen": linen, "nnx": _compile(lin), "equinox": _compile(eq), "function": fn}


def test_equivalent_linear_models_have_the_same_energy():
    """A linear regression gives the same energy in every flavour, equal to the hand value."""
    f = X @ W[:, 0] + BIAS[0]
    params = np.concatenate([W.ravel(), BIAS])
    want = -stats.norm.logpdf(Y, f, SIGMA).sum() - stats.norm.logpdf(params).sum()
    for flavour, compiled in _linear_models().items():
        got = eqx.filter_jit(compiled.energy)(compiled.initial_position)
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=flavour)


# ------------------------------------------------------------------ init_positions


@pytest.fixture(scope="module")
def linen_compiled():
    return _compile(LinenMLP())


def _leading(tree, k):
    return [a.shape[0] == k for a in jax.tree.leaves(tree)]


def _chains_differ(tree):
    """Chain 0 and chain 1 differ (biases may be initialised to zero in every chain)."""
    flat = [np.ravel(a[:2]).reshape(2, -1) for a in jax.tree.leaves(tree)]
    both = np.concatenate(flat, axis=1)
    return not np.allclose(both[0], both[1])


def _init(compiled, key, num_chains, init="auto"):
    return eqx.filter_jit(compiled.init_positions)(jax.random.key(key), num_chains, init)


def test_init_network_linen_chains_differ(linen_compiled):
    """init='network' re-initialises a linen module with one key per chain: chains differ."""
    pos = _init(linen_compiled, 0, 3, init="network")
    assert jax.tree.structure(pos) == jax.tree.structure(linen_compiled.initial_position)
    assert all(_leading(pos, 3))
    assert _chains_differ(pos)


def test_init_network_plain_function_with_init_fn():
    """A plain function with params=key -> params supports init='network' (chains differ)."""
    compiled = _compile(function_mlp, params=function_params)
    pos = _init(compiled, 0, 2, init="network")
    assert pos["net"]["w1"].shape == (2, D, 4)
    assert _chains_differ(pos)


def test_init_prior_chains_differ(linen_compiled):
    """init='prior' draws one prior sample per chain."""
    pos = _init(linen_compiled, 1, 3, init="prior")
    assert jax.tree.structure(pos) == jax.tree.structure(linen_compiled.initial_position)
    assert all(_leading(pos, 3))
    assert _chains_differ(pos)


def test_init_fixed_repeats_initial_position(linen_compiled):
    """init='fixed' gives the declared initial position for every chain."""
    pos = _init(linen_compiled, 0, 3, init="fixed")
    for a, b in zip(
        jax.tree.leaves(pos), jax.tree.leaves(linen_compiled.initial_position), strict=True
    ):
        assert a.shape == (3, *b.shape)
        np.testing.assert_array_equal(a, jnp.broadcast_to(b, a.shape))


def test_init_explicit_pytree_shared_or_per_chain(linen_compiled):
    """An explicit position is broadcast to every chain; one with a chain axis is kept as is."""
    shared = jax.tree.map(lambda a: jnp.full(a.shape, 0.25), linen_compiled.initial_position)
    pos = _init(linen_compiled, 0, 2, init=shared)
    assert all(a.shape[0] == 2 and bool(jnp.all(a == 0.25)) for a in jax.tree.leaves(pos))
    per_chain = jax.tree.map(lambda a: jnp.stack([a, a + 1.0]), shared)
    pos = _init(linen_compiled, 0, 2, init=per_chain)
    for a, b in zip(jax.tree.leaves(pos), jax.tree.leaves(per_chain), strict=True):
        np.testing.assert_array_equal(a, b)


def test_init_explicit_pytree_wrong_shape_raises(linen_compiled):
    """An explicit position with the wrong leaf shapes is rejected, naming init."""
    bad = jax.tree.map(lambda a: jnp.zeros((*a.shape, 2)), linen_compiled.initial_position)
    with pytest.raises(ValueError, match=r"init leaf net/Dense_0/bias has shape \(1, 2\)"):
        _init(linen_compiled, 0, 3, init=bad)


@pytest.mark.parametrize("flavour", ["nnx", "equinox"])
def test_init_network_on_instance_raises(flavour):
    """nnx and Equinox instances cannot be re-initialised from a key: init='network' errors."""
    if flavour == "nnx":
        network = nnx.Linear(D, 1, rngs=nnx.Rngs(0))
    else:
        network = eqx.nn.Linear(D, 1, key=jax.random.key(0))
    compiled = _compile(network)
    with pytest.raises(ValueError, match=r"init='network'.*init='prior'"):
        _init(compiled, 0, 2, init="network")
    pos = _init(compiled, 0, 2)  # "auto" falls back to the prior
    assert _chains_differ(pos)

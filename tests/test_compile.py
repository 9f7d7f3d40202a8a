"""The compiled model: energy, unbiased minibatch gradients, batching, temperature, predictions."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

import bdl

N, D, K, B = 12, 3, 3, 4  # n examples, input width, classes, batch size (B divides n)
RNG = np.random.default_rng(0)
X = RNG.normal(size=(N, D)).astype(np.float32)
X[:, 0] = np.arange(N)  # column 0 identifies the example (for the batching tests)
Y = RNG.integers(0, K, size=N)
EPS32 = float(np.finfo(np.float32).eps)


SHAPES = {"Dense_0": {"kernel": (D, 5), "bias": (5,)}, "Dense_1": {"kernel": (5, K), "bias": (K,)}}


def mlp(params, x):
    """A one-hidden-layer tanh MLP, f(params, x) (Flax-style parameter names and layout)."""
    h = jnp.tanh(x @ params["Dense_0"]["kernel"] + params["Dense_0"]["bias"])
    return h @ params["Dense_1"]["kernel"] + params["Dense_1"]["bias"]


def _draw(rng, lead=()):
    return {
        layer: {
            name: jnp.asarray(0.8 * rng.normal(size=(*lead, *shape)), jnp.float32)
            for name, shape in leaves.items()
        }
        for layer, leaves in SHAPES.items()
    }


@pytest.fixture(scope="module")
def clf():
    """A Categorical MLP with prior N(0, 0.8²) and minibatches of B = 4 out of n = 12."""
    model = bdl.Model(
        mlp, bdl.Categorical(), prior=bdl.Normal(0.8), params=_draw(np.random.default_rng(1))
    )
    return bdl.compile(model, (X, Y), batch_size=B)


@pytest.fixture(scope="module")
def three_positions():
    """Three N(0, 0.8²) positions stacked on a leading sample axis."""
    return {"net": _draw(np.random.default_rng(4), lead=(3,))}


@pytest.fixture(scope="module")
def position(three_positions):
    """A non-trivial position: the first of the three."""
    return jax.tree.map(lambda a: a[0], three_positions)


def _np_logits(position, x):
    """The MLP computed by hand in float64 NumPy."""
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), position["net"])
    h = np.tanh(x @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"])
    return h @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"]


def _np_log_prior(position, scale=0.8):
    return sum(
        stats.norm.logpdf(np.asarray(a, np.float64), 0, scale).sum()
        for a in jax.tree.leaves(position["net"])
    )


def test_energy_matches_hand_computation(clf, position):
    """U(θ) = −Σ_i log softmax(f(x_i))_{y_i} − Σ log N(θ; 0, 0.8²), computed by hand."""
    log_probs = special.log_softmax(_np_logits(position, X.astype(np.float64)), axis=-1)
    want = -log_probs[np.arange(N), Y].sum() - _np_log_prior(position)
    np.testing.assert_allclose(eqx.filter_jit(clf.energy)(position), want, rtol=1e-5)


def test_minibatch_gradient_is_unbiased_over_an_epoch(clf, position):
    """Mean over the n/B minibatches of one epoch of ∇Ũ equals the full-data ∇U (to fp32 eps)."""
    xb, yb = eqx.filter_jit(clf.epoch_batches)(jax.random.key(2))
    assert xb.shape == (N // B, B, D) and yb.shape == (N // B, B)

    @eqx.filter_jit
    def epoch(position, xb, yb):
        energies, grads = jax.vmap(lambda x, y: clf.stochastic_energy_and_grad(position, (x, y)))(
            xb, yb
        )
        full_energy, full_grad = clf.energy_and_grad(position)
        # per-example |∇ log p(y_i|x_i)| summed, + |∇ log p(θ)|: the scale of the rounding error
        per_example = jax.vmap(
            jax.grad(lambda p, x, y: clf.log_likelihood(p, x[None], y[None])[0]), (None, 0, 0)
        )(position, clf.x_train, clf.y_train)
        prior_grad = jax.grad(clf.log_prior)(position)
        scale = jax.tree.map(
            lambda g, q: jnp.sum(jnp.abs(g), 0) + jnp.abs(q), per_example, prior_grad
        )
        return energies, grads, full_energy, full_grad, scale

    energies, grads, full_energy, full_grad, scale = epoch(position, xb, yb)
    mean_grad = jax.tree.map(lambda g: jnp.mean(g, 0), grads)
    for m, f, s in zip(
        jax.tree.leaves(mean_grad), jax.tree.leaves(full_grad), jax.tree.leaves(scale), strict=True
    ):
        # (n/B)·Σ_B then the mean of n/B terms: a few roundings per term, each ≤ eps·scale
        tol = 16 * EPS32 * np.asarray(s) + 1e-12
        assert np.all(np.abs(np.asarray(m) - np.asarray(f)) <= tol), (m, f, tol)
    # the energy estimate is unbiased as well
    np.testing.assert_allclose(jnp.mean(energies), full_energy, rtol=16 * EPS32)
    # and the individual minibatch gradients really are noisy (the test is not vacuous)
    spread = max(float(jnp.max(jnp.abs(g - jnp.mean(g, 0)))) for g in jax.tree.leaves(grads))
    assert spread > 1e-3


def test_single_full_batch_energy_equals_full_energy(position):
    """With B = n the scale n/|B| = 1: the one minibatch's Ũ equals U."""
    compiled = bdl.compile(
        bdl.Model(
            mlp, bdl.Categorical(), prior=bdl.Normal(0.8), params=_draw(np.random.default_rng(1))
        ),
        (X, Y),
        batch_size=N,
    )
    xb, yb = eqx.filter_jit(compiled.epoch_batches)(jax.random.key(0))
    assert xb.shape == (1, N, D)
    e_batch, g_batch = eqx.filter_jit(compiled.stochastic_energy_and_grad)(position, (xb[0], yb[0]))
    e_full, g_full = eqx.filter_jit(compiled.energy_and_grad)(position)
    np.testing.assert_allclose(e_batch, e_full, rtol=1e-5)
    for a, b in zip(jax.tree.leaves(g_batch), jax.tree.leaves(g_full), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_minibatch_energy_is_scaled_by_n_over_batch_size(clf, position):
    """Ũ on a batch of B examples = −(n/B) Σ_B log p(y|x) − log p(θ)."""
    idx = np.array([0, 5, 7, 11])
    lp = special.log_softmax(_np_logits(position, X[idx].astype(np.float64)), axis=-1)
    want = -(N / B) * lp[np.arange(B), Y[idx]].sum() - _np_log_prior(position)
    got, _ = eqx.filter_jit(clf.stochastic_energy_and_grad)(
        position, (jnp.asarray(X[idx]), jnp.asarray(Y[idx]))
    )
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_batch_stream_visits_each_example_once_per_epoch(clf):
    """init_batches/next_batch: every example exactly once per epoch; a new permutation next
    epoch; independent streams for two chains (vmapped, shared step counter)."""
    epochs, per_epoch = 3, N // B

    @eqx.filter_jit
    def run(keys):
        streams = jax.vmap(clf.init_batches)(keys)

        def step(streams, t):
            (x, _), streams = jax.vmap(clf.next_batch, (0, None))(streams, t)
            return streams, x[..., 0]

        return jax.lax.scan(step, streams, jnp.arange(epochs * per_epoch))[1]

    ids = np.asarray(run(jax.random.split(jax.random.key(3), 2))).astype(int)  # (steps, 2, B)
    ids = ids.transpose(1, 0, 2).reshape(2, epochs, N)  # (chain, epoch, examples in order)
    for chain in range(2):
        for e in range(epochs):
            np.testing.assert_array_equal(np.sort(ids[chain, e]), np.arange(N))
        assert not np.array_equal(ids[chain, 0], ids[chain, 1])
        assert not np.array_equal(ids[chain, 1], ids[chain, 2])
    assert not np.array_equal(ids[0, 0], ids[1, 0])


def test_potential_fn_is_energy_over_temperature(clf, position):
    """potential_fn(temperature=T)(θ) = U(θ)/T; the default T is the model's (here 1)."""
    u = float(eqx.filter_jit(clf.energy)(position))
    for t in (None, 0.25, 3.0):
        got = float(jax.jit(clf.potential_fn(temperature=t))(position))
        np.testing.assert_allclose(got, u / (1.0 if t is None else t), rtol=1e-6)


def test_potential_fn_rejects_zero_temperature(clf):
    """potential_fn(temperature=0) raises: NUTS cannot sample exp(−U/0)."""
    with pytest.raises(ValueError, match="temperature T > 0"):
        clf.potential_fn(temperature=0.0)


def _plain_linear(temperature):
    def f(p, x):
        return x @ p["w"]

    model = bdl.Model(f, bdl.Gaussian(1.0), params={"w": jnp.ones(D)}, temperature=temperature)
    return bdl.compile(model, (X, np.zeros(N, np.float32)))


def test_potential_fn_needs_explicit_temperature_for_schedule():
    """A temperature schedule has no single T: potential_fn() raises, potential_fn(T=…) works."""
    compiled = _plain_linear(bdl.linear_ramp(0.1, 1.0, 100))
    with pytest.raises(ValueError, match=r"schedule.*potential_fn\(temperature=T\)"):
        compiled.potential_fn()
    pos = compiled.initial_position
    np.testing.assert_allclose(
        jax.jit(compiled.potential_fn(temperature=2.0))(pos),
        eqx.filter_jit(compiled.energy)(pos) / 2.0,
        rtol=1e-6,
    )


def test_potential_fn_uses_model_temperature_and_rejects_cold_zero():
    """Model(temperature=0.5): potential_fn() = U/0.5; at temperature=0 potential_fn() raises."""
    compiled = _plain_linear(0.5)
    pos = compiled.initial_position
    np.testing.assert_allclose(
        jax.jit(compiled.potential_fn())(pos), eqx.filter_jit(compiled.energy)(pos) / 0.5, rtol=1e-6
    )
    with pytest.raises(ValueError, match="T > 0"):
        _plain_linear(0.0).potential_fn()


def test_predict_is_bma_of_class_probabilities(clf, three_positions):
    """predict = (1/K) Σ_k softmax(f(x; θ_k)), rows summing to one."""
    x_test = RNG.normal(size=(5, D)).astype(np.float32)
    got = eqx.filter_jit(clf.predict)(three_positions, jnp.asarray(x_test))
    probs = [
        special.softmax(
            _np_logits(
                jax.tree.map(lambda a, k=k: a[k], three_positions), x_test.astype(np.float64)
            ),
            axis=-1,
        )
        for k in range(3)
    ]
    np.testing.assert_allclose(got, np.mean(probs, axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.sum(got, -1), 1.0, rtol=1e-5)


def test_log_predictive_is_logsumexp_minus_log_k(clf, three_positions):
    """log_predictive_i = logsumexp_k log p(y_i | x_i, θ_k) − log K."""
    got = eqx.filter_jit(clf.log_predictive)(three_positions, jnp.asarray(X), jnp.asarray(Y))
    lls = np.stack(
        [
            special.log_softmax(
                _np_logits(
                    jax.tree.map(lambda a, k=k: a[k], three_positions), X.astype(np.float64)
                ),
                axis=-1,
            )[np.arange(N), Y]
            for k in range(3)
        ]
    )
    np.testing.assert_allclose(got, special.logsumexp(lls, axis=0) - math.log(3), rtol=1e-5)


def test_regression_predict_has_the_targets_shape():
    """A Dense(1) regressor on (n,) targets predicts shape (n,): the BMA of f(x)[:, 0]."""
    y = RNG.normal(size=N).astype(np.float32)
    w = RNG.normal(size=(2, D, 1)).astype(np.float32)  # two positions of a (D, 1) weight

    def dense1(p, x):
        return x @ p["w"]

    model = bdl.Model(dense1, bdl.Gaussian(0.5), params={"w": jnp.asarray(w[0])})
    compiled = bdl.compile(model, (X, y))
    got = eqx.filter_jit(compiled.predict)({"net": {"w": jnp.asarray(w)}}, jnp.asarray(X))
    assert got.shape == (N,)
    want = np.mean([X.astype(np.float64) @ w[k, :, 0] for k in range(2)], axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- bdl.Potential

LOC, SCALE = np.array([1.0, -2.0, 0.5], np.float32), 0.7


def _log_density(theta):
    return -0.5 * jnp.sum(((theta["a"] - LOC) / SCALE) ** 2)


def test_potential_energy_is_minus_log_density():
    """A compiled Potential has U = −log π and ∇U = (θ − μ)/σ² (no noise when grad_noise = 0)."""
    compiled = bdl.compile(bdl.Potential(_log_density, init={"a": jnp.zeros(3)}))
    theta = {"a": jnp.asarray([0.3, 0.1, -0.4])}
    np.testing.assert_allclose(
        eqx.filter_jit(compiled.energy)(theta), -_log_density(theta), rtol=1e-6
    )
    _, g = eqx.filter_jit(compiled.stochastic_energy_and_grad)(theta, jax.random.key(0))
    np.testing.assert_allclose(g["a"], (theta["a"] - LOC) / SCALE**2, rtol=1e-5)


def test_potential_grad_noise_has_the_declared_mean_and_sd():
    """grad_noise = s adds N(0, s²) to ∇U: over M keys, |mean| < 5 s/√N, |sd − s| < 5 s/√(2N)."""
    s, m = 0.6, 4000
    compiled = bdl.compile(bdl.Potential(_log_density, init={"a": jnp.zeros(3)}, grad_noise=s))
    theta = {"a": jnp.asarray([0.3, 0.1, -0.4])}
    exact = (np.asarray(theta["a"]) - LOC) / SCALE**2

    @eqx.filter_jit
    def noisy():
        stream = compiled.init_batches(jax.random.key(0))
        batches = jax.vmap(lambda t: compiled.next_batch(stream, t)[0])(jnp.arange(m))
        return jax.vmap(lambda k: compiled.stochastic_energy_and_grad(theta, k)[1]["a"])(batches)

    noise = np.asarray(noisy(), np.float64) - exact  # (m, 3)
    n = noise.size
    assert abs(noise.mean()) < 5 * s / math.sqrt(n)
    assert abs(noise.std() - s) < 5 * s / math.sqrt(2 * n)
    # the coordinates are independent: the empirical correlation is within MC error of zero
    corr = np.corrcoef(noise.T)[np.triu_indices(3, 1)]
    assert np.all(np.abs(corr) < 5 / math.sqrt(m))

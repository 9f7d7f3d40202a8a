"""The meta-learned kernels NNSGHMC, L2E and Kinetic-L2E with random or supplied meta-parameters:
checker verdicts, reductions to SGHMC, L2E's features, meta-parameter files, and Gaussian moments
of the exact kernels (exact whatever their meta-parameters: that is the point of the recipe)."""

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from stat_utils import assert_moments

import bdl
from bdl.kernels import elementwise_mlp
from bdl.kernels.elementwise_mlp import init_mlp, load_meta_params, save_meta_params
from bdl.kernels.kinetic_l2e import init_kinetic_l2e_params, kinetic_l2e
from bdl.kernels.l2e import EMA_DECAYS, features, init_l2e_params, l2e, learned_field
from bdl.kernels.nnsghmc import NNSGHMCRecipe, init_nnsghmc_params, nnsghmc
from bdl.kernels.nnsghmc_inputs import InputStatistics
from bdl.kernels.recipe import Context, Recipe
from bdl.kernels.sghmc import sghmc

MEAN = np.array([1.0, -1.0, 0.5])
COV = np.array([[1.0, 0.4, 0.2], [0.4, 0.8, -0.3], [0.2, -0.3, 1.2]])


def gaussian_energy(theta):
    x = jnp.concatenate([theta["a"], theta["b"]]) - jnp.asarray(MEAN)
    return 0.5 * x @ jnp.asarray(np.linalg.inv(COV)) @ x


def quartic_energy(theta):
    """A non-Gaussian energy on a two-leaf pytree (for step-by-step comparisons)."""
    return sum(
        jnp.sum(0.5 * x**2 + 0.1 * x**4 + 0.3 * jnp.sin(2 * x)) for x in jax.tree.leaves(theta)
    )


THETA0 = {"w": jnp.linspace(-1.0, 1.5, 12).reshape(3, 4), "b": jnp.array([0.3, -0.7])}


def run_steps(kernel, energy, num_steps, seed=0, step_size=0.05, temperature=1.0):
    """The states after each of ``num_steps`` steps from THETA0 (one compiled scan)."""
    grad_fn = jax.value_and_grad(energy)
    h, T = jnp.asarray(step_size), jnp.asarray(temperature)
    keys = jax.random.split(jax.random.key(seed + 1), num_steps)

    @jax.jit
    def scan(state):
        def body(state, key):
            state, _ = kernel.step(key, state, grad_fn, h, T)
            return state, state

        return jax.lax.scan(body, state, keys)[1]

    stacked = scan(kernel.init(THETA0, jax.random.key(seed)))
    return [jax.tree.map(lambda x, t=t: x[t], stacked) for t in range(num_steps)]


# ---------------------------------------------------------------------------- checker verdicts
class NoGammaRecipe(NNSGHMCRecipe):
    def evaluate(self, z, ctx):
        return super().evaluate(z, ctx)._replace(gamma={})


def no_gamma_nnsghmc(**hyper):
    """NNSGHMC with Γ dropped: the same D(z), Q(z) but no correction term."""
    kernel = nnsghmc(**hyper)
    fields = {f.name: getattr(kernel.recipe, f.name) for f in dataclasses.fields(kernel.recipe)}
    return dataclasses.replace(kernel, recipe=NoGammaRecipe(**fields))


def test_nnsghmc_is_exact():
    report = bdl.kernels.check(bdl.kernels.get("nnsghmc"))
    assert report.exact, str(report)
    assert report.residuals["Γ vs ∇·(D+Q)"] < 1e-12, str(report)


def test_nnsghmc_without_gamma_fails_the_checker():
    kernel = no_gamma_nnsghmc(step_size=1e-2, meta_params=init_nnsghmc_params(0))
    report = bdl.kernels.check(kernel, num_states=2, noise_draws=4000)
    assert not report.exact
    assert any("Γ omitted" in r for r in report.reasons), str(report)


def test_l2e_is_approximate_for_the_right_reasons():
    report = bdl.kernels.check(bdl.kernels.get("l2e"), num_states=2, noise_draws=4000)
    assert report.verdict == "approximate"
    assert any("not a gradient" in r for r in report.reasons), str(report)
    assert any("depends on gradient history" in r for r in report.reasons), str(report)


def test_l2e_paper_form_is_approximate_for_the_right_reasons():
    kernel = bdl.kernels.get("l2e", form="paper", seed=2)
    report = bdl.kernels.check(kernel, num_states=2, noise_draws=4000)
    assert report.verdict == "approximate"
    assert any("not a gradient" in r for r in report.reasons), str(report)
    assert any("depends on gradient history" in r for r in report.reasons), str(report)


def test_kinetic_l2e_is_exact():
    kernel = bdl.kernels.get(
        "kinetic-l2e", step_size=1e-2, meta_params=init_kinetic_l2e_params(3, final_scale=1.0)
    )
    report = bdl.kernels.check(kernel, num_states=2, noise_draws=4000)
    assert report.exact, str(report)


# ---------------------------------------------------------------------------- reductions to SGHMC
def _positions(states):
    return [np.concatenate([np.ravel(x) for x in jax.tree.leaves(s.z)]) for s in states]


def test_l2e_with_zero_heads_is_sghmc_step_for_step():
    """α = 0 and β = r (zero output layer): L2E's update is SGHMC's, draw for draw."""
    zero = l2e(0.05, 1.3, meta_params=init_l2e_params(4, final_scale=0.0))
    a = _positions(run_steps(zero, quartic_energy, 25))
    b = _positions(run_steps(sghmc(0.05, 1.3), quartic_energy, 25))
    np.testing.assert_allclose(np.stack(a), np.stack(b), rtol=0, atol=1e-6)
    # non-zero heads do change the dynamics (the comparison above is not vacuous)
    moved = l2e(0.05, 1.3, meta_params=init_l2e_params(4, final_scale=0.5))
    c = _positions(run_steps(moved, quartic_energy, 25))
    assert np.max(np.abs(np.stack(c) - np.stack(b))) > 1e-2


def _relu_mlp(net, x):
    """The elementwise MLP by hand in float64: x is (coordinates, features)."""
    h = np.asarray(x, np.float64)
    n = len(net.weights)
    for i, (w, b) in enumerate(zip(net.weights, net.biases, strict=True)):
        h = h @ np.asarray(w, np.float64) + np.asarray(b, np.float64)
        if i < n - 1:
            h = np.maximum(h, 0.0)
    return h


def _paper_field(net, theta, r, grad, emas):
    """Kim et al. (2024) Eq. 6's (α_φ, β_φ) by hand: per leaf, the 9 features (g, θ, r,
    m_0.1…m_0.9999) divided by their RMS over the leaf, the ReLU network, its two outputs."""
    alpha, beta = {}, {}
    for name in theta:
        raw = [grad[name], theta[name], r[name], *(m[name] for m in emas)]
        cols = [np.ravel(np.asarray(f, np.float64)) for f in raw]
        cols = [c / np.sqrt(np.mean(c**2) + 1e-30) for c in cols]
        out = _relu_mlp(net, np.stack(cols, axis=1))
        shape = np.shape(theta[name])
        alpha[name], beta[name] = out[:, 0].reshape(shape), out[:, 1].reshape(shape)
    return alpha, beta


def test_l2e_paper_form_step_is_eq6_by_hand():
    """Two steps of form="paper" at T = 0 against Eq. 6 written out with NumPy:
    m_k ← d_k·m_k + (1 − d_k)·g,  r' = r − h[g + α(θ, r) + C·β(θ, r)],  θ' = θ + h·β(θ, r')."""
    params = init_l2e_params(6, hidden=(5, 4), final_scale=1.0, form="paper")
    assert params["net"].activation == "relu"
    h, c = 0.05, 1.3
    kernel = l2e(h, c, meta_params=params, form="paper", init_momentum="sample")
    states = run_steps(kernel, quartic_energy, 2, step_size=h, temperature=0.0)
    net = params["net"]
    init = kernel.init(THETA0, jax.random.key(0))
    theta = {k: np.asarray(v, np.float64) for k, v in THETA0.items()}
    r = {k: np.asarray(v, np.float64) for k, v in init.z["r"].items()}
    emas = [{k: np.zeros_like(v) for k, v in theta.items()} for _ in EMA_DECAYS]
    grad_fn = jax.grad(quartic_energy)
    for state in states:
        g = {
            k: np.asarray(v, np.float64)
            for k, v in grad_fn(jax.tree.map(jnp.float32, theta)).items()
        }
        emas = [
            {k: d * m[k] + (1 - d) * g[k] for k in theta}
            for d, m in zip(EMA_DECAYS, emas, strict=True)
        ]
        alpha, beta = _paper_field(net, theta, r, g, emas)
        r = {k: r[k] - h * (g[k] + alpha[k] + c * beta[k]) for k in theta}
        _, beta_new = _paper_field(net, theta, r, g, emas)
        theta = {k: theta[k] + h * beta_new[k] for k in theta}
        _assert_trees_close(state.z["r"], r, rtol=1e-4, atol=1e-5)
        _assert_trees_close(state.z["theta"], theta, rtol=1e-4, atol=1e-5)
    # the field is not the residual form's (the comparison above is not vacuous)
    residual = run_steps(
        l2e(h, c, meta_params=params, init_momentum="sample"),
        quartic_energy,
        2,
        step_size=h,
        temperature=0.0,
    )
    assert np.max(np.abs(_positions(residual)[1] - _positions(states)[1])) > 1e-3


def test_l2e_paper_form_initial_network_is_the_momentum_path():
    """final_scale = 0: α = 0 and β = r/σ_r (relu(r̂) − relu(−r̂)) whatever the other features."""
    net = init_l2e_params(3, final_scale=0.0, form="paper")["net"]
    grad, theta, r, *emas = [_random_tree(20 + k, 1.0 + k) for k in range(9)]
    alpha, beta = learned_field(net, theta, r, grad, tuple(emas), "paper")
    _assert_trees_close(alpha, jax.tree.map(jnp.zeros_like, r))
    _assert_trees_close(beta, jax.tree.map(lambda x: x / _rms(x), r))


@pytest.mark.parametrize("form", ["Paper", "", None, 1])
def test_l2e_bad_form_raises_naming_the_argument(form):
    with pytest.raises(ValueError, match="form must be one of"):
        bdl.kernels.get("l2e", step_size=0.01, form=form)


def test_l2e_forms_read_their_own_shipped_parameters(monkeypatch):
    seen = []

    def shipped(name):
        seen.append(name)
        return None

    monkeypatch.setattr(elementwise_mlp, "shipped_meta_params_path", shipped)
    assert bdl.kernels.get("l2e", form="paper").meta_params["net"].activation == "relu"
    assert bdl.kernels.get("l2e").meta_params["net"].activation == "tanh"
    assert seen == ["l2e-paper", "l2e"]


def test_l2e_forms_ship_their_own_trained_parameters():
    for form, name, activation in (("residual", "l2e", "tanh"), ("paper", "l2e-paper", "relu")):
        path = elementwise_mlp.shipped_meta_params_path(name)
        assert path is not None, name
        kernel = bdl.kernels.get("l2e", step_size=0.01, form=form)
        assert kernel.meta_params["net"].activation == activation
        np.testing.assert_array_equal(
            kernel.meta_params["net"].weights[0], load_meta_params(path)["net"].weights[0]
        )


def test_nnsghmc_and_kinetic_l2e_with_zero_outputs_are_sghmc():
    """Zero output layers: f_Q = β₀ = 1, f_D = 0 (friction α + c); f_φ = 0 (g = ½‖r‖²)."""
    reference = _positions(run_steps(sghmc(0.05, 1.3), quartic_energy, 10))
    nn = nnsghmc(
        step_size=0.05, alpha=1.0, c=0.3, meta_params=init_nnsghmc_params(1, final_scale=0)
    )
    kin = kinetic_l2e(
        step_size=0.05, friction=1.3, meta_params=init_kinetic_l2e_params(1, final_scale=0)
    )
    for kernel in (nn, kin):
        got = _positions(run_steps(kernel, quartic_energy, 10))
        np.testing.assert_allclose(np.stack(got), np.stack(reference), rtol=0, atol=1e-6)


# ---------------------------------------------------------------------------- one-pass forms
# The kernels compute their networks' values and derivatives in one forward pass; each must equal
# the plain definition (autodiff of g, the generic Γ, features + map_tree) to float rounding.
TREE = {"w": jnp.linspace(-1.0, 1.5, 12).reshape(3, 4), "b": jnp.array([0.3, -0.7, 2.0])}


def _random_tree(seed, scale=1.0):
    keys = jax.random.split(jax.random.key(seed), 2)
    return {
        name: scale * jax.random.normal(k, x.shape)
        for (name, x), k in zip(sorted(TREE.items()), keys, strict=True)
    }


def _assert_trees_close(got, want, rtol=1e-5, atol=1e-6):
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


@pytest.mark.parametrize(
    ("sizes", "activation"),
    [((3, 10, 7, 2), "tanh"), ((3, 10, 7, 2), "softplus"), ((3, 10, 2), "tanh")],
)
def test_map_tree_with_partials_is_the_elementwise_jvp(sizes, activation):
    """Stacked layers (two hidden layers) and the unit-by-unit form (one hidden layer)."""
    net = init_mlp(jax.random.key(0), sizes, activation=activation)
    u, x, p = jnp.asarray(0.7), _random_tree(1), _random_tree(2, 0.5)
    outs, partials = net.map_tree_with_partials(u, x, p, wrt=(0, 1))
    _assert_trees_close(outs, net.map_tree(u, x, p), rtol=1e-6, atol=1e-7)
    _, du = jax.jvp(lambda v: net.map_tree(v, x, p), (u,), (jnp.ones(()),))
    ones = jax.tree.map(jnp.ones_like, x)
    _, dx = jax.jvp(lambda v: net.map_tree(u, v, p), (x,), (ones,))
    _assert_trees_close(partials[0], du)
    _assert_trees_close(partials[1], dx)
    with pytest.raises(ValueError, match="wrt"):
        net.map_tree_with_partials(u, x, p, wrt=(3,))


def test_kinetic_l2e_kinetic_grad_is_the_gradient_of_g():
    recipe = kinetic_l2e(0.05, meta_params=init_kinetic_l2e_params(4, final_scale=1.0)).recipe
    z = {"theta": _random_tree(3, 2.0), "r": _random_tree(4)}
    _assert_trees_close(recipe.kinetic_grad(z), jax.grad(recipe.kinetic)(z))


@pytest.mark.parametrize("q_bound", [4.0, None])
def test_nnsghmc_gamma_equals_the_generic_derivation(q_bound):
    """NNSGHMC writes Γ out; Recipe.evaluate derives it by forward-mode autodiff of D and Q."""
    kernel = nnsghmc(
        0.01,
        meta_params=init_nnsghmc_params(3, final_scale=1.0),
        q_bound=q_bound,
        alpha=0.7,
        input_stats=InputStatistics(1.5, 0.3, 0.2, 1.7, -0.4, 2.0),
        d_scale=1.3,
    )
    recipe = kernel.recipe
    z = {"theta": _random_tree(5), "r": _random_tree(6, 2.0)}
    ctx = Context(jnp.asarray(37.0), _random_tree(7, 3.0))
    got, want = recipe.evaluate(z, ctx), Recipe.evaluate(recipe, z, ctx)
    assert float(jnp.max(jnp.abs(want.gamma["r"]["w"]))) > 0.1  # Γ is not trivially zero
    _assert_trees_close(got, want)


def test_l2e_field_equals_features_then_network():
    net = init_l2e_params(5, final_scale=1.0)["net"]
    scales = [1e-3, 1.0, 30.0, 2.0, 5.0, 1e2, 0.1, 7.0, 1e-5]
    grad, theta, r, *emas = [_random_tree(10 + k, s) for k, s in enumerate(scales)]
    alpha, beta = learned_field(net, theta, r, grad, tuple(emas))
    head_a, head_b = net.map_tree(*features(theta, r, grad, tuple(emas)))
    _assert_trees_close(alpha, jax.tree.map(lambda h, g: _rms(g) * h, head_a, grad))
    _assert_trees_close(beta, jax.tree.map(lambda h, m: m + _rms(m) * h, head_b, r))


def _rms(x):
    return jnp.sqrt(jnp.mean(x**2) + 1e-30)


# ---------------------------------------------------------------------------- L2E features
def test_l2e_features_have_unit_rms_per_leaf():
    keys = jax.random.split(jax.random.key(2), 9)
    trees = [
        jax.tree.map(lambda x, k=k, s=s: s * jax.random.normal(k, x.shape), THETA0)
        for k, s in zip(keys, [1e-3, 1.0, 30.0, 2.0, 5.0, 1e2, 0.1, 7.0, 1e-5], strict=True)
    ]
    feats = features(trees[0], trees[1], trees[2], tuple(trees[3:]))
    assert len(feats) == 9
    for f in feats:
        for leaf in jax.tree.leaves(f):
            assert float(jnp.sqrt(jnp.mean(leaf**2))) == pytest.approx(1.0, rel=1e-5)


def test_l2e_gradient_averages_by_hand():
    """Two steps: m_k = d_k·m_k + (1 − d_k)·g from zero, with g the gradient at each θ."""
    kernel = l2e(0.05, meta_params=init_l2e_params(0))
    s1, s2 = run_steps(kernel, quartic_energy, 2)
    g0 = jax.grad(quartic_energy)(THETA0)
    g1 = jax.grad(quartic_energy)(s1.z["theta"])
    for k, d in enumerate(EMA_DECAYS):
        for name in THETA0:
            m1 = (1 - d) * g0[name]
            m2 = d * m1 + (1 - d) * g1[name]
            np.testing.assert_allclose(s1.history.emas[k][name], m1, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(s2.history.emas[k][name], m2, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(s2.history.grad["w"], g1["w"], rtol=1e-6)


# ---------------------------------------------------------------------------- meta-parameters
def test_meta_params_files_round_trip(tmp_path):
    for name, init in [
        ("nnsghmc", init_nnsghmc_params),
        ("l2e", init_l2e_params),
        ("kinetic-l2e", init_kinetic_l2e_params),
    ]:
        kernel = bdl.kernels.get(name, step_size=0.01, seed=7)
        path = save_meta_params(tmp_path / name, kernel)
        loaded = load_meta_params(path)
        for a, b in zip(jax.tree.leaves(kernel.meta_params), jax.tree.leaves(loaded), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        from_file = bdl.kernels.get(name, step_size=0.01, meta_params=str(path))
        assert jax.tree.leaves(from_file.meta_params)[0].shape == jax.tree.leaves(loaded)[0].shape
        other = bdl.kernels.get(name, step_size=0.01, seed=8)
        assert not np.allclose(jax.tree.leaves(other.meta_params)[0], jax.tree.leaves(loaded)[0])
        assert set(init(0)) == set(loaded)


def test_nnsghmc_input_statistics_travel_with_its_file(tmp_path):
    """save_meta_params(kernel) stores NNSGHMC's input statistics; a kernel built from the file
    reads them back; a file of bare networks, or networks given as objects, mean none."""
    stats = InputStatistics(1.5, 0.3, 0.2, 1.7, -0.4, 2.0)
    kernel = nnsghmc(0.01, seed=4, input_stats=stats)
    path = save_meta_params(tmp_path / "with.npz", kernel)
    assert elementwise_mlp.load_meta_metadata(path)["input_statistics"] == stats.as_dict()
    assert nnsghmc(0.01, meta_params=str(path)).recipe.input_stats == stats
    bare = save_meta_params(tmp_path / "bare.npz", kernel.meta_params)
    assert elementwise_mlp.load_meta_metadata(bare) == {}
    assert nnsghmc(0.01, meta_params=str(bare)).recipe.input_stats == InputStatistics()
    assert nnsghmc(0.01, meta_params=kernel.meta_params).recipe.input_stats == InputStatistics()
    # given explicitly, the statistics win over the file's
    other = InputStatistics(energy_sd=3.0)
    assert nnsghmc(0.01, meta_params=str(path), input_stats=other).recipe.input_stats == other


def test_default_meta_params_prefer_shipped_file(tmp_path, monkeypatch):
    shipped = init_nnsghmc_params(123)
    path = save_meta_params(tmp_path / "nnsghmc.npz", shipped)
    monkeypatch.setattr(elementwise_mlp, "shipped_meta_params_path", lambda name: None)
    default = bdl.kernels.get("nnsghmc")  # nothing shipped: random parameters with the fixed seed
    seeded = init_nnsghmc_params(elementwise_mlp.DEFAULT_SEED)
    np.testing.assert_array_equal(default.meta_params["q"].weights[0], seeded["q"].weights[0])
    monkeypatch.setattr(elementwise_mlp, "shipped_meta_params_path", lambda name: path)
    np.testing.assert_array_equal(
        bdl.kernels.get("nnsghmc").meta_params["q"].weights[0], shipped["q"].weights[0]
    )


@pytest.mark.parametrize(
    ("name", "hyper", "word"),
    [
        ("nnsghmc", {"step_size": 0.01, "c": 0.0}, "c"),
        ("nnsghmc", {"step_size": 0.01, "alpha": -1.0}, "alpha"),
        ("nnsghmc", {"step_size": 0.01, "meta_params": {"q": None}}, "meta_params"),
        ("nnsghmc", {"step_size": 0.01, "input_stats": {"energy_mean": 0.0}}, "input_stats"),
        (
            "nnsghmc",
            {"step_size": 0.01, "input_stats": InputStatistics(grad_sd=0.0)},
            "input_stats\\['grad_sd'\\] must be a finite number > 0",
        ),
        ("l2e", {"step_size": 0.01, "friction": 0.0}, "friction"),
        ("kinetic-l2e", {"learning_rate": 0.1, "momentum": 1.5}, "momentum"),
        ("l2e", {"step_size": 0.01, "seed": 1, "meta_params": init_l2e_params(1)}, "seed"),
    ],
)
def test_bad_hyper_parameters_raise(name, hyper, word):
    with pytest.raises((ValueError, TypeError), match=word):
        bdl.kernels.get(name, **hyper)


def test_wrong_architecture_is_rejected():
    wrong = {"net": init_mlp(jax.random.key(0), (3, 8, 2))}
    with pytest.raises(ValueError, match="meta_params"):
        l2e(0.01, meta_params=wrong)


# ---------------------------------------------------------------------------- Gaussian moments
def _gaussian_target():
    init = {"a": jnp.asarray(MEAN[:2]), "b": jnp.asarray(MEAN[2:])}
    return bdl.compile(bdl.Potential(lambda t: -gaussian_energy(t), init=init, name="gauss3"))


def _draws(kernel, num_steps, seed):
    samples = bdl.sample(
        _gaussian_target(),
        kernel,
        num_steps=num_steps,
        burn_in=num_steps // 10,
        thin=10,
        num_chains=16,
        seed=seed,
    )
    return np.concatenate(
        [np.asarray(samples.positions["a"]), np.asarray(samples.positions["b"])], axis=-1
    ).astype(np.float64)


# Discretisation bias. With these random meta-parameters (output layers × 0.3) the bias is O(h):
# measured with 512 independent chains of 200 time units, the worst mean error of NNSGHMC was
# 0.022 at h = 0.05 and 0.012 at h = 0.025 (covariances within 0.01); Kinetic-L2E ≤ 0.01 at
# h = 0.05 and 0.025. At h = 0.025 the bias is ≤ 0.15 of the test's resolution (z-threshold
# 3.86 × MCSE ≈ 0.09 with ≈ 2,300 effective draws; the runs below reach |z| ≤ 2.4), while dropping
# Γ shifts the NNSGHMC mean by 0.16 (|z| = 6.6: test_gaussian_moments_catch_a_dropped_gamma).
@pytest.mark.parametrize(
    "kernel",
    [
        nnsghmc(
            step_size=0.025, alpha=1.0, c=0.5, meta_params=init_nnsghmc_params(1, final_scale=0.3)
        ),
        kinetic_l2e(
            step_size=0.025, friction=1.5, meta_params=init_kinetic_l2e_params(1, final_scale=0.3)
        ),
    ],
    ids=["nnsghmc", "kinetic-l2e"],
)
def test_exact_learned_kernels_sample_a_gaussian(kernel):
    assert_moments(_draws(kernel, 24_000, seed=3), MEAN, COV, min_ess=1000)


def test_gaussian_moments_catch_a_dropped_gamma():
    """The moment test has power: NNSGHMC without Γ (mean shifted by ≈ 0.16) fails it."""
    kernel = no_gamma_nnsghmc(
        step_size=0.025, alpha=1.0, c=0.5, meta_params=init_nnsghmc_params(1, final_scale=0.3)
    )
    with pytest.raises(AssertionError, match="z-scores"):
        assert_moments(_draws(kernel, 24_000, seed=3), MEAN, COV, min_ess=1000)


def test_nnsghmc_warns_when_its_friction_step_can_diverge():
    target = bdl.compile(
        bdl.Potential(lambda th: -0.5 * jnp.sum(th["x"] ** 2), init={"x": jnp.zeros(3)})
    )
    # f_Q ≤ β₀ + q_bound = 5, so h·α·25 = 2.5 at h = 0.02, α = 5 (the divergence seen in
    # docs/meta-learning-nnsghmc.md); the suggested α is ≤ (1/h − c)/25
    with pytest.warns(RuntimeWarning, match="alpha ≤ 2"):
        bdl.kernels.get("nnsghmc", step_size=0.02, alpha=5.0).bind(target)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bdl.kernels.get("nnsghmc", step_size=0.02, alpha=1.0).bind(target)
        bdl.kernels.get("nnsghmc", step_size=0.02, alpha=5.0, q_bound=None).bind(target)


def test_nnsghmc_friction_advice_fits_the_parameterisation():
    """With (h, α) a smaller alpha or step size helps; with (ℓ, β) only a larger momentum does,
    since h·α = 1 − β whatever the learning rate."""
    with pytest.warns(RuntimeWarning) as record:
        bdl.kernels.get("nnsghmc", step_size=0.02, alpha=5.0)
    message = str(record[0].message)
    assert "alpha ≤ 2 at this step_size or step_size ≤ 0.008 at this alpha" in message
    with pytest.warns(RuntimeWarning) as record:
        bdl.kernels.get("nnsghmc", learning_rate=0.1, momentum=0.8)
    message = str(record[0].message)
    assert "take momentum ≥ 0.96" in message  # (1 − 0.96)·25 = 1
    assert "A smaller learning_rate does not help" in message
    assert "smaller step" not in message and "step_size ≤" not in message

"""Preconditioners: the layerwise estimate, momentum rescaling, checker verdicts, pSGLD's mean on
a correlated Gaussian, and SGHMC with a layerwise mass on the conjugate regression posterior."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import pytest
from stat_utils import assert_moments, mean_and_mcse, z_threshold

import bdl
from bdl.data.synthetic import linear_regression_posterior
from bdl.kernels import preconditioners as pc
from bdl.kernels.psgld import psgld
from bdl.kernels.sghmc import sghmc
from bdl.kernels.sgld import sgld
from bdl.model_files import load_spec


def _feed(precond, grads):
    """Run prepare/update over a sequence of gradients; the mass after each step."""

    @jax.jit
    def one(state, g):
        return precond.update(precond.prepare(state, g), g)

    state = precond.init(jax.tree.map(jnp.zeros_like, grads[0]))
    masses = []
    for g in grads:
        state = one(state, g)
        masses.append(jax.tree.map(np.asarray, state.mass))
    return state, masses


def _hand_mass(grads, scale, eps):
    """Wenzel et al. App. D by hand: m_l = √(mean over entries and gradients of (s·g)² + ε)."""
    m = {
        k: np.sqrt(np.mean([np.mean((scale * np.asarray(g[k])) ** 2) for g in grads]) + eps)
        for k in grads[0]
    }
    smallest = min(m.values())
    return {k: v / smallest for k, v in m.items()}


def _random_grads(num, seed=0):
    rng = np.random.default_rng(seed)
    return [
        {"a": jnp.asarray(3.0 * rng.normal(size=(4, 3))), "b": jnp.asarray(rng.normal(size=(2,)))}
        for _ in range(num)
    ]


def test_layerwise_semi_adaptive_matches_hand_computation():
    """Window of 5 steps, K = 3: the mass after step 5 uses gradients 3–5, after step 10 uses
    gradients 8–10, and stays constant in between; grad_scale = 1/n from bind."""
    grads = _random_grads(10)
    target = types.SimpleNamespace(n=7, num_batches=5)
    precond = pc.layerwise(num_gradients=3, eps=1e-3).bind(target)
    assert precond.update_every == 5 and np.isclose(precond.grad_scale, 1 / 7)
    _, masses = _feed(precond, grads)
    for t in range(4):
        assert all(float(v) == 1.0 for v in masses[t].values())
    for window_end, used in ((4, grads[2:5]), (9, grads[7:10])):
        expected = _hand_mass(used, 1 / 7, 1e-3)
        for k in expected:
            np.testing.assert_allclose(masses[window_end][k], expected[k], rtol=1e-6)
    for t in range(5, 9):
        assert masses[t] == masses[4] or all(
            np.array_equal(masses[t][k], masses[4][k]) for k in masses[4]
        )
    assert min(float(v) for v in masses[9].values()) == pytest.approx(1.0)
    assert max(float(v) for v in masses[9].values()) > 2.0  # leaf "a" has 3× the gradient scale


def test_layerwise_fixed_is_estimated_once():
    grads = _random_grads(8, seed=1)
    _, masses = _feed(pc.layerwise("fixed", num_gradients=3, eps=0.0), grads)
    expected = _hand_mass(grads[:3], 1.0, 0.0)
    for t in range(2, 8):
        for k in expected:
            np.testing.assert_allclose(masses[t][k], expected[k], rtol=1e-6)


def test_rmsprop_recursion():
    """V₁ = g₁² (initialised from the first gradient), then V ← αV + (1−α)g², M = λ + √V."""
    grads = [{"x": jnp.array([1.0, -2.0])}, {"x": jnp.array([3.0, 0.5])}]
    precond = pc.rmsprop(alpha=0.9, eps=1e-3)
    state = precond.init({"x": jnp.zeros(2)})
    state = precond.prepare(state, grads[0])
    np.testing.assert_allclose(state.mass["x"], 1e-3 + np.array([1.0, 2.0]), rtol=1e-6)
    state = precond.update(state, grads[0])
    state = precond.prepare(state, grads[1])
    state = precond.update(state, grads[1])
    v = 0.9 * np.array([1.0, 4.0]) + 0.1 * np.array([9.0, 0.25])
    np.testing.assert_allclose(state.mass["x"], 1e-3 + np.sqrt(v), rtol=1e-6)


def test_momentum_rescaling_in_sghmc_step():
    """At an update, r ← M_new^{1/2} M_old^{−1/2} r after the symplectic-Euler move with M_old
    (the state keeps p = M^{−1/2}r, so the rescaling is implicit; collect() reports r)."""
    with jax.enable_x64(True):
        c = {"a": 4.0, "b": 0.25}

        def energy_and_grad(theta):
            return jax.value_and_grad(lambda t: sum(0.5 * c[k] * jnp.sum(t[k] ** 2) for k in t))(
                theta
            )

        h, gamma = 0.1, 2.0
        precond = pc.layerwise(update_every=1, num_gradients=1, eps=0.0)
        kernel = sghmc(h, gamma, preconditioner=precond, collect_momentum=True)
        theta = {"a": jnp.array([1.0, -1.0]), "b": jnp.array([2.0])}
        r0 = {"a": jnp.array([0.3, 0.1]), "b": jnp.array([-0.2])}
        state = kernel.init(theta, jax.random.key(0))
        state = state._replace(z={"theta": theta, "p": r0})  # M = I: p = r
        new, info = jax.jit(kernel.step, static_argnums=2)(
            jax.random.key(1), state, energy_and_grad, h, 0.0
        )
        out = kernel.collect(new)
        _, g = energy_and_grad(theta)
        r_move = {k: r0[k] - h * g[k] - h * gamma * r0[k] for k in r0}
        m = {k: np.sqrt(np.mean(np.square(g[k]))) for k in g}
        mass = {k: m[k] / min(m.values()) for k in m}
        assert not np.isclose(mass["a"], mass["b"])
        for k in theta:
            np.testing.assert_allclose(new.z["theta"][k], theta[k] + h * r_move[k], rtol=1e-12)
            np.testing.assert_allclose(out["mass"][k], mass[k], rtol=1e-12)
            expected = pc.rescale_momentum(r_move, {"a": 1.0, "b": 1.0}, mass)[k]
            np.testing.assert_allclose(expected, np.sqrt(mass[k]) * r_move[k], rtol=1e-12)
            np.testing.assert_allclose(out["momentum"][k], expected, rtol=1e-12)
        # ½rᵀM⁻¹r is invariant under the rescaling: Info's value before = value after
        kinetic = 0.5 * sum(float(jnp.sum(out["momentum"][k] ** 2)) / mass[k] for k in r0)
        assert float(info.kinetic_energy) == pytest.approx(kinetic, rel=1e-12)


def test_checker_verdicts():
    """pSGLD: approximate (history) only; SGLD with a frozen layerwise G: exact."""
    report = bdl.kernels.check(bdl.kernels.get("psgld"), num_states=2)
    assert report.verdict == "approximate"
    assert len(report.reasons) == 1 and "depends on gradient history" in report.reasons[0]
    fixed = sgld(1e-3, pc.layerwise("fixed", num_gradients=2))
    report = bdl.kernels.check(fixed, num_states=2)
    assert report.exact, str(report)


def test_psgld_mean_on_correlated_gaussian():
    """pSGLD's mean on a 2-D correlated Gaussian is the target mean within MC error: the dynamics
    (V included) are equivariant under the reflection θ − μ ↦ −(θ − μ), so the stationary law is
    symmetric about μ whatever the preconditioner does to the covariance."""
    mean = np.array([1.0, -2.0])
    cov = np.array([[4.0, 1.2], [1.2, 0.5]])
    precision = jnp.asarray(np.linalg.inv(cov))

    def log_density(theta):
        x = theta["x"] - jnp.asarray(mean)
        return -0.5 * x @ precision @ x

    target = bdl.compile(bdl.Potential(log_density, init={"x": jnp.zeros(2)}, name="gauss2"))
    samples = bdl.sample(
        target,
        psgld(0.05),
        num_steps=30_000,
        burn_in=2_000,
        thin=5,
        num_chains=4,
        seed=3,
        progress=False,
    )
    draws = np.asarray(samples.positions["x"], np.float64)
    threshold = z_threshold(2)
    for i in range(2):
        m, se, ess = mean_and_mcse(draws[..., i])
        assert ess > 200
        assert abs(m - mean[i]) / se < threshold, (i, m, se)
    # sanity: the spread is of the right order (the covariance is not held to MC error)
    assert 0.5 < draws[..., 0].std() / 2.0 < 1.5


def test_sghmc_layerwise_recovers_conjugate_regression():
    """SGHMC with a semi-adaptive layerwise mass on the conjugate regression of
    ``bdl/models/linear_regression.py``, the weights split into two leaves and the first two
    features scaled by 3 so that the layerwise mass is far from 1 (M_a ≈ 3): the posterior is still
    conjugate (features X·diag(s)) and is checked against its closed form.

    The mass is re-estimated every 200 steps. With the default window of one epoch (5 steps
    here) M follows the chain's recent gradients so closely that the variance of ``a`` comes out
    ~5% too large (~25% with full-batch gradients and 1-step epochs): see docs/kernels/wenzel.md.
    """
    spec = load_spec("linear_regression")
    data = spec.data
    scale = np.array([3.0, 3.0, 1.0, 1.0, 1.0])
    mean, cov = linear_regression_posterior(
        np.asarray(data.x_train) * scale, np.asarray(data.y_train), 0.5, prior_sd=1.0
    )
    model = bdl.Model(
        network=lambda p, x: 3.0 * x[:, :2] @ p["a"] + x[:, 2:] @ p["b"],
        params={"a": jnp.zeros(2), "b": jnp.zeros(3)},
        likelihood=bdl.Gaussian(scale=0.5),
        prior=bdl.Normal(1.0),
        name="linear_regression_split",
    )
    target = bdl.compile(model, data, batch_size=spec.batch_size)
    kernel = sghmc(
        3e-3,
        friction=20.0,
        preconditioner=pc.layerwise(update_every=200),
        collect_momentum=True,
    )
    samples = bdl.sample(
        target,
        kernel,
        num_steps=30_000,
        burn_in=2_000,
        thin=5,
        num_chains=4,
        seed=5,
        progress=False,
    )
    net = samples.positions["net"]
    draws = np.concatenate([np.asarray(net["a"]), np.asarray(net["b"])], axis=-1)
    assert_moments(draws.astype(np.float64), mean, cov, min_ess=400)
    masses = samples.extra["mass"]["net"]
    assert np.all(masses["b"] == 1.0)  # the least sensitive leaf
    assert np.all(masses["a"] > 1.2) and np.median(masses["a"]) > 2.0  # M is active


def _alg1_target(prior_sd, n=40, d=3, sigma=0.7, seed=0):
    """A full-batch linear-Gaussian regression (float64) and its per-datum log-likelihood and
    log-prior gradients written out by hand; ``prior_sd=None``: a flat prior."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = x @ np.array([1.0, -0.5, 2.0])[:d] + sigma * rng.normal(size=n)
    prior = (
        numpyro.distributions.ImproperUniform(numpyro.distributions.constraints.real, (), ())
        if prior_sd is None
        else bdl.Normal(prior_sd)
    )
    model = bdl.Model(
        network=lambda p, x: x @ p["w"],
        params={"w": jnp.zeros(d)},
        likelihood=bdl.Gaussian(sigma),
        prior=prior,
    )
    target = bdl.compile(model, (x, y), batch_size=n)  # D^t = all n points, no shuffling
    x, y = np.asarray(target.x_train, np.float64), np.asarray(target.y_train, np.float64)

    def mean_loglik_grad(w):  # ḡ(θ; D^t) = (1/n) Σ_i ∇ log p(y_i | x_i, θ)
        return x.T @ (y - x @ w) / (n * sigma**2)

    def logprior_grad(w):  # ∇ log p(θ)
        return np.zeros_like(w) if prior_sd is None else -w / prior_sd**2

    return target, n, mean_loglik_grad, logprior_grad


@pytest.mark.parametrize("prior_sd", [None, 0.8])
def test_psgld_step_matches_li_et_al_algorithm_1_by_hand(prior_sd):
    """Two pSGLD steps against Li et al. (2016, Alg. 1) written out in numpy, with the same noise:

        V_t = αV_{t−1} + (1−α) s_t ⊙ s_t,    G_t = 1 ⊘ (λ + √V_t),
        θ_{t+1} = θ_t + (ε/2)·G·(∇log p(θ_t) + n·ḡ(θ_t)) + √(εG)·ξ_t,    ε = 2h,

    with s_t = ḡ(θ_t) + ∇log p(θ_t)/n = −∇Ũ(θ_t)/n (Kim et al. 2024, Eq. 3; Alg. 1's s_t = ḡ(θ_t)
    without the prior's share, which is the flat-prior case). bdl's two documented differences:
    V_0 = s_1⊙s_1 (so V_1 = s_1⊙s_1 and the first step is Alg. 1's), and step t ≥ 2 moves with
    G from V_{t−1} (the one-step lag: G does not depend on the current θ)."""
    with jax.enable_x64(True):
        h, lam, alpha = 3e-4, 1e-3, 0.9
        target, n, gbar, gprior = _alg1_target(prior_sd)
        kernel = psgld(h, alpha=alpha, eps=lam).bind(target)
        assert np.isclose(kernel.history.grad_scale, 1.0 / n)
        theta = np.array([0.3, -1.2, 0.8])
        treedef = jax.tree.structure(target.initial_position)  # θ is one leaf, w
        assert treedef.num_leaves == 1

        def leaf(tree):
            return np.asarray(jax.tree.leaves(tree)[0])

        state = kernel.init(jax.tree.unflatten(treedef, [jnp.asarray(theta)]), jax.random.key(0))
        batch, _ = target.next_batch(target.init_batches(jax.random.key(1)), jnp.int32(0))

        def energy_and_grad(p):
            return target.stochastic_energy_and_grad(p, batch)

        step = jax.jit(kernel.step, static_argnums=2)
        keys = jax.random.split(jax.random.key(2), 2)
        # the step's noise: one standard-normal draw of θ's size (θ has a single leaf)
        xi = [np.asarray(jax.random.normal(k, theta.shape, jnp.float64)) for k in keys]

        eps = 2.0 * h  # Li et al.'s ε

        def s(w):
            return gbar(w) + gprior(w) / n

        def move(w, v, noise):
            g = 1.0 / (lam + np.sqrt(v))
            return w + 0.5 * eps * g * (gprior(w) + n * gbar(w)) + np.sqrt(eps * g) * noise

        # step 1: V_0 = s_1², so V_1 = αV_0 + (1−α)s_1² = s_1²
        v1 = alpha * s(theta) ** 2 + (1 - alpha) * s(theta) ** 2
        theta2 = move(theta, v1, xi[0])
        state, _ = step(keys[0], state, energy_and_grad, h, 1.0)
        np.testing.assert_allclose(leaf(state.z["theta"]), theta2, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(leaf(state.history.stats), v1, rtol=1e-12)
        # step 2: bdl moves with G(V_1), then folds s_2 in: V_2 = αV_1 + (1−α)s_2²
        theta3 = move(theta2, v1, xi[1])
        v2 = alpha * v1 + (1 - alpha) * s(theta2) ** 2
        state, _ = step(keys[1], state, energy_and_grad, h, 1.0)
        np.testing.assert_allclose(leaf(state.z["theta"]), theta3, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(leaf(state.history.stats), v2, rtol=1e-12)
        np.testing.assert_allclose(leaf(state.history.mass), lam + np.sqrt(v2), rtol=1e-12)
        # Alg. 1 verbatim would move with G(V_2): a different step, so the test sees the order
        assert np.max(np.abs(move(theta2, v2, xi[1]) - theta3)) > 1e-6

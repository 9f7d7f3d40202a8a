"""Warm-up adaptation: kernels built without a step size sample the battery's targets with the
values they adapt, and the frozen kernel of the sampling phase is exact for the checker."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from jax.flatten_util import ravel_pytree
from test_battery import check_conjugate_regression, check_correlated_gaussian

import bdl
from bdl.model_files import load_spec
from bdl.sampling import warmup
from bdl.sampling.warmup import extremes

ADAPTED = {
    "sgld": lambda: bdl.kernels.get("sgld"),
    "sghmc": lambda: bdl.kernels.get("sghmc"),
    "sgnht": lambda: bdl.kernels.get("sgnht"),
    "entropy(sghmc)": lambda: bdl.kernels.get("entropy", base="sghmc"),
}


def test_windows_cover_the_burn_in():
    for burn_in in (150, 1_000, 4_321, 100_000):
        w = warmup.windows(burn_in)
        assert sum(x.length for x in w) == burn_in
        assert not w[0].slow and not w[-1].slow and all(x.slow for x in w[1:-1])
    with pytest.raises(ValueError, match="burn_in"):
        warmup.windows(100)


@pytest.mark.parametrize("name", sorted(ADAPTED))
def test_adapted_kernel_samples_a_correlated_gaussian(name):
    cfg = {"steps": 30_000, "thin": 10}
    check_correlated_gaussian(ADAPTED[name](), cfg, 1.0)


@pytest.mark.parametrize("name", ["sgld", "sghmc"])
def test_adapted_kernel_samples_the_conjugate_regression(name):
    """With exact gradients (batch = n): the adapted step's discretisation bias is within the
    battery's resolution. With the model's minibatches of 20 of 100 the gradient noise heats
    adapted SGHMC by ≈ 6 % in variance (measured; docs/troubleshooting.md), which the battery
    resolves: adaptation does not yet raise the friction against gradient noise."""
    check_conjugate_regression(ADAPTED[name](), {"steps": 30_000, "thin": 10}, batch_size=100)


@pytest.mark.parametrize("name", ["sgld", "sghmc"])
def test_anchored_gradients_sample_the_conjugate_regression_with_minibatches(name):
    """With the model file's minibatches (20 of 100) the chains' gradients are re-centred on
    the mode (warm-up's control variate), and the closed-form posterior's moments hold within
    Monte Carlo error: the anchored estimate is unbiased and its noise no longer heats SGHMC
    (≈ 6 % in variance with the plain estimate, which this battery resolves)."""
    check_conjugate_regression(ADAPTED[name](), {"steps": 30_000, "thin": 10})


def test_the_anchored_estimate_is_the_full_data_one_on_the_full_data():
    """Ũ_cv(θ; S) = U(θ̂) + Ũ(θ; S) − Ũ(θ̂; S) is U(θ) when S is the whole data set, at any θ
    and anchor; with a random minibatch near the mode its gradient noise is a small fraction
    of the plain estimate's (diabetes regression, 12 parameters, n/B = 11)."""
    from bdl.sampling.warmup import anchor as anchors
    from bdl.sampling.warmup.laplace import laplace_draw, newton_mode

    compiled = load_spec("diabetes_regression").compile()
    start = compiled.init_positions(jax.random.key(0), 1, "prior")
    start = jax.tree.map(lambda x: x[0], start)
    mode = newton_mode(compiled.energy, start, jnp.asarray(1.0))
    assert bool(mode.converged)
    unravel = ravel_pytree(start)[1]
    anchor = anchors.anchor_at(
        compiled.energy_and_grad, unravel(mode.position), mode.hessian, mode.converged
    )
    full = (compiled.x_train, compiled.y_train)
    theta = jax.tree.map(lambda x: x + 0.3, start)
    energy, grad = anchors.anchored(
        partial(compiled.stochastic_energy_and_grad, batch=full), anchor
    )(theta)
    want_energy, want_grad = compiled.energy_and_grad(theta)
    np.testing.assert_allclose(energy, want_energy, rtol=1e-5)
    for got, want in zip(jax.tree.leaves(grad), jax.tree.leaves(want_grad), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())

    plain, centred = [], []
    draw = laplace_draw(mode, start, jnp.asarray(1.0), jax.random.PRNGKey(1))
    for k in range(32):
        batch, _ = compiled.next_batch(
            compiled.init_batches(jax.random.PRNGKey(k)), jnp.zeros((), jnp.int32)
        )
        minibatch = partial(compiled.stochastic_energy_and_grad, batch=batch)
        plain.append(ravel_pytree(minibatch(draw)[1])[0])
        centred.append(ravel_pytree(anchors.anchored(minibatch, anchor)(draw)[1])[0])
    root = np.asarray(mode.root)  # whitened: Sᵀ∇Ũ, S·Sᵀ = H⁻¹
    noise = [np.mean(np.var(np.stack(g) @ root, axis=0, ddof=1)) for g in (plain, centred)]
    assert noise[1] < 0.2 * noise[0], noise


def test_adapted_values_are_reported_and_the_frozen_kernel_is_exact():
    """On a target shaped like the checker's test energy (θ = {a: (2,), b: (1,)}; 3 parameters,
    so a dense mass), the kernel of the sampling phase, rebuilt from ``samples.adapted``, is
    exact, and M⁻¹ follows the posterior covariance."""
    scales = {"a": jnp.array([0.1, 3.0]), "b": jnp.array([30.0])}

    def log_density(theta):
        return -0.5 * sum(jnp.sum((theta[k] / scales[k]) ** 2) for k in scales)

    target = bdl.compile(
        bdl.Potential(log_density, init={"a": jnp.zeros(2), "b": jnp.zeros(1)}, name="scaled")
    )
    kernel = bdl.kernels.get("sghmc")
    samples = bdl.sample(target, kernel, num_steps=4_000, burn_in=2_000, num_chains=2)
    adapted = samples.adapted
    assert set(adapted) == {"step_size", "friction", "inverse_mass"}
    assert adapted["step_size"].shape == (2,) and adapted["inverse_mass"].shape == (2, 3, 3)
    # M⁻¹ ≈ Cov: its diagonal follows the scales over six orders of magnitude
    ratio = np.diagonal(adapted["inverse_mass"], axis1=1, axis2=2) / np.array([0.1, 3.0, 30.0]) ** 2
    assert np.all((ratio > 0.5) & (ratio < 2.0)), ratio
    report = bdl.kernels.check(warmup.frozen(kernel, adapted, chain=1))
    assert report.exact, str(report)


def test_large_models_adapt_a_diagonal_mass():
    """Above 100 parameters the mass is diagonal, one value per coordinate, M ≈ 1/Var over a
    range of 10⁸ in variance. Each entry is a variance estimated from the last slow window
    (≈ 900 steps): with its autocorrelation, a relative standard error of ≈ 0.2–0.3, so single
    entries are held to a factor of 3 and the median to 25 %."""
    scales = jnp.logspace(-2, 2, 120)
    target = bdl.compile(
        bdl.Potential(lambda t: -0.5 * jnp.sum((t["x"] / scales) ** 2), init={"x": jnp.zeros(120)})
    )
    samples = bdl.sample(target, bdl.kernels.get("sghmc"), num_steps=3_000, burn_in=2_000)
    mass = samples.adapted["mass"]["x"][0]
    ratio = mass * np.asarray(scales) ** 2
    assert mass.shape == (120,)
    assert np.all((ratio > 1 / 3) & (ratio < 3)), ratio
    assert 0.8 < np.median(ratio) < 1.25, np.median(ratio)


@pytest.mark.parametrize("dense", [True, False])
def test_window_mass_follows_small_scales(dense):
    """M⁻¹ from a window is equivariant under rescaling a coordinate: posterior sds of 10⁻⁴ and
    10² (a coefficient of a predictor in the thousands next to an intercept) come out as the
    window's variances; a shrinkage towards 10⁻³·I would have made the first 10⁻⁶·5/(w + 5)·10³
    times too large. 400 iid draws: variances to ±25 % (standard error 7 %)."""
    rng = np.random.default_rng(0)
    draws = rng.normal(size=(400, 2)) * np.array([1e-4, 1e2])
    stats = warmup.empty_stats({"x": jnp.zeros(2)}, dense)
    for row in draws:
        stats = warmup.accumulate(stats, {"x": jnp.asarray(row, jnp.float32)})
    mass = warmup.window_mass(stats)
    if dense:
        inverse = np.asarray(mass.root @ mass.root.T)
        variances = np.diagonal(inverse)
        assert abs(inverse[0, 1]) / np.sqrt(variances.prod()) < 0.2  # no correlation made up
    else:
        variances = 1.0 / np.asarray(mass.values["x"])
    ratio = variances / np.array([1e-8, 1e4])
    assert np.all((ratio > 0.75) & (ratio < 1.25)), ratio


def test_sgnht_from_a_far_start_stays_finite():
    """A start hundreds of posterior sds away (unstandardised predictor, flat priors) releases
    potential energy that threw SGNHT's thermostat from A to ≈ 900 in one step; the explicit
    friction step (1 − hξ)r then blew the momentum up within 43 steps. Warm-up holds hξ ≤ 1."""
    from bdl.model_files import load_spec

    target = load_spec("linear_unstandardised").compile()
    samples = bdl.sample(
        target, bdl.kernels.get("sgnht"), num_steps=1_500, burn_in=1_000, num_chains=2
    )
    assert not samples.diverged.any(), samples.divergence_step
    assert np.all(np.isfinite(samples.adapted["step_size"]))


def test_start_mass_is_the_hessian_only_where_the_energy_is_convex():
    """A positive-definite Hessian gives M = H; an indefinite one (a network's saddle) gives the
    diagonal |diag H|, whose chains do not run off along the saddle's eigenvectors."""
    convex = jnp.array([[4.0, 1.0], [1.0, 2.0]])
    saddle = jnp.array([[4.0, 3.0], [3.0, -1.0]])
    for hess, want in ((convex, convex), (saddle, jnp.diag(jnp.array([4.0, 1.0])))):
        mass = warmup.hessian_mass(lambda x, h=hess: h @ x, jnp.zeros(2))
        inverse = mass.root @ mass.root.T
        np.testing.assert_allclose(inverse, np.linalg.inv(want), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["sgld", "sghmc"])
def test_default_kernels_stay_finite_on_a_small_network(name):
    """The depth-1 prior-data MLP (d = 93, a dense adapted mass): from the default starts,
    every chain of the kernel built by name gets through warm-up (a dense start mass from the
    saddle's Hessian sent every SGLD chain to a non-finite state within 130 steps)."""
    target = load_spec("mlp_prior_data", depth=1).compile()
    s = bdl.sample(target, bdl.kernels.get(name), num_steps=800, burn_in=600, thin=50, num_chains=4)
    assert not np.asarray(s.diverged).any(), s.divergence_report()


def test_psgld_step_is_adapted_in_the_coordinates_it_moves_in():
    """pSGLD moves with G = 1/(λ + √V) ≈ n/|∇Ũ|: warm-up measures curvature and gradient noise
    with that mass (the first V from the step's own gradient), not in the coordinates of ∇Ũ."""
    target = load_spec("logistic_breast_cancer").compile()
    kernel = bdl.kernels.psgld(None).bind(target)
    state = kernel.init(target.initial_position, jax.random.key(0))
    grad = jax.tree.map(
        lambda x: jnp.linspace(-3.0, 5.0, x.size).reshape(x.shape), state.z["theta"]
    )
    mass = warmup.history_mass(kernel, state, grad)
    for m, g in zip(jax.tree.leaves(mass.values), jax.tree.leaves(grad), strict=True):
        np.testing.assert_allclose(m, 1e-5 + np.abs(g) / target.n, rtol=1e-6)
    sgld = bdl.kernels.sgld(None).bind(target)
    assert (
        warmup.history_mass(sgld, sgld.init(target.initial_position, jax.random.key(0)), grad)
        is None
    )


@pytest.mark.slow
def test_adapted_psgld_stays_near_the_posterior_of_a_logistic_regression():
    """With the step adapted to ∇Ũ's coordinates instead, h was ≈ 100× too large for G ≈ n/|∇Ũ|
    (n = 455) and the draws' sd was ≈ 15; adapted with G it is of the posterior's order (0.3–1
    over two short chains that have not yet mixed along the flat directions)."""
    target = load_spec("logistic_breast_cancer").compile()
    s = bdl.sample(
        target, bdl.kernels.psgld(None), num_steps=3_000, burn_in=2_000, thin=10, num_chains=2
    )
    assert not np.asarray(s.diverged).any()
    draws = np.concatenate(
        [np.asarray(x).reshape(x.shape[0] * x.shape[1], -1) for x in jax.tree.leaves(s.positions)],
        axis=1,
    )
    assert draws.shape[1] == 31
    assert np.all(draws.std(0) < 3.0), draws.std(0)


def test_curvature_and_diagonal_mass_of_a_quadratic():
    """On U = ½ θᵀHθ over a two-leaf θ: the power iteration finds |λ_max| of H (and of S·H·S
    under a mass), and Hutchinson's estimator the diagonal of H, exactly for a diagonal H
    (z ⊙ Hz = diag H when z is ±1)."""
    h = jnp.diag(jnp.array([1.0, 4.0, 9.0, 0.5]))

    def grad_fn(theta):
        flat = jnp.concatenate([theta["a"], theta["b"]])
        g = h @ flat
        return {"a": g[:3], "b": g[3:]}

    theta = {"a": jnp.zeros(3), "b": jnp.zeros(1)}
    key = jax.random.key(0)
    np.testing.assert_allclose(warmup.largest_curvature(grad_fn, theta, None, key), 9.0, rtol=1e-4)
    mass = warmup.hessian_diagonal_mass(grad_fn, theta, key)
    np.testing.assert_allclose(mass.power(1.0).times({"a": jnp.ones(3), "b": jnp.ones(1)})["a"],
                               [1.0, 4.0, 9.0], rtol=1e-6)  # fmt: skip
    # preconditioned by M = diag H the curvature is 1 in every direction
    np.testing.assert_allclose(warmup.largest_curvature(grad_fn, theta, mass, key), 1.0, rtol=1e-4)


def test_adaptation_points_depend_on_the_burn_in_alone():
    """Windows end with a new mass or not, and the last window estimates the gradient noise:
    the points' flags differ (they are traced, so one warm-up program serves every point,
    tests/sampling/test_program.py counts the programs); every point lies inside the burn-in,
    the last at its end."""
    schedule = warmup.Schedule(1_000)
    assert len(set(schedule.points.values())) >= 3
    assert max(schedule.points) == schedule.end == 1_000
    stops, t = [], 0
    while t < schedule.end:
        t = schedule.next_point(t)
        stops.append(t)
    assert stops == sorted(schedule.points)


def _ard_regression() -> bdl.CompiledModel:
    """A 13-parameter linear regression with a non-centred hierarchical (ARD) prior, started
    with its weights near zero, where the scales barely affect the energy: the start's curvature
    understates the posterior's, and without the warm-up's guard most chains' first steps threw
    their scales to where the energy overflows (5 of 6 chains diverged in warm-up)."""
    import numpyro.distributions as dist

    rng = np.random.default_rng(1)
    x = rng.normal(size=(60, 6)).astype(np.float32)
    w = np.array([2.0, -1.0, 0.0, 0.0, 0.0, 0.5])
    y = (x @ w + 0.5 * rng.normal(size=60)).astype(np.float32)
    ard = bdl.HierarchicalNormal(scale=dist.HalfNormal(2.0), per="input", centred=False, name="a")
    model = bdl.Model(
        lambda p, x: x @ p["w"] + p["b"],
        bdl.Gaussian(0.5),
        prior=bdl.ByPath({"net/w": ard}, default=bdl.Normal(5.0)),
        params={"w": jnp.zeros(6), "b": jnp.zeros(())},
    )
    return bdl.compile(model, (x, y))


@pytest.mark.parametrize("name", ["sgld", "sghmc", "sgnht"])
def test_warm_up_undoes_unstable_steps_on_a_funnel(name):
    burn_in = 1_000
    s = bdl.sample(
        _ard_regression(), ADAPTED[name](), num_steps=1_100, burn_in=burn_in, thin=10,
        num_chains=6, seed=0,
    )  # fmt: skip
    in_warm_up = s.diverged & (s.divergence_step < burn_in)
    assert not in_warm_up.any(), s.divergence_report()
    assert np.all(np.isfinite(s.adapted["step_size"])) and np.all(s.adapted["step_size"] > 0)


def _collinear_regression(noise: float = 0.01) -> tuple[bdl.CompiledModel, np.ndarray, np.ndarray]:
    """A linear regression on 12 predictors that share one factor (x_j = f + 0.01·e_j: pairwise
    correlations ≈ 0.9999) and an intercept, known noise σ = 1, N(0, 10²) priors: the posterior
    is N(μ, Σ) exactly, Σ = (XᵀX + I/100)⁻¹, with a condition number of about 10⁶."""
    rng = np.random.default_rng(4)
    n, d = 2_000, 12
    f = rng.normal(size=(n, 1))
    x = (f + noise * rng.normal(size=(n, d))).astype(np.float32)
    y = (x @ rng.normal(size=d) + 1.0 + rng.normal(size=n)).astype(np.float32)
    model = bdl.Model(
        network=lambda p, x: x @ p["w"] + p["b"],
        params={"b": jnp.zeros(()), "w": jnp.zeros(d)},
        likelihood=bdl.Gaussian(1.0),
        prior=bdl.Normal(10.0),
    )
    design = np.column_stack([np.ones(n), x]).astype(np.float64)  # leaves: b, then w
    cov = np.linalg.inv(design.T @ design + np.eye(d + 1) / 100.0)
    return bdl.compile(model, (x, y)), cov @ design.T @ y.astype(np.float64), cov


@pytest.mark.parametrize("name", ["sghmc", "sgnht"])
def test_a_collinear_regression_mixes_with_the_laplace_mass(name):
    """Condition number ≈ 10⁶: the slow windows' covariance alone, from chains that have not
    crossed the posterior's long directions, under-states them and the chains never mix
    (R̂ 1.8 and ESS 6 on 24 such predictors before); the mass from the Hessian at the window's
    mean gives the exact posterior's two moments within Monte Carlo error."""
    from stat_utils import assert_moments

    compiled, mean, cov = _collinear_regression()
    assert np.linalg.cond(cov) > 1e5
    s = bdl.sample(
        compiled, ADAPTED[name](), num_steps=5_000, burn_in=2_000, thin=3, num_chains=4, seed=0,
        progress=False,
    )  # fmt: skip
    assert not s.diverged.any()
    draws = np.concatenate(
        [np.asarray(s.positions["net"]["b"])[..., None], np.asarray(s.positions["net"]["w"])], -1
    )
    assert_moments(draws, mean, cov, min_ess=400)


def _raw_logistic(seed: int = 0) -> tuple[bdl.CompiledModel, np.ndarray, np.ndarray]:
    """A logistic regression on features measured in thousandths, units and thousands (the
    posterior's scales span 10⁶, its covariance's condition number about 10¹²), N(0, 10²)
    priors: the shape of the raw breast cancer data."""
    rng = np.random.default_rng(seed)
    n = 400
    x = rng.normal(size=(n, 3)) * np.array([1e-3, 1.0, 1e3])
    logits = x @ np.array([800.0, -1.0, 1e-3]) + 0.3
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logits))).astype(np.int32)
    model = bdl.Model(
        network=lambda p, x: x @ p["w"] + p["b"],
        params={"w": jnp.zeros(3), "b": jnp.zeros(())},
        likelihood=bdl.Bernoulli(),
        prior=bdl.Normal(10.0),
    )
    return bdl.compile(model, (x.astype(np.float32), y)), x, y


def test_newton_finds_the_mode_of_an_ill_conditioned_logistic_regression():
    from scipy.optimize import minimize

    from bdl.sampling.warmup.laplace import newton_mode

    compiled, x, y = _raw_logistic()
    start = compiled.init_positions(jax.random.key(0), 1, "prior")
    start = jax.tree.map(lambda a: a[0], start)
    mode = newton_mode(compiled.energy, start, jnp.asarray(1.0))
    assert bool(mode.converged)

    design = np.column_stack([np.ones(len(x)), x])  # leaves: net/b, net/w

    def energy(beta):  # float64, the same posterior
        z = design @ beta
        return np.sum(np.logaddexp(0, z) - y * z) + 0.5 * np.sum(beta**2) / 100.0

    def gradient(beta):
        return design.T @ (1 / (1 + np.exp(-design @ beta)) - y) + beta / 100.0

    exact = minimize(energy, np.zeros(4), method="Newton-CG", jac=gradient, tol=1e-12).x
    p = 1 / (1 + np.exp(-design @ exact))
    hessian = design.T @ (design * (p * (1 - p))[:, None]) + np.eye(4) / 100.0
    sd = np.sqrt(np.diag(np.linalg.inv(hessian)))
    np.testing.assert_array_less(np.abs(np.asarray(mode.position) - exact) / sd, 0.05)


def test_newton_does_not_follow_an_energy_to_a_degenerate_mode():
    """A centred hierarchical normal's joint energy falls without bound as the group scale τ
    goes to 0 with every group at the mean: Newton's result is not used."""
    from bdl.sampling.warmup.laplace import newton_mode

    y = jnp.asarray([2.0, -1.0, 0.5, 1.5])

    def energy(p):
        tau = jnp.exp(p["log_tau"])
        groups = 0.5 * jnp.sum((p["theta"] - p["mu"]) ** 2) / tau**2 + 4 * p["log_tau"]
        return groups + 0.5 * jnp.sum((y - p["theta"]) ** 2)

    start = {"theta": y, "mu": jnp.zeros(()), "log_tau": jnp.zeros(())}
    assert not bool(newton_mode(energy, start, jnp.asarray(1.0)).converged)


def _learned_noise_regression() -> bdl.CompiledModel:
    """A linear regression on 3 predictors with its noise scale σ learned (HalfCauchy(5) prior,
    sampled as log σ): at a prior draw of (w, b) far from the data's fit the joint energy in
    (w, b, log σ) is not convex, yet it has one mode, which Newton's method reaches."""
    rng = np.random.default_rng(2)
    n = 200
    x = rng.normal(size=(n, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -0.5, 2.0]) + 0.5 + 0.3 * rng.normal(size=n)).astype(np.float32)
    model = bdl.Model(
        network=lambda p, x: x @ p["w"] + p["b"],
        params={"w": jnp.zeros(3), "b": jnp.zeros(())},
        likelihood=bdl.Gaussian(scale=None, scale_prior=dist.HalfCauchy(5.0)),
        prior=bdl.Normal(10.0),
    )
    return bdl.compile(model, (x, y))


def test_warm_up_starts_from_the_laplace_draw_where_the_energy_is_not_convex_at_the_start():
    """Newton's method runs from a start where the energy's Hessian is indefinite, and the chain
    starts from its draw of N(θ̂, T·H(θ̂)⁻¹): within a few posterior sds of the mode, where the
    start was hundreds of sds away (without it, the chain kept its start)."""
    from bdl.sampling.warmup.laplace import newton_mode

    compiled = _learned_noise_regression()
    start = jax.tree.map(lambda a: a[0], compiled.init_positions(jax.random.key(3), 1, "prior"))
    flat, unravel = ravel_pytree(start)
    hessian = jax.hessian(lambda v: compiled.energy(unravel(v)))(flat)
    assert np.linalg.eigvalsh(np.asarray(hessian, np.float64)).min() < 0  # not convex there
    mode = newton_mode(compiled.energy, start, jnp.asarray(1.0))
    assert bool(mode.converged)

    def sds_from_the_mode(theta):  # |S⁻¹(θ − θ̂)| with S·Sᵀ = H(θ̂)⁻¹: a χ with d dof at a draw
        offset = ravel_pytree(theta)[0] - mode.position
        return float(np.linalg.norm(np.linalg.solve(np.asarray(mode.root), np.asarray(offset))))

    assert sds_from_the_mode(start) > 100
    for name in ("sgld", "sghmc"):
        kernel = bdl.kernels.get(name).bind(compiled)
        state = kernel.init(start, jax.random.key(0))
        state, _ = warmup.WarmUp(kernel).init(compiled, state, jax.random.key(1))
        assert sds_from_the_mode(kernel.position(state)) < 5, name  # d = 5: χ₅ < 5 w.p. 0.9995


@pytest.mark.parametrize("name", ["sgld", "sghmc"])
def test_an_ill_conditioned_logistic_regression_starts_in_the_posterior(name):
    """From prior draws (logits in the thousands, where the curvature vanishes along most
    directions), the Laplace start puts every chain in the posterior before its first step:
    no chain adapts a step far below the others' (one did, 3,000× below, on the raw breast
    cancer data) and the chains agree (R̂ < 1.05 over 4 chains × 300 draws)."""
    from bdl.diagnostics import rank_rhat

    compiled, _, _ = _raw_logistic()
    s = bdl.sample(
        compiled, ADAPTED[name](), num_steps=4_000, burn_in=1_000, thin=10, num_chains=4,
        seed=1, progress=False,
    )  # fmt: skip
    h = s.adapted["step_size"]
    assert h.min() > h.max() / 10, h
    draws = np.concatenate(
        [np.asarray(s.positions["net"]["b"])[..., None], np.asarray(s.positions["net"]["w"])], -1
    )
    assert np.max(rank_rhat(draws)) < 1.05


def test_extremes_keep_each_coordinates_edge_states_and_the_stiffest_finite_curvature():
    """Per coordinate, the largest and smallest value seen and the whole state it was seen at;
    the stiffest λ over those states ignores unseen rows and non-finite curvatures."""
    theta = {"a": jnp.zeros(()), "b": jnp.zeros(2)}
    ext = extremes.empty(theta)
    seen = [
        {"a": jnp.asarray(1.0), "b": jnp.asarray([0.0, -2.0])},
        {"a": jnp.asarray(-3.0), "b": jnp.asarray([5.0, 1.0])},
        {"a": jnp.asarray(0.5), "b": jnp.asarray([-1.0, 0.0])},
    ]
    for s in seen:
        ext = extremes.record(ext, s)
    np.testing.assert_array_equal(ext.high, [1.0, 5.0, 1.0])
    np.testing.assert_array_equal(ext.low, [-3.0, -1.0, -2.0])
    np.testing.assert_array_equal(ext.high_states[1], [-3.0, 5.0, 1.0])  # where b[0] was 5
    np.testing.assert_array_equal(ext.low_states[2], [1.0, 0.0, -2.0])  # where b[1] was -2
    unravel = ravel_pytree(theta)[1]

    def curvature_at(x):  # λ = the sum of squares; infinite where a < -2
        flat = ravel_pytree(x)[0]
        return jnp.where(x["a"] < -2.0, jnp.inf, jnp.sum(flat * flat))

    fresh = extremes.empty(theta)  # a generation that saw nothing adds nothing
    lam = extremes.stiffest(curvature_at, (fresh, ext), unravel)
    # finite rows: (1, 0, -2) → 5, (0.5, -1, 0) → 1.25; the row with a = -3 is infinite
    assert float(lam) == pytest.approx(5.0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_non_centred_eight_schools_passes_validation_with_adapted_sghmc(seed):
    """The model file's budget (40,000 steps, 5,000 of burn-in), the default start, 4 chains:
    the frozen step stays stable at the largest scales the sampling phase reaches (no chain
    diverges) and the draws match NUTS's within the validation gates."""
    spec = load_spec("eight_schools", centred=False)
    report = bdl.validate(
        spec.compile(), bdl.kernels.get("sghmc"), num_steps=spec.num_steps,
        burn_in=spec.burn_in, thin=spec.thin, num_chains=4, seed=seed, init=spec.init,
    )  # fmt: skip
    assert not report.samples.diverged.any(), report.samples.divergence_report()
    assert report.passed, str(report)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("diabetes_regression", "sgld"),
        ("diabetes_regression", "sghmc"),
        ("correlated_regression", "sgld"),
        ("correlated_regression", "sghmc"),
    ],
)
def test_small_regressions_with_minibatches_pass_validation_unattended(model, name):
    """The model file's budget and minibatches (n/B = 11 and 40), the default start, 4 chains:
    every chain re-centres its gradients on the mode, and the draws pass every gate against
    NUTS, the convergence gates included (plain minibatch gradients held SGHMC to h·γ = 1:
    diabetes R̂ 1.013, correlated regression R̂ 1.039 and ESS 122)."""
    spec = load_spec(model)
    report = bdl.validate(
        spec.compile(), ADAPTED[name](), num_steps=spec.num_steps, burn_in=spec.burn_in,
        thin=spec.thin, num_chains=4, seed=0,
    )  # fmt: skip
    assert report.samples.adapted["control_variate"].all()
    assert report.passed, str(report)

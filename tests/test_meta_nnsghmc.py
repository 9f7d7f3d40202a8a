"""NNSGHMC meta-training (Gong et al. 2019, Sec. 3.3): the Stein gradient estimator, gradients
through the unrolled sampler and their truncation, checkpoint/resume, config errors and the CLI.

Kept fast: tiny configurations, one shared compilation of the training step (the trainer caches
it per configuration), and the single-step comparisons run eagerly.
"""

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bdl
from bdl.cli.main import main
from bdl.kernels import elementwise_mlp
from bdl.kernels.elementwise_mlp import load_meta_metadata, load_meta_params
from bdl.kernels.nnsghmc import init_nnsghmc_params, nnsghmc
from bdl.kernels.nnsghmc_inputs import HEADER_KEY, InputStatistics
from bdl.kernels.recipe import Context
from bdl.kernels.recipe_kernel import RecipeState
from bdl.meta import nnsghmc_loss
from bdl.meta import nnsghmc_training as nt
from bdl.meta.config import load_config, parse_config
from bdl.meta.score_estimator import median_bandwidth, rbf_kernel, stein_score

#: the smallest configuration that exercises every part of an iteration
TINY = {
    "seed": 3,
    "iterations": 4,
    "iterations_per_epoch": 2,
    "checkpoint_every": 2,
    "log_every": 1,
    "dim": 3,
    "num_tasks": 2,
    "num_chains": 6,
    "window": 3,
    "windows_per_iteration": 2,
    "cross_chain_every": 2,
    "in_chain_chains": 2,
    "in_chain_burn_in": 0,
    "in_chain_thin": 2,
    "replay_size": 8,
    "learning_rate": 1e-2,
}


# ---------------------------------------------------------------------------- Stein estimator
stein_jit = jax.jit(stein_score, static_argnames=("eta", "bandwidth_scale"))


def test_median_bandwidth_is_the_median_pairwise_distance():
    x = np.array([[0.0, 0.0], [3.0, 4.0], [1.0, 0.0], [0.0, 2.0]], np.float32)
    # by hand: the 6 pairwise distances are 5, 1, 2, √20, √13, √5, sorted 1, 2, √5, √13, √20, 5;
    # an even count, so the median is the mean of the middle two
    median = jax.jit(median_bandwidth)
    assert float(median(x)) == pytest.approx((np.sqrt(5) + np.sqrt(13)) / 2, rel=1e-6)
    # the first three points: distances 5, 1, √20, median √20
    assert float(median(x[:3])) == pytest.approx(np.sqrt(20.0), rel=1e-6)
    with pytest.raises(ValueError, match="at least 2"):
        median_bandwidth(x[:1])


def test_rbf_stein_terms_match_autodiff_and_the_ridge_solution():
    """⟨∇, K⟩_i = Σ_k ∂k(x_i, x_k)/∂x_k by autodiff, and Ĝ = −(K + ηI)⁻¹⟨∇, K⟩ (Eq. 25)."""
    x = jax.random.normal(jax.random.key(0), (7, 3))
    sigma = 1.3

    def k(a, b):
        return jnp.exp(-jnp.sum((a - b) ** 2) / (2 * sigma**2))

    @jax.jit
    def terms(x):
        pairs = jax.vmap(jax.vmap(k, (None, 0)), (0, None))(x, x)
        dk = jax.vmap(jax.vmap(jax.grad(k, argnums=1), (None, 0)), (0, None))(x, x)
        return (
            *rbf_kernel(x, sigma),
            pairs,
            dk.sum(axis=1),
            stein_score(x, eta=0.1, bandwidth=sigma),
        )

    kmat, grad_k, kmat_ad, grad_k_ad, g = terms(x)
    np.testing.assert_allclose(kmat, kmat_ad, rtol=1e-5)
    np.testing.assert_allclose(grad_k, grad_k_ad, rtol=1e-5, atol=1e-6)
    expected = -np.linalg.solve(np.asarray(kmat) + 0.1 * np.eye(7), np.asarray(grad_k))
    np.testing.assert_allclose(g, expected, rtol=1e-4, atol=1e-5)


def test_stein_estimator_recovers_a_gaussian_score():
    """On K = 400 draws of a correlated 2-D Gaussian (median heuristic, η = 0.01):

    * Stein's identity E_q[(x − μ)·∇log q(x)] = −d holds for the estimate: mean_k Ĝ_k·(x_k − x̄)
      = −d·0.995 on average over 40 seeds (sd 0.001, range 0.992–0.997), so we require
      [0.97, 1.01]·(−d): the estimator is slightly shrunk (kernel smoothing), never inflated;
    * the least-squares linear fit Ĝ ≈ A(x − x̄) recovers A = −Σ⁻¹: relative Frobenius error
      0.064 ± 0.039 over 40 seeds (max 0.19, the Monte Carlo noise of a 400-sample regression),
      so we require < 0.25 — an estimator off by a factor or with a sign error gives ≥ 1.
    """
    mean = np.array([1.0, -0.5])
    cov = np.array([[1.0, 0.6], [0.6, 0.8]])
    rng = np.random.default_rng(0)
    x = mean + rng.standard_normal((400, 2)) @ np.linalg.cholesky(cov).T
    g = np.asarray(stein_jit(jnp.asarray(x, jnp.float32), eta=0.01))
    xc = x - x.mean(0)
    identity = np.mean(np.sum(g * xc, axis=1)) / -2.0
    assert 0.97 <= identity <= 1.01, identity
    a = np.linalg.lstsq(xc, g, rcond=None)[0].T
    precision = np.linalg.inv(cov)
    assert np.linalg.norm(a + precision) / np.linalg.norm(precision) < 0.25


def test_stein_score_has_no_gradient():
    """Ĝ is held fixed in the meta-loss: no gradient flows through the estimator."""
    x = jax.random.normal(jax.random.key(1), (10, 2))
    grad, g = jax.jit(
        lambda y: (jax.grad(lambda z: jnp.sum(stein_score(z) * z))(y), stein_score(y))
    )(x)
    np.testing.assert_allclose(grad, g, rtol=1e-6)


# ---------------------------------------------------------------------------- the unrolled sampler
def eq7_step(recipe, theta, r, energy, grad, xi, h, temperature):
    """Gong et al.'s Eq. 7 written out by hand for one chain, with the elementwise derivatives
    by forward-mode autodiff:

        D = α f_Q² + f_D + c,   Γ_r = ∂f_Q/∂U · ∇Ũ + ∂(α f_Q² + f_D)/∂r,   Γ_θ = −∂f_Q/∂r,
        r' = r + h[−D r − f_Q ∇Ũ + T Γ_r] + √(2ThD) ξ,      (f_Q, f_D, D, Γ_r at (θ, r))
        θ' = θ + h[f_Q r' + T Γ_θ],                         (f_Q, Γ_θ at (θ, r'))
    """
    ones = jnp.ones_like(r)

    def f_q(rr, e):
        return recipe.f_q({"theta": theta, "r": rr}, Context(e, grad))

    def f_d(rr):
        return recipe.f_d({"theta": theta, "r": rr}, Context(energy, grad))

    fq, dfq_dr = jax.jvp(lambda rr: f_q(rr, energy), (r,), (ones,))
    _, dfq_du = jax.jvp(lambda e: f_q(r, e), (energy,), (jnp.ones_like(energy),))
    fd, dfd_dr = jax.jvp(f_d, (r,), (ones,))
    friction = recipe.alpha * fq * fq + fd + recipe.c
    gamma_r = dfq_du * grad + 2.0 * recipe.alpha * fq * dfq_dr + dfd_dr
    r_new = r + h * (-(fq * grad + friction * r) + temperature * gamma_r)
    r_new = r_new + jnp.sqrt(2.0 * temperature * h * friction) * xi
    fq_new, dfq_dr_new = jax.jvp(lambda rr: f_q(rr, energy), (r_new,), (ones,))
    theta_new = theta + h * (fq_new * r_new - temperature * dfq_dr_new)
    return theta_new, r_new


def test_trained_kernel_step_is_eq7():
    """The kernel the trainer differentiates through (the library's NNSGHMC under symplectic
    Euler) takes Gong et al.'s Eq. 7 step, written out by hand (same noise), also with a bounded
    f_Q and non-trivial networks."""
    meta = init_nnsghmc_params(5, (8,), final_scale=1.0)
    theta = jnp.array([0.3, -1.2, 2.0, 0.1])
    r = jnp.array([0.5, -0.4, 0.0, 1.1])
    mean, var = jnp.array([0.0, 1.0, -1.0, 0.5]), jnp.array([0.5, 1.0, 2.0, 0.3])
    energy = 0.5 * jnp.sum((theta - mean) ** 2 / var)
    grad = (theta - mean) / var + jnp.array([0.2, -0.1, 0.4, 0.0])
    key = jax.random.key(7)

    @eqx.filter_jit
    def both(kernel):
        state, _ = kernel.step(
            key, RecipeState({"theta": theta, "r": r}), lambda _: (energy, grad), 0.05, 1.0
        )
        xi = jax.random.normal(key, r.shape)  # the kernel's single draw for the r group
        th, rr = eq7_step(kernel.recipe, theta, r, energy, grad, xi, 0.05, 1.0)
        return state.z["theta"], state.z["r"], th, rr

    kernel = nnsghmc(  # a bounded f_Q: the unbounded one is the same without the tanh
        0.05,
        meta_params=meta,
        alpha=0.7,
        c=0.2,
        input_stats={
            "energy_mean": 0.4,
            "energy_sd": 2.0,
            "momentum_mean": -0.1,
            "momentum_sd": 0.7,
            "grad_mean": 0.3,
            "grad_sd": 1.5,
        },
        d_scale=2.0,
        q_bound=0.5,
    )
    theta_k, r_k, theta_t, r_t = both(kernel)
    np.testing.assert_allclose(r_t, r_k, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(theta_t, theta_k, rtol=1e-5, atol=1e-6)


def test_meta_gradient_flows_through_the_unrolled_chain_and_is_truncated():
    """Derivatives of the chain's positions through the unrolled steps (forward mode: one small
    compilation; stop_gradient zeroes tangents as it zeroes cotangents, so the Jacobian blocks
    tested are those of reverse mode):

    * in a random direction of the meta-parameters φ they are finite and non-zero in both windows;
    * with truncation, positions in the second window do not depend on anything before it:
      their sensitivity to the initial state is exactly 0 while the first window's is not;
      without truncation both are non-zero, and the first window is unchanged.
    """
    cfg = parse_config(nt.NNSGHMCConfig, TINY, "test")
    meta = nt.init_state(cfg).meta
    k, d, window = 4, cfg.dim, 3
    theta0 = jnp.linspace(-1.0, 1.0, k * d).reshape(k, d)
    mean, var = jnp.zeros((k, d)), jnp.full((k, d), 0.5)
    leaves, treedef = jax.tree.flatten(meta)
    keys = jax.random.split(jax.random.key(1), len(leaves))
    direction = jax.tree.unflatten(
        treedef, [jax.random.normal(kk, x.shape) for kk, x in zip(keys, leaves, strict=True)]
    )
    zero_meta = jax.tree.map(jnp.zeros_like, meta)

    @jax.jit
    def sensitivity(t_meta, t_theta0, truncate):
        def run(meta, t0):
            thetas, _, _ = nnsghmc_loss.unroll(
                nnsghmc_loss.make_kernel(meta, cfg),
                t0,
                jnp.zeros_like(t0),
                mean,
                var,
                jax.random.key(0),
                window=window,
                num_windows=2,
                grad_noise=1.0,
                truncate=truncate,
            )
            return thetas

        return jax.jvp(run, (meta, theta0), (t_meta, t_theta0))[1]

    def per_step(x):
        return jnp.max(jnp.abs(x), axis=(1, 2))

    d_meta = sensitivity(direction, jnp.zeros_like(theta0), True)
    assert bool(jnp.all(jnp.isfinite(d_meta))) and float(jnp.min(per_step(d_meta))) > 0

    cut = sensitivity(zero_meta, jnp.ones_like(theta0), True)
    full = sensitivity(zero_meta, jnp.ones_like(theta0), False)
    assert float(jnp.min(per_step(cut[:window]))) > 0
    assert float(jnp.max(jnp.abs(cut[window:]))) == 0.0
    assert float(jnp.min(per_step(full[window:]))) > 0
    np.testing.assert_array_equal(cut[:window], full[:window])


# ---------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"windw": 3}, "windw"),
        ({"window": 0}, "window"),
        ({"stein_eta": -1.0}, "stein_eta"),
        ({"replay_prob": 1.5}, "replay_prob"),
        ({"hidden": []}, "hidden"),
        ({"variance_range": [2.0, 1.0]}, "variance_range"),
        ({"in_chain_chains": 99}, "in_chain_chains"),
    ],
)
def test_bad_config_names_the_key(config, key, tmp_path):
    with pytest.raises(ValueError, match=key):
        nt.train(config, tmp_path, progress=False)


def test_shipped_config_is_valid():
    cfg = parse_config(nt.NNSGHMCConfig, load_config(None, "nnsghmc"), "test")
    assert cfg.seed == load_config(None, "nnsghmc")["seed"]


# ---------------------------------------------------------------------------- checkpoints
def test_resume_after_interrupt_is_bitwise_identical(tmp_path, monkeypatch):
    full = nt.train(TINY, tmp_path / "full", progress=False)
    assert full.iterations == 4 and len(full.history) == 4
    # the meta-gradient through the unrolled chains is finite and non-zero at every iteration
    assert all(np.isfinite(h["loss"]) and 0 < h["grad_norm"] < np.inf for h in full.history)

    # Ctrl-C during the 4th iteration: the 3rd is checkpointed, then the interrupt propagates
    real = nt.make_update

    def interrupted_update(cfg):
        update = real(cfg)
        calls = {"n": 0}

        def wrapped(state, iteration):
            calls["n"] += 1
            if calls["n"] == 4:
                raise KeyboardInterrupt
            return update(state, iteration)

        return wrapped

    monkeypatch.setattr(nt, "make_update", interrupted_update)
    with pytest.raises(KeyboardInterrupt):
        nt.train(TINY, tmp_path / "split", progress=False)
    monkeypatch.setattr(nt, "make_update", real)
    saved = json.loads((tmp_path / "split" / "history.json").read_text())
    assert saved["iteration"] == 3

    resumed = nt.train(TINY, tmp_path / "split", resume=True, progress=False)
    assert resumed.iterations == 4
    a = load_meta_params(full.meta_params_path)
    b = load_meta_params(resumed.meta_params_path)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in full.history]

    with pytest.raises(ValueError, match="dim"):  # a changed config cannot resume
        nt.train({**TINY, "dim": 4}, tmp_path / "split", resume=True, progress=False)


# ---------------------------------------------------------------------------- command line
def test_cli_meta_train_nnsghmc(tmp_path, capsys):
    lines = ['kernel = "nnsghmc"'] + [
        f"{k} = {json.dumps(v)}" for k, v in {**TINY, "iterations": 2}.items()
    ]
    (tmp_path / "tiny.toml").write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    code = main(
        ["meta-train", "nnsghmc", "--config", str(tmp_path / "tiny.toml"), "--out", str(out)]
    )
    assert code == 0
    captured = capsys.readouterr()
    # the first report shows the count only; the last, the rate (no ETA is left to show)
    assert "2/2 it" in captured.err and "it/s" in captured.err
    assert "nnsghmc: 2 iterations" in captured.out
    for name in ("nnsghmc.npz", "nnsghmc-hyper.json", "loss.png", "checkpoint.eqx"):
        assert (out / name).is_file(), name
    kernel = bdl.kernels.get("nnsghmc", meta_params=out / "nnsghmc.npz", step_size=0.01)
    assert kernel.meta_params["q"].sizes == (2, 10, 1)

    (tmp_path / "bad.toml").write_text('kernel = "nnsghmc"\nwindw = 3\n')
    code = main(
        ["meta-train", "nnsghmc", "--config", str(tmp_path / "bad.toml"), "--out", str(out)]
    )
    assert code == 2 and "windw" in capsys.readouterr().err


# ---------------------------------------------------------------------------- input normalisation
def test_pilot_run_measures_the_moments_of_the_raw_features():
    """From stationarity (θ ~ N(μ, σ²), r ~ N(0, I)), without gradient noise, an SGHMC-like
    sampler (zero output layers) keeps the raw features' moments: E[U/d] = ½, E[r] = 0,
    sd r = 1, E[∂U] = 0, sd ∂U = √(mean 1/σ²). Tolerances: 5 standard errors over the K
    independent chains (the pilot's steps are correlated, the chains are not)."""
    k, var = 4000, jnp.array([0.5, 2.0])
    key0, key1, key2 = jax.random.split(jax.random.key(11), 3)
    mean = jnp.broadcast_to(jnp.array([1.0, -2.0]), (k, 2))
    theta = mean + jnp.sqrt(var) * jax.random.normal(key0, (k, 2))
    r = jax.random.normal(key1, (k, 2))
    kernel = nnsghmc(0.01, alpha=1.0, meta_params=init_nnsghmc_params(0, final_scale=0.0))
    stats = nnsghmc_loss.pilot_run(
        kernel, theta, r, mean, jnp.broadcast_to(var, (k, 2)), key2, steps=5, grad_noise=0.0
    )
    se_u = 0.5 / np.sqrt(k)  # sd of U/d is √(d/2)/d = ½ for d = 2
    assert stats.energy_mean == pytest.approx(0.5, abs=5 * se_u)
    assert stats.energy_sd == pytest.approx(0.5, abs=5 * 0.5 / np.sqrt(2 * k))
    assert stats.momentum_mean == pytest.approx(0.0, abs=5 / np.sqrt(2 * k))
    assert stats.momentum_sd == pytest.approx(1.0, abs=5 / np.sqrt(4 * k))
    grad_sd = float(np.sqrt(np.mean(1.0 / np.asarray(var))))
    assert stats.grad_mean == pytest.approx(0.0, abs=5 * grad_sd / np.sqrt(2 * k))
    assert stats.grad_sd == pytest.approx(grad_sd, abs=5 * grad_sd / np.sqrt(4 * k))


def test_training_and_the_kernel_normalise_the_inputs_alike(tmp_path, monkeypatch):
    """The trainer's pilot statistics are written into nnsghmc.npz and read back by the kernel
    (from the path, and as the shipped default); the kernel loaded from the file and the kernel
    the trainer differentiates give the same D and Q, and both equal the networks applied to
    ((Ũ/d − m_U)/s_U, (r − m_r)/s_r, (∂Ũ − m_g)/s_g) computed here by hand."""
    cfg = parse_config(nt.NNSGHMCConfig, {**TINY, "iterations": 2}, "test")
    run = nt.train(cfg, tmp_path / "run", progress=False)
    stats = nt.pilot_statistics(cfg)
    assert stats.energy_sd > 0 and stats.momentum_sd > 0 and stats.grad_sd > 0
    assert stats != InputStatistics()  # a real pilot run, not the identity
    assert load_meta_metadata(run.meta_params_path)[HEADER_KEY] == stats.as_dict()

    deployed = bdl.kernels.get("nnsghmc", meta_params=run.meta_params_path, step_size=0.025)
    assert deployed.recipe.input_stats == InputStatistics(**stats.as_dict())
    monkeypatch.setattr(
        elementwise_mlp, "shipped_meta_params_path", lambda name: run.meta_params_path
    )
    assert (
        bdl.kernels.get("nnsghmc", step_size=0.025).recipe.input_stats
        == deployed.recipe.input_stats
    )
    meta = load_meta_params(run.meta_params_path)
    trained = nnsghmc_loss.make_kernel(meta, cfg, stats)

    d = cfg.dim
    theta = jnp.linspace(-2.0, 3.0, d)
    r = jnp.linspace(1.5, -1.0, d)
    energy, grad = jnp.asarray(7.3), jnp.linspace(-4.0, 5.0, d)
    z, ctx = {"theta": theta, "r": r}, Context(energy, grad)
    a, b = deployed.recipe.evaluate(z, ctx), trained.recipe.evaluate(z, ctx)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, atol=1e-7)

    s = stats
    u = (float(energy) / d - s.energy_mean) / s.energy_sd
    p = (np.asarray(r) - s.momentum_mean) / s.momentum_sd
    g = (np.asarray(grad) - s.grad_mean) / s.grad_sd
    net_q = meta["q"](jnp.stack([jnp.full(d, u), p], axis=-1))[..., 0]
    net_d = meta["d"](jnp.stack([jnp.full(d, u), p, g], axis=-1))[..., 0]
    bound = cfg.q_bound
    np.testing.assert_allclose(
        deployed.recipe.f_q(z, ctx), cfg.beta0 + bound * np.tanh(net_q / bound), rtol=1e-5
    )
    np.testing.assert_allclose(deployed.recipe.f_d(z, ctx), cfg.d_scale * np.abs(net_d), rtol=1e-5)
    # the statistics matter: without them the same networks give other outputs
    raw = bdl.kernels.get("nnsghmc", meta_params=meta, step_size=0.025)
    assert raw.recipe.input_stats == InputStatistics()
    assert not np.allclose(raw.recipe.f_q(z, ctx), deployed.recipe.f_q(z, ctx), rtol=1e-3)

"""``bdl.kernels.as_blackjax``: bdl's recipe kernels in a hand-written BlackJAX loop.

* Every recipe kernel, stepped through the adapter in a ``jax.lax.scan`` with BlackJAX's own
  gradient estimator and minibatches, samples the conjugate linear regression: mean and
  covariance against the closed form, with tolerances from ESS-based Monte Carlo errors plus the
  kernels' known bias at the steps used (a bound computed below).
* ``as_blackjax(get("sgld"))`` steps are ``blackjax.sgld``'s, bitwise.
* The adapter's step is the kernel's own step on Ũ = −log p̃ (signs and scale), for every
  registered recipe kernel, L2E included.
* Bad input is refused naming the argument; BlackJAX stays optional.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from bad_input import case, check
from scipy.linalg import solve_discrete_lyapunov
from stat_utils import mean_and_mcse, z_threshold

import bdl
from bdl.kernels import BlackJAXState, as_blackjax

blackjax = pytest.importorskip("blackjax")

ROOT = Path(__file__).resolve().parent.parent

# The conjugate regression y = Xw + ε, ε ~ N(0, σ²), w ~ N(0, I): posterior N(μ, Σ) with
# Σ = (XᵀX/σ² + I)⁻¹, μ = ΣXᵀy/σ². Minibatches of B examples drawn with replacement.
N, D, SIGMA, B = 100, 2, 2.0, 50
_rng = np.random.default_rng(0)
X = _rng.normal(size=(N, D))
Y = X @ np.array([1.0, -0.5]) + SIGMA * _rng.normal(size=N)
PRECISION = X.T @ X / SIGMA**2 + np.eye(D)
COV = np.linalg.inv(PRECISION)
MEAN = COV @ X.T @ Y / SIGMA**2
X32, Y32 = jnp.asarray(X, jnp.float32), jnp.asarray(Y, jnp.float32)


def log_prior(theta):
    return -0.5 * jnp.sum(theta["w"] ** 2)


def log_likelihood(theta, datum):
    x, y = datum
    return -0.5 * ((y - x @ theta["w"]) / SIGMA) ** 2


GRAD = blackjax.sgmcmc.gradients.grad_estimator(log_prior, log_likelihood, N)
LOGDENSITY = blackjax.sgmcmc.gradients.logdensity_estimator(log_prior, log_likelihood, N)


def minibatch_noise() -> np.ndarray:
    """S = Cov[∇Ũ_B] of the B-example estimator, averaged over the posterior (it depends on θ
    through the residuals): (n²/B)·Cov_i[∇U_i(θ)] with ∇U_i the per-example energy gradient."""
    thetas = np.random.default_rng(1).multivariate_normal(MEAN, COV, size=2000)
    per_example = [-(X * (Y - X @ t)[:, None]) / SIGMA**2 + t / N for t in thetas]
    return np.mean([np.cov(g.T, bias=True) for g in per_example], axis=0) * N**2 / B


def sgld_covariance(h: float) -> np.ndarray:
    """The stationary covariance of SGLD's discrete chain, θ' = θ − h(PΔθ + ν) + √(2h)ξ with
    Cov ν = S: Σ_h = AΣ_hAᵀ + 2hI + h²S, A = I − hP."""
    a = np.eye(D) - h * PRECISION
    return solve_discrete_lyapunov(a, 2 * h * np.eye(D) + h * h * minibatch_noise())


def sghmc_covariance(h: float, friction: float) -> np.ndarray:
    """The same for SGHMC's symplectic Euler, r' = (1 − hγ)r − h(PΔθ + ν) + √(2hγ)ξ,
    θ' = θ + hr'; the θ block."""
    eye, zero = np.eye(D), np.zeros((D, D))
    momentum = np.hstack([-h * PRECISION, (1 - h * friction) * eye])
    a = np.vstack([np.hstack([eye, zero]) + h * momentum, momentum])
    kick = np.vstack([h * eye, eye])  # how the momentum's noise reaches (θ, r)
    noise = kick @ (2 * h * friction * eye + h * h * minibatch_noise()) @ kick.T
    return solve_discrete_lyapunov(a, noise)[:D, :D]


# Allowed bias, relative to the posterior sd (means) and to σ_iσ_j (covariances). The bias of
# SGLD at h = 2e-4 and of SGHMC at h = 2.5e-3, γ = 10 — minibatch noise and discretisation to
# first order, from the Lyapunov equations above — is 0.9 % of the variances
# (test_bias_allowance_covers_the_first_order_bias holds it under half the allowance), against a
# Monte Carlo tolerance of ≈ 11 % here (4.1 × 2.7 %). The other kernels, measured with
# 64 chains × 40,000 steps (covariance ratios, ± 1.3 %): SGNHT 0.994–0.996 (its thermostat absorbs
# the gradient noise), Kinetic-L2E 1.008–1.009, pSGLD at α = 0.9999 1.012–1.014, NNSGHMC with
# full-data gradients 0.994–1.002. Linear dynamics leave the mean unbiased; 1 % of an sd covers
# the nonlinear kernels'. Not run here: pSGLD at its default α = 0.99, whose statistic follows
# the chain's recent gradients (variance 14 % too large here, mean unbiased: docs/kernels/psgld.md),
# NNSGHMC under minibatches (variance 3–6 % too large at h and h/2: its D reads the noisy Ũ and
# ∇Ũ, docs/kernels/nnsghmc.md) and L2E, whose learned field is not a gradient: the adapter's
# steps are checked against their own below.
MEAN_BIAS, COV_BIAS = 0.01, 0.02
CASES = {  # name: (kernel, step size, temperature, minibatch size)
    "sgld": (bdl.kernels.sgld(2e-4), 2e-4, 1.0, B),
    "psgld": (bdl.kernels.psgld(2e-5, alpha=0.9999), 2e-5, 1.0, B),
    "sghmc": (bdl.kernels.sghmc(2.5e-3, friction=10.0), 2.5e-3, 1.0, B),
    "sgnht": (bdl.kernels.sgnht(2.5e-3, diffusion=10.0), 2.5e-3, 1.0, B),
    "sgnht-cold": (bdl.kernels.sgnht(2.5e-3, diffusion=10.0), 2.5e-3, 0.5, B),
    "nnsghmc": (bdl.kernels.get("nnsghmc", step_size=2.5e-3, c=10.0), 2.5e-3, 1.0, N),
    "kinetic-l2e": (
        bdl.kernels.get("kinetic-l2e", step_size=2.5e-3, friction=10.0),
        2.5e-3,
        1.0,
        B,
    ),
}
THRESHOLD = z_threshold(5 * len(CASES))  # 2 means and 3 covariances per case


def blackjax_loop(algorithm, step_size, temperature, batch, *, chains, steps, burn_in, seed):
    """The chains of a BlackJAX-style loop: a minibatch and a step per key, every 10th position
    kept after burn-in; (chains, draws, D) as float64."""

    def chain(key):
        init_key, key = jax.random.split(key)
        state = algorithm.init({"w": jnp.zeros(D)}, init_key)

        def one_step(state, key):
            batch_key, step_key = jax.random.split(key)
            index = jax.random.randint(batch_key, (batch,), 0, N) if batch < N else jnp.arange(N)
            state = algorithm.step(
                step_key, state, (X32[index], Y32[index]), step_size, temperature
            )
            return state, None

        def ten_steps(state, keys):
            state, _ = jax.lax.scan(one_step, state, keys)
            position = state.position if isinstance(state, BlackJAXState) else state
            return state, position["w"]

        keys = jax.random.split(key, burn_in + steps).reshape((burn_in + steps) // 10, 10)
        return jax.lax.scan(ten_steps, state, keys)[1][burn_in // 10 :]

    keys = jax.random.split(jax.random.key(seed), chains)
    return np.asarray(jax.jit(jax.vmap(chain))(keys), np.float64)


def test_bias_allowance_covers_the_first_order_bias():
    for covariance in (sgld_covariance(2e-4), sghmc_covariance(2.5e-3, 10.0)):
        relative = np.abs(covariance - COV) / np.sqrt(np.outer(np.diag(COV), np.diag(COV)))
        assert relative.max() < COV_BIAS / 2, relative


@pytest.mark.parametrize("name", list(CASES))
def test_every_recipe_kernel_samples_the_conjugate_regression(name):
    kernel, step_size, temperature, batch = CASES[name]
    algorithm = as_blackjax(kernel, GRAD, N, logdensity_estimator=LOGDENSITY)
    draws = blackjax_loop(
        algorithm,
        step_size,
        temperature,
        batch,
        chains=32,
        steps=20_000,
        burn_in=2_000,
        seed=list(CASES).index(name),
    )
    cov = temperature * COV
    sd = np.sqrt(np.diag(cov))
    failures = []
    for i in range(D):
        m, se, ess = mean_and_mcse(draws[..., i])
        assert ess > 1000, f"{name}: too few effective draws of w[{i}] ({ess:.0f})"
        if abs(m - MEAN[i]) > THRESHOLD * se + MEAN_BIAS * sd[i]:
            failures.append(f"mean w[{i}] {m:.4f} vs {MEAN[i]:.4f} (MCSE {se:.4f})")
        for j in range(i, D):
            product = (draws[..., i] - MEAN[i]) * (draws[..., j] - MEAN[j])
            m, se, _ = mean_and_mcse(product)
            if abs(m - cov[i, j]) > THRESHOLD * se + COV_BIAS * sd[i] * sd[j]:
                failures.append(f"cov[{i},{j}] {m:.5f} vs {cov[i, j]:.5f} (MCSE {se:.5f})")
    assert not failures, f"{name}: {failures}"


def test_sgld_steps_are_blackjax_sgld_steps_bitwise():
    """Same key, step size, temperature and minibatches: the same 300 positions, bit for bit
    (one Gaussian draw over the flattened position in both; θ + h·∇log p̃ + √(2Th)·ξ)."""
    ours = as_blackjax(bdl.kernels.get("sgld"), GRAD, N)
    theirs = blackjax.sgld(GRAD)
    position = {"w": jnp.asarray([0.3, -0.2])}

    def run(algorithm, step_size, temperature):
        def one_step(state, key):
            batch_key, step_key = jax.random.split(key)
            index = jax.random.randint(batch_key, (B,), 0, N)
            state = algorithm.step(
                step_key, state, (X32[index], Y32[index]), step_size, temperature
            )
            return state, state["w"]

        keys = jax.random.split(jax.random.key(4), 300)
        return np.asarray(jax.jit(lambda: jax.lax.scan(one_step, position, keys)[1])())

    for step_size, temperature in ((1e-3, 1.0), (3e-4, 0.5)):
        np.testing.assert_array_equal(
            run(ours, step_size, temperature), run(theirs, step_size, temperature)
        )
    assert ours.init(position) is position  # SGLD's state is the position, as BlackJAX's


@pytest.mark.parametrize(
    "name", ["sgld", "psgld", "sghmc", "sgnht", "nnsghmc", "l2e", "kinetic-l2e"]
)
def test_steps_are_the_kernels_own_steps_on_the_energy(name):
    """Through the adapter, a kernel makes the steps it makes on Ũ = −log p̃ and ∇Ũ (bdl's energy
    at full-data scale) when bound to n: the signs and the data size are right, for every
    registered recipe kernel."""
    kernel = bdl.kernels.get(name, step_size=2e-3) if name != "psgld" else bdl.kernels.get(name)
    algorithm = as_blackjax(kernel, GRAD, N, logdensity_estimator=LOGDENSITY)
    bound = kernel.bind(SimpleNamespace(n=N))
    start = {"w": jnp.asarray([0.5, -0.1])}
    keys = jax.random.split(jax.random.key(2), 40)
    batches = [np.random.default_rng(k).integers(0, N, B) for k in range(40)]

    state = algorithm.init(start)
    direct = bound.init(start, jax.random.key(0))
    step = jax.jit(algorithm.step)
    for key, index in zip(keys, batches, strict=True):
        batch = (X32[index], Y32[index])
        state = step(key, state, batch, 2e-5 if name == "psgld" else 2e-3)
        energy = jax.value_and_grad(lambda theta, b=batch: -LOGDENSITY(theta, b))
        direct, _ = bound.step(key, direct, energy, 2e-5 if name == "psgld" else 2e-3, 1.0)
    position = state.position if isinstance(state, BlackJAXState) else state
    np.testing.assert_allclose(position["w"], direct.z["theta"]["w"], rtol=1e-5, atol=1e-7)
    if isinstance(state, BlackJAXState):
        assert sorted(state.auxiliary) == sorted(g for g in direct.z if g != "theta")
        for ours, theirs in zip(
            jax.tree.leaves((state.auxiliary, state.history)),
            jax.tree.leaves(({g: v for g, v in direct.z.items() if g != "theta"}, direct.history)),
            strict=True,
        ):
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-7)


def test_step_size_defaults_to_the_kernels_own():
    kernel = bdl.kernels.sghmc(learning_rate=0.01, momentum=0.9)  # h = √(ℓ/n) when bound
    algorithm = as_blackjax(kernel, GRAD, N)
    state = algorithm.init({"w": jnp.zeros(D)})
    batch = (X32[:B], Y32[:B])
    key = jax.random.key(1)
    own = algorithm.step(key, state, batch)
    given = algorithm.step(key, state, batch, float(np.sqrt(0.01 / N)))
    np.testing.assert_allclose(own.position["w"], given.position["w"], rtol=1e-6)


def test_states_and_keys():
    sgnht = as_blackjax(bdl.kernels.get("sgnht"), GRAD, N)
    state = sgnht.init({"w": jnp.zeros(D)})
    assert isinstance(state, BlackJAXState) and sorted(state.auxiliary) == ["r", "xi"]
    sampled = as_blackjax(bdl.kernels.sghmc(1e-3, init_momentum="sample"), GRAD, N)
    with pytest.raises(ValueError, match="rng_key"):
        sampled.init({"w": jnp.zeros(D)})
    one = sampled.init({"w": jnp.zeros(D)}, jax.random.key(0)).auxiliary["p"]["w"]
    two = sampled.init({"w": jnp.zeros(D)}, jax.random.key(1)).auxiliary["p"]["w"]
    assert not np.array_equal(one, two)
    psgld = as_blackjax(bdl.kernels.get("psgld"), GRAD, N)
    with pytest.raises(ValueError, match="BlackJAXState"):
        psgld.step(jax.random.key(0), {"w": jnp.zeros(D)}, (X32[:B], Y32[:B]), 1e-5)


def test_errors_at_the_first_step_name_the_argument():
    batch, key = (X32[:B], Y32[:B]), jax.random.key(0)
    nnsghmc = as_blackjax(bdl.kernels.get("nnsghmc"), GRAD, N)
    with pytest.raises(ValueError, match="logdensity_estimator"):
        nnsghmc.init({"w": jnp.zeros(D)})
    adapted = as_blackjax(bdl.kernels.get("sgld"), GRAD, N)  # no step size of its own
    with pytest.raises(ValueError, match="pass step_size to each step"):
        adapted.step(key, {"w": jnp.zeros(D)}, batch)
    scheduled = as_blackjax(bdl.kernels.sgld(lambda t: 1e-3 / (1.0 + t)), GRAD, N)
    with pytest.raises(ValueError, match="step_size=h_t"):
        scheduled.step(key, {"w": jnp.zeros(D)}, batch)
    with pytest.raises(ValueError, match="step_size"):
        adapted.step(key, {"w": jnp.zeros(D)}, batch, -1e-3)
    with pytest.raises(ValueError, match="temperature"):
        adapted.step(key, {"w": jnp.zeros(D)}, batch, 1e-3, -1.0)


@pytest.fixture(scope="module")
def shared():
    return SimpleNamespace(sgld=bdl.kernels.sgld(1e-3))


@pytest.mark.parametrize(
    "call, error, fragment",
    [
        case("not a kernel", lambda s: as_blackjax("sgld", GRAD, N), TypeError, "bdl kernel"),
        case(
            "wrapper",
            lambda s: as_blackjax(bdl.kernels.get("cyclical"), GRAD, N),
            ValueError,
            "kernel.recipe_kernel()",
        ),
        case(
            "estimator",
            lambda s: as_blackjax(s.sgld, None, N),
            TypeError,
            "grad_estimator must be a function",
        ),
        case(
            "logdensity",
            lambda s: as_blackjax(s.sgld, GRAD, N, logdensity_estimator=1.0),
            TypeError,
            "logdensity_estimator must be a function",
        ),
        case("data size", lambda s: as_blackjax(s.sgld, GRAD, 0), ValueError, "data_size"),
        case("data size float", lambda s: as_blackjax(s.sgld, GRAD, 1e2), ValueError, "data_size"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(call, error, fragment, shared):
    check(call, error, fragment, shared)


def test_bdl_imports_without_blackjax():
    """BlackJAX is optional: bdl imports without it, and as_blackjax says how to install it."""
    code = (
        "import sys; sys.modules['blackjax'] = None\n"
        "import bdl, bdl.kernels\n"
        "try:\n"
        "    bdl.kernels.as_blackjax(bdl.kernels.get('sgld'), lambda p, b: p, 10)\n"
        "except ImportError as e:\n"
        "    print('refused:', e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout
    assert "refused: as_blackjax needs BlackJAX" in out and "pip install" in out, out


def test_the_documented_example_runs():
    from test_docs_examples import python_blocks, run_block

    blocks = [
        code
        for _, code, runnable in python_blocks((ROOT / "docs/blackjax.md").read_text())
        if runnable
    ]
    assert blocks
    for code in blocks:
        run_block(code, "docs/blackjax.md")

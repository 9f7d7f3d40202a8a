"""``bdl.Bounded``: bounds that read other parameters, as Stan's ``real<lower=L, upper=U>`` with
L and U expressions of earlier parameters.

The compiled energy of a GARCH(1, 1) model (``beta1 ∈ (0, 1 − alpha1)``) equals a hand
transcription of Stan's target, log-Jacobians included; NUTS on the compiled potential draws
the closed-form marginals of a uniform density on a triangle and of a prior statement whose
bound depends on a parameter; draws handed to users are constrained and inside their bounds.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from numpyro.distributions import constraints
from stat_utils import mean_and_mcse, z_threshold

import bdl

# ------------------------------------------------------------------ GARCH(1, 1)
SIGMA1 = 1.0


def _garch_data(n: int = 80, seed: int = 0) -> np.ndarray:
    """y_t ~ N(μ, σ_t²), σ_t² = α₀ + α₁ (y_{t−1} − μ)² + β₁ σ_{t−1}², σ₁ = SIGMA1."""
    rng = np.random.default_rng(seed)
    mu, alpha0, alpha1, beta1 = 0.5, 0.2, 0.3, 0.5
    y, sigma = np.empty(n), SIGMA1
    for t in range(n):
        if t:
            sigma = math.sqrt(alpha0 + alpha1 * (y[t - 1] - mu) ** 2 + beta1 * sigma**2)
        y[t] = rng.normal(mu, sigma)
    return y.astype(np.float32)


def _garch_model(y: np.ndarray) -> bdl.Model:
    """Stan's garch11 (posteriordb): mu, alpha0 > 0 flat; alpha1 ∈ (0, 1);
    beta1 ∈ (0, 1 − alpha1), flat; y ~ normal(mu, sigma). The network reads the time index
    and returns (μ, σ_t), the likelihood N(y_t; μ, σ_t²)."""
    series = jnp.asarray(y)

    def garch(p, x):
        def step(sigma, y_prev):
            s = jnp.sqrt(
                p["alpha0"] + p["alpha1"] * (y_prev - p["mu"]) ** 2 + p["beta1"] * sigma**2
            )
            return s, s

        _, rest = jax.lax.scan(step, jnp.asarray(SIGMA1), series[:-1])
        sigma = jnp.concatenate([jnp.full((1,), SIGMA1), rest])[x[:, 0].astype(jnp.int32)]
        return jnp.stack([jnp.broadcast_to(p["mu"], sigma.shape), sigma], axis=-1)

    prior = bdl.ByPath(
        {
            "mu": dist.ImproperUniform(constraints.real, (), ()),
            "alpha0": dist.ImproperUniform(constraints.positive, (), ()),
            "alpha1": bdl.Bounded(low=0.0, high=1.0),
            "beta1": bdl.Bounded(low=0.0, high=lambda p: 1.0 - p["alpha1"]),
        }
    )
    params = {k: jnp.asarray(v) for k, v in (("mu", 0.0), ("alpha0", 1.0), ("alpha1", 0.2))}
    return bdl.Model(
        garch,
        bdl.Likelihood.from_numpyro(dist.Normal, outputs={"scale": None}),
        prior=prior,
        params={**params, "beta1": jnp.asarray(0.3)},
        name="garch11",
    )


def _stan_target(y: np.ndarray, u: dict[str, float]) -> float:
    """Stan's log density of garch11 at the unconstrained u, transcribed by hand (float64):
    the constraining transforms, their log-Jacobians, and Σ_t normal_lpdf(y_t | μ, σ_t)."""
    sigmoid = 1 / (1 + math.exp(-u["alpha1"]))
    alpha1 = sigmoid  # lower 0, upper 1
    jac = math.log(sigmoid) + math.log(1 - sigmoid)
    alpha0 = math.exp(u["alpha0"])  # lower 0
    jac += u["alpha0"]
    s = 1 / (1 + math.exp(-u["beta1"]))
    beta1 = (1 - alpha1) * s  # lower 0, upper 1 − alpha1
    jac += math.log(1 - alpha1) + math.log(s) + math.log(1 - s)
    mu = u["mu"]
    lp, sigma = 0.0, SIGMA1
    for t, yt in enumerate(np.asarray(y, np.float64)):
        if t:
            sigma = math.sqrt(alpha0 + alpha1 * (y[t - 1] - mu) ** 2 + beta1 * sigma**2)
        lp += -0.5 * math.log(2 * math.pi) - math.log(sigma) - 0.5 * ((yt - mu) / sigma) ** 2
    return lp + jac


def test_garch_energy_is_stans_target():
    y = _garch_data()
    x = np.arange(len(y), dtype=np.float32)[:, None]
    compiled = bdl.compile(_garch_model(y), (x, y))
    rng = np.random.default_rng(1)
    for _ in range(4):
        names = ["mu", "alpha0", "alpha1", "beta1"]
        u = {k: float(v) for k, v in zip(names, rng.normal(size=4), strict=True)}
        position = {"net": {k: jnp.asarray(v, jnp.float32) for k, v in u.items()}}
        got = -float(compiled.energy(position))
        assert got == pytest.approx(_stan_target(y, u), rel=1e-5, abs=1e-3)
    net, _ = compiled.constrain(compiled.initial_position)  # the declared start, constrained
    assert float(net["beta1"]) == pytest.approx(0.3, rel=1e-6)
    back = compiled.unconstrain(net)["net"]["beta1"]
    assert float(back) == pytest.approx(float(compiled.initial_position["net"]["beta1"]))


def test_draws_are_constrained_and_inside_their_bounds():
    """SGHMC's named draws, and prior starts, satisfy 0 < beta1 < 1 − alpha1."""
    y = _garch_data(40)
    x = np.arange(len(y), dtype=np.float32)[:, None]
    compiled = bdl.compile(_garch_model(y), (x, y))
    samples = bdl.sample(
        compiled,
        bdl.kernels.get("sghmc", step_size=5e-3, friction=10.0),
        num_steps=400,
        burn_in=100,
        thin=10,
        num_chains=2,
        init="fixed",
        seed=0,
    )
    named = samples.named(compiled)
    a1, b1 = named["net/alpha1"], named["net/beta1"]
    assert a1.shape == (2, 30)
    assert np.all((a1 > 0) & (a1 < 1)) and np.all((b1 > 0) & (b1 < 1 - a1))
    u = np.asarray(samples.positions["net"]["beta1"])  # the sampled coordinate is not β₁
    np.testing.assert_allclose(b1, (1 - a1) / (1 + np.exp(-u)), rtol=1e-5)


# ------------------------------------------------------------------ the triangle, by NUTS
def _triangle_model() -> bdl.Model:
    """(a, b) flat on {a, b > 0, a + b < 1}; c flat on (0, 1) and d ~ uniform(0, 1 − c)
    (Stan: ``d ~ uniform(0, 1 - c)``, which adds −log(1 − c)); w, the only weight the data
    read, is independent of them."""
    prior = bdl.ByPath(
        {
            "a": bdl.Bounded(low=0.0, high=1.0),
            "b": bdl.Bounded(low=0.0, high=lambda p: 1.0 - p["a"]),
            "c": bdl.Bounded(low=0.0, high=1.0),
            "d": bdl.Bounded(
                lambda p: dist.Uniform(0.0, 1.0 - p["c"]), low=0.0, high=lambda p: 1.0 - p["c"]
            ),
        },
        default=bdl.Normal(1.0),
    )
    params = {k: jnp.asarray(0.3) for k in "abcd"}
    return bdl.Model(
        lambda p, x: x @ p["w"],
        bdl.Gaussian(1.0),
        prior=prior,
        params={**params, "w": jnp.zeros(1)},
        name="triangle",
    )


def test_nuts_draws_the_triangles_closed_form_marginals(tmp_path, monkeypatch):
    """Uniform on the triangle: a, b ~ Beta(1, 2) (mean 1/3, sd √(1/18)). c ~ U(0, 1) and
    d | c ~ U(0, 1 − c): E d = 1/4, sd d = √(7/144). Means and sds within MCSE-based z."""
    monkeypatch.setenv("BDL_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20, 1)).astype(np.float32)
    y = (0.5 * x[:, 0] + rng.normal(size=20)).astype(np.float32)
    ref = bdl.reference(_triangle_model(), (x, y), num_warmup=300, num_samples=1000)
    want = {
        "a": (1 / 3, math.sqrt(1 / 18)),
        "b": (1 / 3, math.sqrt(1 / 18)),
        "c": (1 / 2, math.sqrt(1 / 12)),
        "d": (1 / 4, math.sqrt(7 / 144)),
    }
    threshold = z_threshold(2 * len(want))
    for name, (mean, sd) in want.items():
        draws = np.asarray(ref[f"net/{name}"], np.float64)
        m, se, ess = mean_and_mcse(draws)
        assert ess > 800
        assert abs(m - mean) / se < threshold, (name, m, mean, se)
        # the variance as the mean of (x − mean)², its own MCSE
        v, se_v, _ = mean_and_mcse((draws - mean) ** 2)
        assert abs(v - sd**2) / se_v < threshold, (name, v, sd**2, se_v)
    a, b = np.asarray(ref["net/a"]), np.asarray(ref["net/b"])
    assert np.all((a > 0) & (b > 0) & (a + b < 1))


def test_prior_starts_are_inside_the_bounds():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10, 1)).astype(np.float32)
    compiled = bdl.compile(_triangle_model(), (x, x[:, 0]))
    starts = compiled.init_positions(jax.random.key(0), 64, "prior")
    net = jax.vmap(lambda p: compiled.constrain(p)[0])(starts)
    a, b, c, d = (np.asarray(net[k]) for k in "abcd")
    assert np.all((a > 0) & (b > 0) & (a + b < 1) & (d < 1 - c) & (d > 0))
    assert np.all(np.isfinite(np.asarray(compiled.log_prior(jax.tree.map(lambda s: s[0], starts)))))


# ------------------------------------------------------------------ one bound, other priors
def test_one_sided_bounds_and_a_prior_by_value():
    """x = low(p) + e^u with log|dx/du| = u; x = high(p) − e^u likewise; the prior's density
    is read at x."""
    prior = bdl.ByPath(
        {
            "m": bdl.Normal(1.0),
            "lo": bdl.Bounded(dist.Normal(0.0, 2.0), low=lambda p: p["m"]),
            "hi": bdl.Bounded(bdl.Laplace(1.0), high=lambda p: p["m"] + 1.0),
        }
    )
    model = bdl.Model(
        lambda p, x: x @ jnp.stack([p["m"], p["lo"], p["hi"]]),
        bdl.Gaussian(1.0),
        prior=prior,
        params={"m": jnp.asarray(0.0), "lo": jnp.asarray(1.0), "hi": jnp.asarray(0.0)},
    )
    x = np.eye(3, dtype=np.float32)
    compiled = bdl.compile(model, (x, np.zeros(3, np.float32)))
    u = {"m": 0.4, "lo": -0.3, "hi": 0.2}
    position = {"net": {k: jnp.asarray(v) for k, v in u.items()}}
    lo, hi = 0.4 + math.exp(-0.3), 1.4 - math.exp(0.2)
    want = (
        float(dist.Normal(0.0, 1.0).log_prob(0.4))
        + float(dist.Normal(0.0, 2.0).log_prob(lo))
        - 0.3
        + float(dist.Laplace(0.0, 1.0).log_prob(hi))
        + 0.2
    )
    assert float(compiled.log_prior(position)) == pytest.approx(want, rel=1e-5)
    net, _ = compiled.constrain(position)
    assert float(net["lo"]) == pytest.approx(lo) and float(net["hi"]) == pytest.approx(hi)
    # a flat prior with one bound is improper: "auto" starts from the declared values instead
    flat = bdl.Model(
        lambda p, x: x @ p["w"],
        bdl.Gaussian(1.0),
        prior=bdl.Bounded(low=0.0),
        params={"w": jnp.ones(3)},
    )
    compiled = bdl.compile(flat, (x, np.zeros(3, np.float32)))
    with pytest.raises(ValueError, match="proper prior"):
        compiled.init_positions(jax.random.key(0), 2, "prior")
    assert compiled.init_positions(jax.random.key(0), 2, "auto")["net"]["w"].shape == (2, 3)


def test_vector_bounds_per_entry():
    """An array bound applies per entry; a bound function may return one value per entry."""
    prior = bdl.ByPath(
        {
            "s": bdl.Bounded(low=0.0, high=jnp.array([1.0, 2.0])),
            "t": bdl.Bounded(low=lambda p: p["s"], high=lambda p: p["s"] + 1.0),
        }
    )
    model = bdl.Model(
        lambda p, x: x @ (p["s"] + p["t"]),
        bdl.Gaussian(1.0),
        prior=prior,
        params={"s": jnp.array([0.5, 1.0]), "t": jnp.array([1.0, 1.5])},
    )
    x = np.eye(2, dtype=np.float32)
    compiled = bdl.compile(model, (x, np.zeros(2, np.float32)))
    net, _ = compiled.constrain({"net": {"s": jnp.array([3.0, -3.0]), "t": jnp.zeros(2)}})
    s = np.array([1.0, 2.0]) / (1 + np.exp(-np.array([3.0, -3.0])))
    np.testing.assert_allclose(net["s"], s, rtol=1e-6)
    np.testing.assert_allclose(net["t"], s + 0.5, rtol=1e-6)


# ------------------------------------------------------------------ bad input
def _compile_with(prior) -> None:
    model = bdl.Model(
        lambda p, x: x[:, 0] * p["a"] + x[:, 1] * p["b"],
        bdl.Gaussian(1.0),
        prior=prior,
        params={"a": jnp.asarray(0.3), "b": jnp.asarray(0.3)},
    )
    x = np.eye(2, dtype=np.float32)
    bdl.compile(model, (x, np.zeros(2, np.float32)))


@pytest.mark.parametrize(
    "rules, fragment",
    [
        (
            {"a": bdl.Bounded(high=lambda p: 1 - p["b"]), "b": bdl.Bounded(high=lambda p: p["a"])},
            "read each other in a cycle",
        ),
        ({"a": bdl.Bounded(high=lambda p: p["c"]), "b": bdl.Normal()}, "'c' is no parameter"),
        ({"a": bdl.Bounded(high=lambda p: p["a"]), "b": bdl.Normal()}, "reads net/a itself"),
        (
            {"a": bdl.Bounded(high=lambda p: jnp.ones(3)), "b": bdl.Normal()},
            r"high=...\) has shape \(3,\)",
        ),
        (
            {"a": bdl.Bounded(lambda p: 2.0, low=0.0, high=1.0), "b": bdl.Normal()},
            "must return a univariate NumPyro distribution",
        ),
    ],
)
def test_bad_bounds_are_refused_at_compile_time(rules, fragment):
    with pytest.raises(ValueError, match=fragment):
        _compile_with(bdl.ByPath(rules))


@pytest.mark.parametrize(
    "make, error, fragment",
    [
        (lambda: bdl.Bounded(dist.Normal(0.0, 1.0)), ValueError, "needs low=, high= or both"),
        (lambda: bdl.Bounded(low=1.0, high=0.0), ValueError, "low must be below high"),
        (lambda: bdl.Bounded(low=math.inf), ValueError, "leave low out"),
        (lambda: bdl.Bounded(low="0"), TypeError, r"low=...\) must be a number"),
        (lambda: bdl.Bounded(dist.Dirichlet(jnp.ones(2)), low=0.0), ValueError, "univariate"),
        (lambda: bdl.Bounded(3.0, low=0.0), TypeError, r"prior=...\) must be a NumPyro"),
        (lambda: bdl.Bounded(bdl.ByPath({}), low=0.0), TypeError, "density of each entry"),
    ],
)
def test_bad_declarations_are_refused(make, error, fragment):
    with pytest.raises(error, match=fragment):
        make()

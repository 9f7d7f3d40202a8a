"""The posteriordb suite's declarations against their Stan programs.

Each test transcribes a Stan program's target by hand — log density up to a constant, in the
unconstrained space, the Jacobian log x of every ``<lower=0>`` parameter included — in float64
NumPy and SciPy (the ODEs by SciPy's own solvers at tolerances far below the models'), and
checks that the compiled energy U = −log density differs from it by one constant at five points:
Stan reference draws, and for ``mcycle_gp-accel_gp`` (whose draws are not vendored) points
around its reference means. The tolerance is float32 rounding of the energy's sum: 2e-6 of the
sum of the absolute log-likelihood and log-prior terms, plus the ODE solver's error where there
is one.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from scipy import integrate, linalg, stats

import bdl
from bdl.validation import posteriordb

POINTS = 5
ROUNDING = 2e-6


def points(posterior: posteriordb.Posterior) -> dict[str, np.ndarray]:
    """Five points by Stan's parameter names, ``(POINTS, *shape)``, float64."""
    if posterior.has_draws:
        draws = posterior.draws()
        chains = np.arange(POINTS) % draws[next(iter(draws))].shape[0]
        index = np.array([0, 137, 402, 777, 999])
        return {k: v[chains, index].astype(np.float64) for k, v in draws.items()}
    rng = np.random.default_rng(0)
    out = {}
    for k, m in posterior.moments().items():
        z = rng.normal(size=(POINTS, *np.shape(m["mean"])))
        value = m["mean"] + 0.1 * m["sd"] * z
        positive = k.startswith(("sdgp", "lscale"))
        out[k] = np.abs(value) if positive else value
    return out


def compiled_energies(posterior: posteriordb.Posterior, values: dict[str, np.ndarray], build):
    if build is None:
        model, data = posterior.spec().model, posterior.spec().data
    else:  # an ODE posterior, solved far below the program's tolerances in float64
        model, data = build(posterior.data(), rtol=1e-10, atol=1e-10, max_steps=100_000)
    # the energy is what is compared; compile's gradient check is the suite's to run
    compiled = bdl.compile(model, data, check_gradient=False)
    with jax.enable_x64(build is not None):
        positions = posterior.positions(compiled, values)
        if build is not None:
            positions = jax.tree.map(lambda a: np.asarray(a, np.float64), positions)
            values64 = {k: np.asarray(v, np.float64) for k, v in values.items()}
            net = {p[4:]: values64[s] for s, p in posterior.parameters.items() if p[:4] == "net/"}
            positions["net"] = jax.tree.map(np.log, net)  # every ODE parameter is positive
            positions["lik"]["scale"] = np.log(values64["sigma"])
        return np.asarray(jax.jit(jax.vmap(compiled.energy))(positions), np.float64)


def check(name: str, log_density, build=None) -> None:
    posterior = posteriordb.load(name)
    values = points(posterior)
    data = posterior.data()
    stan = []
    scale = []
    for i in range(POINTS):
        terms = log_density({k: v[i] for k, v in values.items()}, data)
        stan.append(sum(float(np.sum(t)) for t in terms))
        scale.append(sum(float(np.sum(np.abs(t))) for t in terms))
    energy = compiled_energies(posterior, values, build)
    difference = -energy - np.asarray(stan)  # log p_bdl − log p_Stan: one constant
    spread = float(np.max(np.abs(difference - difference.mean())))
    tolerance = ROUNDING * max(scale)
    assert np.all(np.isfinite(energy)), energy
    assert spread <= tolerance, (difference, tolerance)


def normal(x, mu, sd):
    return stats.norm.logpdf(x, mu, sd)


def lognormal(y, mu, sigma):
    """Stan's lognormal_lpdf(y | mu, sigma)."""
    log_y = np.log(y)
    return -log_y - np.log(sigma) - 0.5 * math.log(2 * math.pi) - (log_y - mu) ** 2 / (2 * sigma**2)


# ------------------------------------------------------------------ regressions


def earn_height(v, d):
    earn, height = np.asarray(d["earn"], float), np.asarray(d["height"], float)
    b, sigma = v["beta"], v["sigma"]
    return [normal(earn, b[0] + b[1] * height, sigma), np.log(sigma)]


def logearn_interaction_z(v, d):
    earn, height = np.asarray(d["earn"], float), np.asarray(d["height"], float)
    male = np.asarray(d["male"], float)
    z = (height - height.mean()) / np.sqrt(
        np.sum((height - height.mean()) ** 2) / (len(height) - 1)
    )
    b, sigma = v["beta"], v["sigma"]
    mean = b[0] + b[1] * z + b[2] * male + b[3] * z * male
    return [normal(np.log(earn), mean, sigma), np.log(sigma)]


def logearn_logheight_male(v, d):
    earn, height = np.asarray(d["earn"], float), np.asarray(d["height"], float)
    male = np.asarray(d["male"], float)
    b, sigma = v["beta"], v["sigma"]
    return [normal(np.log(earn), b[0] + b[1] * np.log(height) + b[2] * male, sigma), np.log(sigma)]


def kidscore_interaction_c(v, d):
    hs = np.asarray(d["mom_hs"], float)
    iq = np.asarray(d["mom_iq"], float)
    c_hs, c_iq = hs - hs.mean(), iq - iq.mean()
    b, sigma = v["beta"], v["sigma"]
    mean = b[0] + b[1] * c_hs + b[2] * c_iq + b[3] * c_hs * c_iq
    return [normal(np.asarray(d["kid_score"], float), mean, sigma), np.log(sigma)]


def arma11(v, d):
    y = np.asarray(d["y"], float)
    mu, phi, theta, sigma = v["mu"], v["phi"], v["theta"], v["sigma"]
    err = np.empty_like(y)
    nu = mu + phi * mu
    err[0] = y[0] - nu
    for t in range(1, len(y)):
        nu = mu + phi * y[t - 1] + theta * err[t - 1]
        err[t] = y[t] - nu
    priors = [normal(mu, 0, 10), normal(phi, 0, 2), normal(theta, 0, 2)]
    return [*priors, stats.cauchy.logpdf(sigma, 0, 2.5), normal(err, 0, sigma), np.log(sigma)]


@pytest.mark.parametrize(
    "name, log_density",
    [
        ("earnings-earn_height", earn_height),
        ("earnings-logearn_interaction_z", logearn_interaction_z),
        ("earnings-logearn_logheight_male", logearn_logheight_male),
        ("kidiq_with_mom_work-kidscore_interaction_c", kidscore_interaction_c),
        ("arma-arma11", arma11),
    ],
)
def test_regression_energy_is_the_stan_target(name, log_density):
    check(name, log_density)


# ------------------------------------------------------------------ Gaussian processes


def gp_regr(v, d):
    x, y = np.asarray(d["x"], float), np.asarray(d["y"], float)
    rho, alpha, sigma = v["rho"], v["alpha"], v["sigma"]
    cov = alpha**2 * np.exp(-((x[:, None] - x[None, :]) ** 2) / (2 * rho**2))
    cov = cov + sigma * np.eye(len(x))  # gp_regr.stan adds sigma, not sigma²
    chol = linalg.cholesky(cov, lower=True)
    alpha_ = linalg.solve_triangular(chol, y, lower=True)
    mvn = -0.5 * alpha_ @ alpha_ - np.sum(np.log(np.diag(chol))) - 0.5 * len(y) * np.log(2 * np.pi)
    priors = [
        stats.gamma.logpdf(rho, 25, scale=1 / 4),
        normal(alpha, 0, 2),
        normal(sigma, 0, 1),
    ]
    return [*priors, mvn, np.log(rho), np.log(alpha), np.log(sigma)]


def accel_gp(v, d):
    def gpa(x, sdgp, lscale, z, slambda):
        spd = sdgp**2 * (np.sqrt(2 * np.pi) * lscale) * np.exp(-0.5 * lscale**2 * slambda**2)
        return x @ (np.sqrt(spd) * z)

    x1, x2 = np.asarray(d["Xgp_1"], float), np.asarray(d["Xgp_sigma_1"], float)
    s1 = np.asarray(d["slambda_1"], float)[:, 0]
    s2 = np.asarray(d["slambda_sigma_1"], float)[:, 0]
    mu = v["Intercept"] + gpa(x1, v["sdgp_1"], v["lscale_1"], v["zgp_1"], s1)
    log_sd = v["Intercept_sigma"] + gpa(
        x2, v["sdgp_sigma_1"], v["lscale_sigma_1"], v["zgp_sigma_1"], s2
    )

    def half_t(x):
        return stats.t.logpdf(x, 3, 0, 36) - stats.t.logsf(0, 3, 0, 36)

    terms = [
        stats.t.logpdf(v["Intercept"], 3, -13, 36),
        half_t(v["sdgp_1"]),
        normal(v["zgp_1"], 0, 1),
        stats.invgamma.logpdf(v["lscale_1"], 1.124909, scale=0.0177),
        stats.t.logpdf(v["Intercept_sigma"], 3, 0, 10),
        half_t(v["sdgp_sigma_1"]),
        normal(v["zgp_sigma_1"], 0, 1),
        stats.invgamma.logpdf(v["lscale_sigma_1"], 1.124909, scale=0.0177),
        normal(np.asarray(d["Y"], float), mu, np.exp(log_sd)),
    ]
    jacobian = [np.log(v[k]) for k in ("sdgp_1", "lscale_1", "sdgp_sigma_1", "lscale_sigma_1")]
    return [*terms, *jacobian]


@pytest.mark.parametrize(
    "name, log_density",
    [("gp_pois_regr-gp_regr", gp_regr), ("mcycle_gp-accel_gp", accel_gp)],
)
def test_gaussian_process_energy_is_the_stan_target(name, log_density):
    check(name, log_density)


# ------------------------------------------------------------------ ODEs


def lotka_volterra(v, d):
    theta, z_init, sigma = v["theta"], v["z_init"], v["sigma"]

    def rhs(t, z):
        u, w = z
        return [(theta[0] - theta[1] * w) * u, (-theta[2] + theta[3] * u) * w]

    ts = np.asarray(d["ts"], float)
    z = integrate.solve_ivp(rhs, (0, ts[-1]), z_init, "DOP853", ts, rtol=1e-11, atol=1e-11).y.T
    y, y_init = np.asarray(d["y"], float), np.asarray(d["y_init"], float)
    terms = [
        normal(theta[[0, 2]], 1, 0.5),
        normal(theta[[1, 3]], 0.05, 0.05),
        lognormal(sigma, -1, 1),
        lognormal(z_init, np.log(10), 1),
        lognormal(y_init, np.log(z_init), sigma),
        lognormal(y, np.log(z), sigma),
    ]
    return [*terms, np.log(theta), np.log(z_init), np.log(sigma)]


def one_comp_mm_elim_abs(v, d):
    k_a, k_m, v_m, sigma = v["k_a"], v["K_m"], v["V_m"], v["sigma"]
    dose, volume = float(d["D"]), float(d["V"])

    def rhs(t, c):
        absorbed = math.exp(-k_a * t) * dose * k_a / volume if t > 0 else 0.0
        return [absorbed - (v_m / volume) * c[0] / (k_m + c[0])]

    times = np.asarray(d["times"], float)
    span = (float(d["t0"]), times[-1])
    c = integrate.solve_ivp(rhs, span, [0.0], "LSODA", times, rtol=1e-11, atol=1e-11).y[0]
    cauchy = stats.cauchy.logpdf
    priors = [cauchy(k_a, 0, 1), cauchy(k_m, 0, 1), cauchy(v_m, 0, 1), cauchy(sigma, 0, 1)]
    likelihood = lognormal(np.asarray(d["C_hat"], float), np.log(c), sigma)
    return [*priors, likelihood, np.log(k_a), np.log(k_m), np.log(v_m), np.log(sigma)]


@pytest.mark.parametrize(
    "name, log_density, build",
    [
        ("hudson_lynx_hare-lotka_volterra", lotka_volterra, "lotka_volterra"),
        ("one_comp_mm_elim_abs-one_comp_mm_elim_abs", one_comp_mm_elim_abs, "one_comp_mm_elim_abs"),
    ],
)
def test_ode_energy_is_the_stan_target(name, log_density, build):
    """In float64 at tolerances 1e-10: at the program's own (rk45: 1e-5 relative, 1e-3
    absolute) log z is off by up to 1.5e-3, which moves the energy by ~0.02 between points."""
    pytest.importorskip("diffrax")
    from bdl.validation.posteriordb import ode

    check(name, log_density, getattr(ode, build))


def test_ode_solvers_keep_the_programs_tolerances():
    """lotka_volterra.stan: integrate_ode_rk45(…, 1e-5, 1e-3, 5e2); one_comp_mm_elim_abs.stan:
    integrate_ode_bdf at its defaults (1e-10 in double precision), here 1e-6, float32's limit."""
    import inspect

    from bdl.validation.posteriordb import ode

    lotka = inspect.signature(ode.lotka_volterra).parameters
    assert (lotka["rtol"].default, lotka["atol"].default, lotka["max_steps"].default) == (
        1e-5,
        1e-3,
        500,
    )
    assert "1e-5, 1e-3, 5e2" in posteriordb.load("hudson_lynx_hare-lotka_volterra").stan_code()
    one = inspect.signature(ode.one_comp_mm_elim_abs).parameters
    assert (one["rtol"].default, one["atol"].default) == (1e-6, 1e-6)


def test_a_missing_solver_says_how_to_install_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "diffrax", None)  # import diffrax raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'bdl-sgmcmc\[ode\]'"):
        posteriordb.load("one_comp_mm_elim_abs-one_comp_mm_elim_abs").spec()


def test_stan_reference_draws_become_a_trusted_reference():
    posterior = posteriordb.load("earnings-earn_height")
    compiled = posterior.spec().compile()
    reference = posterior.reference(compiled)
    assert reference.trusted and reference.space == "parameter"
    assert reference.positions["net"]["beta"].shape == (10, 1000, 2)
    # σ is sampled as log σ: the reference holds log of Stan's draws
    draws = posterior.draws()
    np.testing.assert_allclose(
        reference.positions["lik"]["scale"], np.log(draws["sigma"]), rtol=1e-6
    )
    sd = posterior.moments()["beta"]["sd"]
    np.testing.assert_allclose(sd, draws["beta"].std(axis=(0, 1)), rtol=1e-6)


def test_every_posterior_has_its_stan_program_data_and_reference():
    assert len(posteriordb.names()) == 9
    for name in posteriordb.names():
        posterior = posteriordb.load(name)
        assert "model {" in posterior.stan_code() or "model{" in posterior.stan_code()
        assert posterior.data()
        moments = posterior.moments()
        assert set(moments) == set(posterior.parameters)
        assert all(np.all(np.isfinite(m["mean"])) for m in moments.values())
    assert not posteriordb.load("mcycle_gp-accel_gp").has_draws


def test_an_unknown_posterior_names_the_suite():
    with pytest.raises(ValueError, match="earnings-earn_height"):
        posteriordb.load("eight_schools-eight_schools_noncentered")

"""The conjugate Gibbs wrapper: each draw of a Gamma precision follows the exact conditional of
the tempered target exp(−U/T) (checked against the compiled energy on a grid), draws happen every
k steps and nowhere else, the wrapper composes by name and by object, refuses what it cannot
serve, and gibbs(sghmc) samples a hierarchical posterior known in closed form."""

import jax
import jax.numpy as jnp
import normal_gamma
import numpy as np
import numpyro.distributions as dist
import pytest
from scipy import stats
from stat_utils import assert_moments, z_threshold

import bdl
from bdl.kernels import Gibbs, gibbs, sghmc, sgld


def ard_target() -> bdl.CompiledModel:
    """A linear model with ARD precisions λ_j ~ Gamma(2, 1.5) on its 3 weights."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 3)).astype(np.float32)
    y = (x @ np.array([1.0, 0.0, -0.5]) + 0.3 * rng.normal(size=30)).astype(np.float32)
    prior = bdl.ByPath(
        {"w": bdl.HierarchicalNormal(precision=dist.Gamma(2.0, 1.5), per="input", name="ard")},
        default=bdl.Normal(1.0),
    )
    model = bdl.Model(
        lambda p, x: x @ p["w"] + p["b"],
        bdl.Gaussian(0.3),
        prior=prior,
        params={"w": jnp.zeros(3), "b": jnp.zeros(())},
    )
    return bdl.compile(model, (x, y))


def grid_conditional(target, position, slot, temperature: float):
    """The conditional density of u = log λ_slot ∝ exp(−U(u, rest)/T) on a grid."""
    u = np.linspace(-8.0, 6.0, 8_001)

    def energy(v):
        hyper = position["hyper"]["ard"]["w"]["precision"].at[slot].set(v)
        return target.energy({**position, "hyper": {"ard": {"w": {"precision": hyper}}}})

    e = np.asarray(jax.vmap(energy)(jnp.asarray(u, jnp.float32)), np.float64)
    log_p = -(e - e.min()) / temperature
    p = np.exp(log_p)
    return u, p / p.sum()


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_draws_follow_the_tempered_conditional_of_the_compiled_energy(temperature):
    """20,000 iid draws of each λ_j: their u = log λ_j against the grid conditional of
    exp(−U/T) with everything else fixed — mean z-score and a Kolmogorov–Smirnov test."""
    target = ard_target()
    kernel = gibbs(sgld(1e-3)).bind(target)
    position = {
        "net": {"b": jnp.asarray(0.2), "w": jnp.array([0.9, 0.05, -0.6])},
        "hyper": {"ard": {"w": {"precision": jnp.array([0.3, 1.0, -0.5])}}},
    }
    n = 20_000
    keys = jax.random.split(jax.random.key(3), n)
    drawn = jax.vmap(lambda k: kernel.draw(k, position, jnp.asarray(temperature)))(keys)
    u_draws = np.asarray(drawn["hyper"]["ard"]["w"]["precision"], np.float64)
    np.testing.assert_array_equal(drawn["net"]["w"][0], position["net"]["w"])
    threshold = z_threshold(3)
    for j in range(3):
        grid, p = grid_conditional(target, position, j, temperature)
        mean = p @ grid
        sd = np.sqrt(p @ (grid - mean) ** 2)
        z = (u_draws[:, j].mean() - mean) / (sd / np.sqrt(n))
        assert abs(z) < threshold, (j, z)
        cdf = np.cumsum(p)
        ks = stats.kstest(u_draws[:, j], lambda v, g=grid, c=cdf: np.interp(v, g, c))
        assert ks.pvalue > 1e-3, (j, ks)


def test_at_zero_temperature_the_draw_is_the_conditional_maximiser():
    target = ard_target()
    kernel = gibbs(sgld(1e-3)).bind(target)
    position = {
        "net": {"b": jnp.asarray(0.2), "w": jnp.array([0.9, 0.05, -0.6])},
        "hyper": {"ard": {"w": {"precision": jnp.zeros(3)}}},
    }
    drawn = kernel.draw(jax.random.key(0), position, jnp.asarray(0.0))
    for j in range(3):
        grid, p = grid_conditional(target, position, j, 1e-3)
        u = float(drawn["hyper"]["ard"]["w"]["precision"][j])
        assert u == pytest.approx(grid[np.argmax(p)], abs=5e-3)


def test_draws_happen_every_k_steps_and_the_inner_steps_are_unchanged():
    x, y = normal_gamma.data()
    target = bdl.compile(normal_gamma.model(), (x, y))
    inner = sghmc(1e-2, friction=1.0).bind(target)
    kernel = gibbs(inner, every=3).bind(target)
    key = jax.random.key(0)
    state = kernel.init(target.initial_position, key)
    plain = inner.init(target.initial_position, key)
    grad = target.stochastic_energy_and_grad
    full = (target.x_train, target.y_train)
    for t in range(1, 7):
        k = jax.random.fold_in(key, t)
        state, _ = kernel.step(
            k, state, lambda p: grad(p, full), jnp.asarray(1e-2), jnp.asarray(1.0)
        )
        plain, _ = inner.step(
            jax.random.split(k)[0],
            plain,
            lambda p: grad(p, full),
            jnp.asarray(1e-2),
            jnp.asarray(1.0),
        )
        lam = state.inner.z["theta"]["hyper"]["lam"]["precision"]
        lam_plain = plain.z["theta"]["hyper"]["lam"]["precision"]
        assert (t % 3 == 0) != bool(jnp.allclose(lam, lam_plain)), t
        np.testing.assert_allclose(state.inner.z["theta"]["net"]["w"], plain.z["theta"]["net"]["w"])
        plain = plain._replace(z=state.inner.z)  # continue the plain kernel from the Gibbs state


def test_composition_by_name_and_refusals():
    kernel = bdl.kernels.get("gibbs", base="sghmc", every=5, step_size=1e-2, friction=1.0)
    assert isinstance(kernel, Gibbs) and kernel.every == 5 and kernel.name == "gibbs(sghmc)"
    with pytest.raises(ValueError, match="every"):
        gibbs(sgld(1e-3), every=0)
    no_precision = bdl.compile(
        bdl.Model(
            lambda p, x: x @ p["w"],
            bdl.Gaussian(1.0),
            prior=bdl.HierarchicalNormal(scale=dist.HalfNormal(1.0), name="s"),
            params={"w": jnp.zeros(6)},
        ),
        normal_gamma.data(),
    )
    with pytest.raises(ValueError, match="no hierarchical prior with a conjugate precision"):
        gibbs(sgld(1e-3)).bind(no_precision)
    non_centred = bdl.compile(normal_gamma.model(centred=False), normal_gamma.data())
    with pytest.raises(ValueError, match="conjugate precision"):
        gibbs(sgld(1e-3)).bind(non_centred)
    target = bdl.compile(normal_gamma.model(), normal_gamma.data())
    with pytest.raises(ValueError, match="joint position"):
        gibbs(bdl.kernels.entropy(sgld(1e-3), eta=1.0)).bind(target).init(
            target.initial_position, jax.random.key(0)
        )


def test_checker_checks_the_inner_recipe_and_the_kinetic_energy():
    assert bdl.kernels.check(gibbs(sghmc(1e-2))).exact
    report = bdl.kernels.check(bdl.kernels.get("gibbs", base="kinetic-l2e", step_size=1e-2))
    assert not report.exact
    assert any("kinetic energy g depends on θ" in r for r in report.reasons), report.reasons


@pytest.mark.slow
@pytest.mark.parametrize("every", [1, 10])
def test_gibbs_sghmc_samples_the_exact_hierarchical_posterior(every):
    """Moments of (w, log λ) under gibbs(sghmc) against the closed-form posterior (quadrature)."""
    target = bdl.compile(normal_gamma.model(), normal_gamma.data())
    kernel = gibbs(sghmc(2e-2, friction=2.0), every=every)
    samples = bdl.sample(
        target, kernel, num_steps=60_000, burn_in=5_000, thin=10, num_chains=4, seed=1
    )
    draws = np.concatenate(
        [
            np.asarray(samples.positions["net"]["w"], np.float64),
            np.asarray(samples.positions["hyper"]["lam"]["precision"], np.float64)[..., None],
        ],
        axis=-1,
    )
    mean, cov = normal_gamma.exact_moments()
    assert_moments(draws, mean, cov, min_ess=400)

"""The stationarity checker accepts exact recipes and catches each kind of broken kernel."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import pytest

import bdl
from bdl.kernels.blocks import Elementwise
from bdl.kernels.integrators import Integrator
from bdl.kernels.recipe import Context
from bdl.kernels.recipe_kernel import RecipeKernel, RecipeState
from bdl.kernels.sghmc import Hamiltonian, sghmc
from bdl.kernels.sgld import Langevin, sgld
from bdl.kernels.wrapper import Wrapper


class PositionDiffusionRecipe(Langevin):
    """D(θ) = 1 + θ²/2 + 0.1·tanh(U(θ)) elementwise: Γ_i = θ_i + 0.1·sech²(U)·∂_iU."""

    @property
    def state_dependent(self):
        return True

    def diffusion(self, z, ctx):
        u = jnp.tanh(ctx.energy)
        return {
            "theta": Elementwise(jax.tree.map(lambda t: 1.0 + 0.5 * t * t + 0.1 * u, z["theta"]))
        }


class NoGammaRecipe(PositionDiffusionRecipe):
    """The same dynamics with Γ deliberately dropped."""

    def evaluate(self, z, ctx):
        return super().evaluate(z, ctx)._replace(gamma={})


class LearnedCurlRecipe(Hamiltonian):
    """NNSGHMC-like: Q_θp = −f(U, p_i), Q_pθ = f(U, p_i), D_pp = ½ + f² (elementwise in p_i,
    global in U): Γ needs the chain rule through U and the p-derivative of f."""

    def _f(self, u, p):
        return 1.0 + 0.3 * jnp.tanh(p) + 0.2 * jnp.sin(0.5 * u)

    @property
    def state_dependent(self):
        return True

    def diffusion(self, z, ctx):
        f = jax.tree.map(lambda p: self._f(ctx.energy, p), z["p"])
        return {"p": Elementwise(jax.tree.map(lambda v: 0.5 + v * v, f))}

    def curl(self, z, ctx):
        f = Elementwise(jax.tree.map(lambda p: self._f(ctx.energy, p), z["p"]))
        return {("theta", "p"): f.map(jnp.negative), ("p", "theta"): f}


class DoubleGradient(Wrapper):
    """Steps with 2∇U while declaring the inner kernel's recipe."""

    def step(self, key, state, energy_and_grad, step_size, temperature):
        def doubled(theta):
            u, g = energy_and_grad(theta)
            return u, jax.tree.map(lambda x: 2.0 * x, g)

        return self.inner.step(key, state, doubled, step_size, temperature)


class LoudNoise(Wrapper):
    """Injects √(4Th)·ξ instead of √(2Th)·ξ while declaring D = I."""

    def step(self, key, state, energy_and_grad, step_size, temperature):
        new, info = self.inner.step(key, state, energy_and_grad, step_size, temperature)
        extra = bdl.utils.trees.tree_normal_like(jax.random.fold_in(key, 1), new.z["theta"])
        scale = jnp.sqrt(2.0 * temperature * step_size)
        theta = jax.tree.map(lambda t, e: t + scale * e, new.z["theta"], extra)
        return RecipeState({"theta": theta}, new.history), info


class ScaledNoise(Integrator):
    """``inner`` with its Gaussian draw scaled by ``scale``: the noise variance is ``scale²``
    times the declared 2hT·D (a sampler too hot or too cold by scale² − 1)."""

    inner: Integrator
    scale: float

    def noisy_groups(self, ev):
        return self.inner.noisy_groups(ev)

    def move(self, recipe, ev, z, ctx, h, temperature, noise):
        scaled = jax.tree.map(lambda x: self.scale * x, noise)
        return self.inner.move(recipe, ev, z, ctx, h, temperature, scaled)


#: SGLD, SGHMC and a state-dependent diffusion, each under its integrator
NOISY_KERNELS = {
    "sgld": lambda: sgld(1e-3),
    "sghmc": lambda: sghmc(1e-3, 1.0),
    "position-diffusion": lambda: RecipeKernel(PositionDiffusionRecipe(), 1e-3),
}


def with_noise_variance(kernel, factor):
    """``kernel`` with its injected noise variance multiplied by ``factor``."""
    integrator = ScaledNoise(kernel.integrator, math.sqrt(factor))
    return dataclasses.replace(kernel, integrator=integrator)


class CurlyKineticRecipe(Hamiltonian):
    """A 'kinetic field' (p + 0.3·Rθ, ·) that is not the gradient of any g."""

    def kinetic_grad(self, z):
        theta = z["theta"]
        rot = {"a": jnp.stack([-theta["a"][1], theta["a"][0]]), "b": theta["b"]}
        return {"theta": jax.tree.map(lambda x: 0.3 * x, rot), "p": z["p"]}


#: The checker's verdict for every registered kernel with its default hyper-parameters, and for
#: the approximate ones the reason it must give (docs/design.md, *Kernels*).
EXPECTED_VERDICTS: dict[str, str | None] = {
    "sgld": None,
    "sghmc": None,
    "sgnht": None,
    "wenzel": None,
    "cyclical": None,
    "entropy": None,
    "gibbs": None,
    "nnsghmc": None,
    "kinetic-l2e": None,
    "psgld": "gradient history",
    "l2e": "not a gradient",
}


def test_every_registered_kernel_has_an_expected_verdict():
    assert set(bdl.kernels.names()) == set(EXPECTED_VERDICTS)


@pytest.mark.parametrize("name", sorted(EXPECTED_VERDICTS))
def test_registered_kernel_verdict(name):
    report = bdl.kernels.check(bdl.kernels.get(name))
    reason = EXPECTED_VERDICTS[name]
    if reason is None:
        assert report.exact, str(report)
    else:
        assert not report.exact, str(report)
        assert any(reason in r for r in report.reasons), report.reasons


def test_structured_gamma_equals_dense_divergence():
    """Γ by forward-mode autodiff (locality + chain rule through U) equals the dense ∇·(D+Q)."""
    report = bdl.kernels.check(RecipeKernel(LearnedCurlRecipe(), 1e-3))
    assert report.residuals["Γ vs ∇·(D+Q)"] < 1e-12, str(report)
    assert report.exact, str(report)


def test_position_dependent_diffusion_with_gamma_is_exact():
    report = bdl.kernels.check(RecipeKernel(PositionDiffusionRecipe(), 1e-3))
    assert report.exact, str(report)


def test_dropped_gamma_fails():
    report = bdl.kernels.check(RecipeKernel(NoGammaRecipe(), 1e-3))
    assert not report.exact
    assert any("Γ omitted" in r for r in report.reasons), str(report)


def test_step_disagreeing_with_recipe_fails():
    report = bdl.kernels.check(DoubleGradient(sgld(1e-3)))
    assert not report.exact
    assert any("drift" in r for r in report.reasons), str(report)


@pytest.mark.parametrize("factor", [1.02, 0.98])
@pytest.mark.parametrize("name", sorted(NOISY_KERNELS))
def test_a_two_percent_noise_variance_error_fails(name, factor):
    """At the default settings the exact covariance (B·Bᵀ from the draw's Jacobian) reads a
    variance off by 2 % as a relative error of 0.02, against a tolerance of 1e-5."""
    report = bdl.kernels.check(with_noise_variance(NOISY_KERNELS[name](), factor))
    assert not report.exact, str(report)
    assert [r for r in report.reasons if "noise covariance" in r] == report.reasons, str(report)
    assert report.residuals["noise covariance error"] == pytest.approx(abs(factor - 1), rel=1e-6)


@pytest.mark.parametrize("name", sorted(NOISY_KERNELS))
def test_the_same_kernels_with_their_declared_noise_pass(name):
    """The harness of the test above leaves exact kernels exact (scale 1), and none of them
    needs the sampled check: their step is their integrator's move of the standard draw."""
    report = bdl.kernels.check(with_noise_variance(NOISY_KERNELS[name](), 1.0))
    assert report.exact, str(report)
    assert report.residuals["noise covariance error"] < 1e-12, str(report)
    assert "noise covariance |z| (sampled)" not in report.residuals


def test_wrong_noise_fails():
    """A wrapper adding noise of its own is beyond the integrator's draw: the sampled check
    runs and catches it."""
    report = bdl.kernels.check(LoudNoise(sgld(1e-3)))
    assert not report.exact
    assert any("noise" in r and "sampled" in r for r in report.reasons), str(report)


def test_non_gradient_kinetic_field_fails():
    kernel = RecipeKernel(CurlyKineticRecipe(), 1e-3)
    report = bdl.kernels.check(kernel)
    assert any("not a gradient" in r for r in report.reasons), str(report)


def test_correction_is_zero_and_free_for_constant_recipes():
    z = {"theta": jnp.ones(3), "p": jnp.ones(3)}
    assert Hamiltonian().evaluate(z, Context(jnp.zeros(()), jnp.ones(3))).gamma == {}
    assert sghmc(1e-2).recipe.state_dependent is False

"""The kernel architecture: a kernel added as a recipe and nothing else runs through bdl.sample,
the checker and the statistical battery; wrappers delegate the whole protocol; the registry
merges hyper-parameters over its defaults."""

import jax
import jax.numpy as jnp
import pytest
from battery_settings import SETTINGS
from test_battery import check_conjugate_regression, check_correlated_gaussian

import bdl
from bdl.kernels.blocks import Elementwise
from bdl.kernels.recipe import Recipe
from bdl.kernels.recipe_kernel import RecipeKernel
from bdl.kernels.wrapper import Wrapper, protocol_methods


class TanhDiffusion(Recipe):
    """A first-order recipe bdl does not ship: g = 0, Q = 0 and the position-dependent diagonal
    D(θ)_i = 1 + ½·tanh(θ_i)², whose correction Γ_i = ∂_i D_ii = tanh(θ_i)·sech²(θ_i) is left to
    the library to derive."""

    @property
    def groups(self):
        return {"theta": "elementwise"}

    def kinetic(self, z):
        return jnp.zeros(())

    def diffusion(self, z, ctx):
        return {
            "theta": Elementwise(jax.tree.map(lambda t: 1 + 0.5 * jnp.tanh(t) ** 2, z["theta"]))
        }

    def curl(self, z, ctx):
        return {}


def toy(step_size):
    return RecipeKernel(TanhDiffusion(), step_size, name="tanh-diffusion")


def test_a_recipe_alone_is_an_exact_kernel():
    report = bdl.kernels.check(toy(1e-3))
    assert report.exact, str(report)
    assert report.residuals["Γ vs ∇·(D+Q)"] < 1e-12


def test_the_derived_gamma_is_the_hand_derived_one():
    theta = {"x": jnp.array([-1.3, 0.2, 2.0])}
    ctx = bdl.kernels.Context(jnp.zeros(()), theta)
    gamma = TanhDiffusion().evaluate({"theta": theta}, ctx).gamma["theta"]["x"]
    t = theta["x"]
    expected = jnp.tanh(t) / jnp.cosh(t) ** 2
    assert jnp.allclose(gamma, expected, rtol=1e-6)


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_a_recipe_alone_passes_the_battery_on_a_gaussian(temperature):
    cfg = SETTINGS["sgld"]["gaussian"]
    check_correlated_gaussian(toy(cfg["hyper"]["step_size"]), cfg, temperature)


def test_a_recipe_alone_passes_the_battery_on_the_conjugate_regression():
    cfg = SETTINGS["sgld"]["conjugate"]
    check_conjugate_regression(toy(cfg["hyper"]["step_size"]), cfg)


def test_wrapper_delegates_every_protocol_method():
    """A method added to the kernel protocol must be forwarded by Wrapper (and so reaches every
    wrapper): none may fall back to a default silently."""
    missing = sorted(m for m in protocol_methods() if m not in vars(Wrapper))
    assert not missing, f"Wrapper does not forward {missing}"
    assert {"init", "step", "bind", "hyper", "is_sample", "collect", "recipe_at"} <= (
        protocol_methods()
    )


def test_registry_merges_hyper_parameters_over_defaults():
    kernel = bdl.kernels.get("psgld", alpha=0.9)
    assert (kernel.history.alpha, kernel.history.eps) == (0.9, 1e-5)
    # like every hand-designed kernel, pSGLD has no default step size: built without one it
    # adapts during burn-in
    assert kernel.step_size is None and bdl.sampling.warmup.needs_adaptation(kernel)
    learned = bdl.kernels.get("nnsghmc", c=0.02)
    assert learned.step_size == bdl.kernels.registry.defaults("nnsghmc")["step_size"]
    # a learning rate replaces the default step size and friction instead of clashing with them
    by_rate = bdl.kernels.get("sghmc", learning_rate=0.1, momentum=0.9)
    assert isinstance(by_rate.step_size, bdl.kernels.parameterisation.LearningRate)
    # a wrapper's base gets its own registry defaults, not the default base's
    assert bdl.kernels.get("cyclical", base="sgld").inner.name == "sgld"


def test_registry_lists_valid_hyper_parameters():
    with pytest.raises(ValueError, match=r"stepsize.*did you mean 'step_size'.*Valid: .*friction"):
        bdl.kernels.get("sghmc", stepsize=0.1)

"""Sampling kernels built on the complete recipe, and their registry.

Kernels registered without a default step size (sgld, sghmc, sgnht and the wrappers around them)
are adapted during burn-in by ``bdl.sample`` when built with no step size
(:mod:`bdl.sampling.warmup`).

A kernel is a recipe (g, D, Q), an integrator and optionally a history transform
(:class:`RecipeKernel`), possibly inside wrappers (:class:`Cyclical`, :class:`EntropyMCMC`,
:class:`WenzelSchedule`). Build one by name with :func:`get` or with its factory function.
"""

from bdl import schedules
from bdl.kernels import blocks, integrators, preconditioners
from bdl.kernels.base import Info, Kernel
from bdl.kernels.blackjax_adapter import BlackJAXState, as_blackjax
from bdl.kernels.checker import CheckReport, check
from bdl.kernels.cyclical import Cyclical, cyclical
from bdl.kernels.describe import describe
from bdl.kernels.elementwise_mlp import (
    ElementwiseMLP,
    load_meta_metadata,
    load_meta_params,
    save_meta_params,
)
from bdl.kernels.entropy import EntropyMCMC, entropy
from bdl.kernels.gibbs import Gibbs, gibbs
from bdl.kernels.history import History
from bdl.kernels.kinetic_l2e import kinetic_l2e
from bdl.kernels.l2e import l2e
from bdl.kernels.nnsghmc import nnsghmc
from bdl.kernels.psgld import psgld
from bdl.kernels.recipe import Context, Recipe
from bdl.kernels.recipe_kernel import RecipeKernel, RecipeState
from bdl.kernels.registry import get, names, register
from bdl.kernels.sghmc import sghmc
from bdl.kernels.sgld import sgld
from bdl.kernels.sgnht import sgnht
from bdl.kernels.wenzel import WenzelSchedule, wenzel
from bdl.kernels.wrapper import Wrapper

register("sgld", sgld, "SGLD (Welling & Teh 2011): D = I, Q = 0, Euler–Maruyama")
register(
    "sghmc",
    sghmc,
    "SGHMC (Chen et al. 2014): D = diag(0, C), symplectic Euler",
)
register(
    "sgnht",
    sgnht,
    "SGNHT (Ding et al. 2014): thermostat ξ, D = diag(0, A, 0), Q_rξ = r/d",
)
register(
    "cyclical",
    cyclical,
    "cyclical SG-MCMC (Zhang et al. 2020) around base (default sghmc): cosine h, T = 0 explore",
    {"base": "sghmc", "cycle_length": 1000, "exploration": 0.8},
)
register(
    "entropy",
    entropy,
    "Entropy-MCMC (Li & Zhang 2024) around base (default sgld): guide θ_a, ‖θ − θ_a‖²/(2η)",
    {"base": "sgld", "eta": 1.0},
)
register(
    "psgld",
    psgld,
    "pSGLD (Li et al. 2016): SGLD with RMSprop D = 1/(λ + √V), adapted every step",
    {"alpha": 0.99, "eps": 1e-5},
)
register(
    "wenzel",
    wenzel,
    "Wenzel et al. 2020: symplectic Euler SGHMC(ℓ, β), layerwise M, cosine cycles, T ramp",
    {"learning_rate": 0.1, "momentum": 0.98},
)
register(
    "nnsghmc",
    nnsghmc,
    "NNSGHMC (Gong et al. 2019): learned D(z), Q(z) from f_Q, f_D; exact Γ; symplectic Euler",
    {"step_size": 1e-2, "alpha": 1.0, "c": 0.01},
)
register(
    "l2e",
    l2e,
    "L2E (Kim et al. 2024): SGHMC with a learned kinetic field (α, β) from gradient history",
    {"step_size": 1e-2, "friction": 1.0},
)
register(
    "kinetic-l2e",
    kinetic_l2e,
    "Kinetic-L2E (Kim et al. 2024, App. D): g = ½‖r − f_φ(θ)‖², SGHMC's D and Q",
    {"step_size": 1e-2, "friction": 1.0},
)
register(
    "gibbs",
    gibbs,
    "Gibbs draws of conjugate Gamma weight precisions every k steps of a base kernel "
    "(Chen et al. 2014)",
    {"base": "sghmc", "every": 1},
)

__all__ = [
    "BlackJAXState",
    "CheckReport",
    "Context",
    "Cyclical",
    "ElementwiseMLP",
    "EntropyMCMC",
    "Gibbs",
    "History",
    "Info",
    "Kernel",
    "Recipe",
    "RecipeKernel",
    "RecipeState",
    "WenzelSchedule",
    "Wrapper",
    "as_blackjax",
    "blocks",
    "check",
    "cyclical",
    "describe",
    "entropy",
    "get",
    "gibbs",
    "integrators",
    "kinetic_l2e",
    "l2e",
    "load_meta_metadata",
    "load_meta_params",
    "names",
    "nnsghmc",
    "preconditioners",
    "psgld",
    "register",
    "save_meta_params",
    "schedules",
    "sghmc",
    "sgld",
    "sgnht",
    "wenzel",
]

"""Sampling kernels built on the complete recipe, and their registry."""

from bdl.kernels import schedules
from bdl.kernels.base import Info, Kernel
from bdl.kernels.checker import CheckReport, check
from bdl.kernels.recipe import Context, Recipe
from bdl.kernels.recipe_kernel import RecipeKernel, RecipeState
from bdl.kernels.registry import get, names, register
from bdl.kernels.sghmc import SGHMC
from bdl.kernels.sgld import SGLD

register(
    "sgld", SGLD, "SGLD (Welling & Teh 2011): D = I, Q = 0, Euler–Maruyama", {"step_size": 1e-3}
)
register(
    "sghmc",
    SGHMC,
    "SGHMC (Chen et al. 2014): D = diag(0, C), symplectic Euler",
    {"step_size": 1e-2, "friction": 1.0},
)

__all__ = [
    "SGHMC",
    "SGLD",
    "CheckReport",
    "Context",
    "Info",
    "Kernel",
    "Recipe",
    "RecipeKernel",
    "RecipeState",
    "check",
    "get",
    "names",
    "register",
    "schedules",
]

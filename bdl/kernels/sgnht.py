"""SGNHT: the stochastic-gradient Nosé–Hoover thermostat (Ding et al. 2014).

Recipe (Ma, Chen & Fox 2015, Sec. 3.2): z = (θ, r, ξ) with momentum r and a scalar thermostat ξ,
d = dim θ and diffusion constant A > 0,

    H(z) = U(θ) + ½ rᵀr + (d/2)(ξ − A)²,
    Q = [[0, −I, 0], [I, 0, r/d], [0, −rᵀ/d, 0]],   D = diag(0, A·I, 0).

Γ is derived by :func:`bdl.kernels.recipe.correction`: only Q_ξr = −rᵀ/d depends on z, so
Γ = (0, 0, Σ_i ∂(−r_i/d)/∂r_i) = (0, 0, −1), and the dynamics are

    dθ = r dt,   dr = (−∇U − ξ r) dt + √(2TA) dW,   dξ = (rᵀr/d − T) dt.

exp(−H/T) is stationary: θ ~ π_T, r ~ N(0, T·I), ξ ~ N(A, T/d) (so ξ averages to A).

Discretisation (after Ding et al. 2014, Alg. 1), one Gaussian draw per step:

    r' = r − h∇Ũ(θ) − hξr + √(2ThA)·ε,    θ ← θ + h r',    ξ ← ξ + h(r̄ᵀr̄/d − T),

a symplectic-Euler splitting of the recipe: r first at z, then θ and ξ from the new momentum (their
rows do not involve ∇U, so Ũ and ∇Ũ of the step stay valid). Ding et al. use r̄ = r'
(``thermostat_update="endpoint"``). The default ``"midpoint"`` uses r̄ = (r + r')/2: for the
r-recursion r' = (1 − hξ)r + noise, E[r̄²] = E[r'²](1 − hξ/2) equals T exactly when ξ = A (plus
the gradient-noise friction hs²/(2T)), whereas the endpoint estimate settles the thermostat at
ξ ≈ A + hA²/2 and so over-damps and cools θ by a relative O(hA/2). Both are consistent with the
recipe (the checker cannot tell them apart: the difference is O(h)). The thermostat makes the
kinetic temperature track T, absorbing an unknown, isotropic gradient-noise variance into ξ.

Caveat: dξ/dt ≥ −T, so after a large release of potential energy (a start far from a mode) ξ
needs a time of order ΔU/(dT) to come back and the chain is over-damped meanwhile: burn in for
that long, or start near a mode.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from bdl.kernels.base import Info, tree_norm
from bdl.kernels.recipe import Blocks, Context, GroupKind, Recipe, drift, noise_scale
from bdl.kernels.recipe_kernel import RecipeKernel, RecipeState
from bdl.utils.trees import tree_normal_like, tree_size

PyTree = Any


class ThermostatRecipe(Recipe):
    """g = ½ rᵀr + (d/2)(ξ − A)², Q as in the module docstring, D = diag(0, A·I, 0)."""

    diffusion_constant: float = 1.0

    @property
    def groups(self) -> dict[str, GroupKind]:
        return {"theta": "elementwise", "r": "elementwise", "xi": "scalar"}

    def kinetic(self, z: dict[str, PyTree]) -> jax.Array:
        d = tree_size(z["r"])
        momentum = 0.5 * sum(jnp.sum(r * r) for r in jax.tree.leaves(z["r"]))
        return momentum + 0.5 * d * jnp.square(z["xi"] - self.diffusion_constant)

    def diffusion(self, z: dict[str, PyTree], ctx: Context) -> Blocks:
        return {("r", "r"): self.diffusion_constant}

    def curl(self, z: dict[str, PyTree], ctx: Context) -> Blocks:
        d = tree_size(z["r"])
        column = jax.tree.map(lambda r: r / d, z["r"])
        return {
            ("theta", "r"): -1.0,
            ("r", "theta"): 1.0,
            ("r", "xi"): column,
            ("xi", "r"): jax.tree.map(jnp.negative, column),
        }


class SGNHT(RecipeKernel):
    """SGNHT with step size h and diffusion constant A (Ding et al. 2014).

    Args:
        step_size: h (a float > 0 or a schedule ``t -> h_t``).
        diffusion: A > 0, the injected-noise constant; the thermostat's stationary mean is A.
        init_momentum: ``"zero"`` (default) or ``"sample"`` (r ~ N(0, I)).
        init_thermostat: ξ₀ (default A).
        thermostat_update: ``"midpoint"`` (default, r̄ = (r + r')/2) or ``"endpoint"`` (r̄ = r',
            Ding et al. 2014 Alg. 1) for the kinetic temperature r̄ᵀr̄/d in the ξ update.
    """

    diffusion: float = 1.0
    init_momentum: str = "zero"
    init_thermostat: float | None = None
    thermostat_update: str = eqx.field(static=True, default="midpoint")

    def __check_init__(self) -> None:
        if not isinstance(self.diffusion, int | float) or not self.diffusion > 0:
            raise ValueError(f"sgnht: diffusion (A) must be a float > 0; got {self.diffusion}.")
        if self.init_momentum not in ("zero", "sample"):
            raise ValueError(
                f"sgnht: init_momentum must be 'zero' or 'sample'; got {self.init_momentum!r}."
            )
        if self.thermostat_update not in ("midpoint", "endpoint"):
            raise ValueError(
                "sgnht: thermostat_update must be 'midpoint' or 'endpoint'; "
                f"got {self.thermostat_update!r}."
            )
        if self.init_thermostat is not None and not isinstance(self.init_thermostat, int | float):
            raise ValueError(
                f"sgnht: init_thermostat must be a float or None; got {self.init_thermostat!r}."
            )

    def recipe(self) -> Recipe:
        return ThermostatRecipe(diffusion_constant=float(self.diffusion))

    def init_aux(self, position: PyTree, key: jax.Array) -> dict[str, PyTree]:
        if self.init_momentum == "zero":
            r = jax.tree.map(jnp.zeros_like, position)
        else:
            r = tree_normal_like(key, position)
        dtype = jnp.result_type(*jax.tree.leaves(position))
        xi0 = self.diffusion if self.init_thermostat is None else self.init_thermostat
        return {"r": r, "xi": jnp.asarray(xi0, dtype)}

    def collect(self, state: RecipeState) -> dict[str, PyTree]:
        """θ, and the thermostat ξ (its average tracks A plus the gradient-noise friction)."""
        return {"position": state.z["theta"], "thermostat": state.z["xi"]}

    def step(
        self,
        key: jax.Array,
        state: RecipeState,
        energy_and_grad: Any,
        step_size: jax.Array,
        temperature: jax.Array,
    ) -> tuple[RecipeState, Info]:
        recipe = self.recipe_at(state)
        z = state.z
        energy, grad = energy_and_grad(z["theta"])
        ctx = Context(energy, grad)
        h = step_size
        scale = noise_scale(recipe, z, ctx, temperature, h)["r"]
        noise = tree_normal_like(key, z["r"])
        v_r = drift(recipe, z, ctx, temperature, ("r",))["r"]
        r = jax.tree.map(lambda x, v, e: x + h * v + scale * e, z["r"], v_r, noise)
        # θ and ξ at the new momentum; θ is unchanged, so Ũ and ∇Ũ are still valid
        v_theta = drift(recipe, {**z, "r": r}, ctx, temperature, ("theta",))["theta"]
        theta = jax.tree.map(lambda x, u: x + h * u, z["theta"], v_theta)
        if self.thermostat_update == "midpoint":
            r_bar = jax.tree.map(lambda a, b: 0.5 * (a + b), z["r"], r)
        else:
            r_bar = r
        xi = z["xi"] + h * drift(recipe, {**z, "r": r_bar}, ctx, temperature, ("xi",))["xi"]
        new = {"theta": theta, "r": r, "xi": xi}
        info = Info(energy, recipe.kinetic(new), tree_norm(grad), step_size, temperature)
        return RecipeState(new), info

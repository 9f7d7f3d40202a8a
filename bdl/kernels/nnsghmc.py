"""NNSGHMC: the meta-learned SG-MCMC sampler of Gong, Li & Hernández-Lobato (ICLR 2019).

Recipe (Gong et al. 2019, Eq. 6, 8, 9), z = (θ, r), identity mass, g = ½‖r‖²:

    Q_θr = −diag(f_Q),  Q_rθ = diag(f_Q),  D_θθ = 0,  D_rr = diag(α·f_Q² + f_D + c),
    f_Q,i = β₀ + net_Q(u, pᵢ),          f_D,i = s_D·|net_D(u, pᵢ, gᵢ)|,

with per-coordinate network inputs (Sec. 3.2, App. E: inputs rescaled to comparable scales across
tasks) u = s_U·Ũ(θ)/n (the energy per datum), pᵢ = s_r·rᵢ and gᵢ = s_g·∂ᵢŨ(θ)/n (the gradient of
the mean loss). net_Q and net_D are small elementwise MLPs (1 hidden layer of 10 units, as in the
paper's MNIST set-up); α ≥ 0 and c > 0 are friction constants and β₀ an offset on f_Q.

The correction Γ_i = Σ_j ∂_j(D_ij + Q_ij) is derived by :func:`bdl.kernels.recipe.correction`
(forward-mode autodiff of the declared blocks, O(d)):

    Γ_θ,i = −∂f_Q,i/∂rᵢ,    Γ_r,i = ∂f_Q,i/∂U · ∂ᵢU + ∂(α f_Q,i² + f_D,i)/∂rᵢ.

∂ᵢŨ enters only D_rr, an r-column block, whose divergence differentiates in r only: no Hessian of
U is ever needed. Any function of Ũ (here Ũ/n) is allowed: the chain rule through U is exact.

Discretisation (the paper's "modified Euler", Eq. 7) = :func:`symplectic_euler`:

    r ← r − h[D_rr r + f_Q ∇Ũ] + hT·Γ_r + √(2ThD_rr)·ξ       (at (θ, r)),
    θ ← θ + h f_Q r + hT·Γ_θ                                  (at (θ, r_new)).

Deep-learning parameterisation (as SGHMC): learning rate ℓ and momentum β give h = √(ℓ/n) and
α = (1 − β)√(n/ℓ) (the paper's α = friction/η); with f_Q ≈ β₀ = 1 the friction is ≈ α.
With all network outputs zero, NNSGHMC is exactly SGHMC with friction α·β₀² + c.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import jax
import jax.numpy as jnp

from bdl.kernels.elementwise_mlp import (
    MetaParams,
    check_architecture,
    init_mlp,
    resolve_meta_params,
)
from bdl.kernels.recipe import Blocks, Context, GroupKind, Recipe
from bdl.kernels.recipe_kernel import RecipeKernel
from bdl.kernels.sghmc import check_sgd_parameterisation, langevin_from_sgd
from bdl.utils.trees import tree_normal_like

PyTree = Any

#: network name → (input features, outputs)
NETWORKS: dict[str, tuple[int, int]] = {"q": (2, 1), "d": (3, 1)}


def init_nnsghmc_params(
    seed: int = 0,
    hidden: tuple[int, ...] = (10,),
    *,
    final_scale: float = 0.1,
    activation: str = "tanh",
) -> MetaParams:
    """Random meta-parameters: net_Q (u, p) → 1 and net_D (u, p, g) → 1 with ``hidden`` units;
    the output layers are scaled by ``final_scale`` (0: exactly SGHMC)."""
    kq, kd = jax.random.split(jax.random.key(seed))
    return {
        "q": init_mlp(kq, (2, *hidden, 1), activation=activation, final_scale=final_scale),
        "d": init_mlp(kd, (3, *hidden, 1), activation=activation, final_scale=final_scale),
    }


class NNSGHMCRecipe(Recipe):
    """Gong et al.'s D(z), Q(z) with f_Q(U, rᵢ) and f_D(U, rᵢ, ∂ᵢU) (module docstring)."""

    meta_params: MetaParams
    alpha: Any = 1.0
    beta0: Any = 1.0
    c: Any = 0.01
    energy_scale: Any = 1.0
    momentum_scale: Any = 1.0
    grad_scale: Any = 1.0
    d_scale: Any = 1.0
    q_bound: float | None = None

    @property
    def groups(self) -> dict[str, GroupKind]:
        return {"theta": "elementwise", "r": "elementwise"}

    def kinetic(self, z: dict[str, PyTree]) -> jax.Array:
        return 0.5 * sum(jnp.sum(r * r) for r in jax.tree.leaves(z["r"]))

    def f_q(self, z: dict[str, PyTree], ctx: Context) -> PyTree:
        u = self.energy_scale * ctx.energy
        p = jax.tree.map(lambda r: self.momentum_scale * r, z["r"])
        (out,) = self.meta_params["q"].map_tree(u, p)
        if self.q_bound is not None:
            b = self.q_bound
            out = jax.tree.map(lambda x: b * jnp.tanh(x / b), out)
        return jax.tree.map(lambda x: self.beta0 + x, out)

    def f_d(self, z: dict[str, PyTree], ctx: Context) -> PyTree:
        u = self.energy_scale * ctx.energy
        p = jax.tree.map(lambda r: self.momentum_scale * r, z["r"])
        g = jax.tree.map(lambda x: self.grad_scale * x, ctx.grad)
        (out,) = self.meta_params["d"].map_tree(u, p, g)
        return jax.tree.map(lambda x: self.d_scale * jnp.abs(x), out)

    def diffusion(self, z: dict[str, PyTree], ctx: Context) -> Blocks:
        friction = jax.tree.map(
            lambda q, d: self.alpha * q * q + d + self.c, self.f_q(z, ctx), self.f_d(z, ctx)
        )
        return {("r", "r"): friction}

    def curl(self, z: dict[str, PyTree], ctx: Context) -> Blocks:
        fq = self.f_q(z, ctx)
        return {("theta", "r"): jax.tree.map(jnp.negative, fq), ("r", "theta"): fq}


class NNSGHMC(RecipeKernel):
    """NNSGHMC with step size h (or learning rate ℓ and momentum β) and meta-parameters.

    Args:
        meta_params: ``{"q": net_Q, "d": net_D}`` (:class:`ElementwiseMLP`), the path of a file
            from :func:`save_meta_params`, or ``None`` for the package default (shipped trained
            parameters if present, else random ones with a fixed seed).
        step_size: h (float or schedule); or ``None`` with ``learning_rate``.
        alpha: α ≥ 0, the friction multiplying f_Q².
        beta0: β₀, the offset of f_Q.
        c: c > 0, the constant friction.
        learning_rate, momentum: (ℓ, β) → h = √(ℓ/n), α = (1 − β)√(n/ℓ) at :meth:`bind`.
        num_data: n used to scale the network inputs (set from the target at :meth:`bind`).
        energy_scale, momentum_scale, grad_scale: s_U, s_r, s_g (module docstring).
        d_scale: s_D ≥ 0, the scale of f_D.
        q_bound: if set, net_Q's output is bounded smoothly to (−b, b) by b·tanh(·/b) (the paper
            clamps f_Q to [−5, 5] in evaluation).
        init_momentum: ``"zero"`` or ``"sample"`` (r ~ N(0, I)).
    """

    meta_params: Any = None
    alpha: float = 1.0
    beta0: float = 1.0
    c: float = 0.01
    learning_rate: float | None = None
    momentum: float | None = None
    num_data: float | None = None
    energy_scale: float = 1.0
    momentum_scale: float = 1.0
    grad_scale: float = 1.0
    d_scale: float = 1.0
    q_bound: float | None = 4.0
    init_momentum: str = "zero"
    integrator: str = "symplectic_euler"

    def __post_init__(self) -> None:
        self.meta_params = resolve_meta_params(
            "nnsghmc", self.meta_params, None, init_nnsghmc_params
        )

    def __check_init__(self) -> None:
        check_architecture("nnsghmc", self.meta_params, NETWORKS)
        check_sgd_parameterisation("nnsghmc", self.learning_rate, self.momentum, self.step_size)
        if not (math.isfinite(self.alpha) and self.alpha >= 0):
            raise ValueError(f"nnsghmc: alpha must be >= 0; got {self.alpha}.")
        if not (math.isfinite(self.c) and self.c > 0):
            raise ValueError(f"nnsghmc: c must be > 0; got {self.c}.")
        if not math.isfinite(self.beta0):
            raise ValueError(f"nnsghmc: beta0 must be finite; got {self.beta0}.")
        for name in ("energy_scale", "momentum_scale", "grad_scale"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"nnsghmc: {name} must be > 0; got {value}.")
        if not (math.isfinite(self.d_scale) and self.d_scale >= 0):
            raise ValueError(f"nnsghmc: d_scale must be >= 0; got {self.d_scale}.")
        if self.q_bound is not None and not self.q_bound > 0:
            raise ValueError(f"nnsghmc: q_bound must be > 0 or None; got {self.q_bound}.")
        if self.num_data is not None and not self.num_data > 0:
            raise ValueError(f"nnsghmc: num_data must be > 0; got {self.num_data}.")
        if self.init_momentum not in ("zero", "sample"):
            raise ValueError("nnsghmc: init_momentum must be 'zero' or 'sample'.")

    def has_alternative_step_size(self) -> bool:
        return self.learning_rate is not None

    def bind(self, target: Any) -> NNSGHMC:
        n = float(target.n)
        changes: dict[str, Any] = {}
        if self.num_data is None:
            changes["num_data"] = n
        if self.learning_rate is not None:
            step_size, alpha = langevin_from_sgd(self.learning_rate, self.momentum, n)
            changes.update(step_size=step_size, alpha=alpha, learning_rate=None, momentum=None)
        bound = dataclasses.replace(self, **changes) if changes else self
        bound._warn_if_friction_unstable()
        return bound

    def _warn_if_friction_unstable(self) -> None:
        """Warn when h·(α·max f_Q² + c) ≥ 2: the explicit friction update r ← (1 − h·D_rr)·r + …
        can then amplify r (f_D ≥ 0 only adds to D_rr)."""
        if self.q_bound is None or callable(self.step_size) or self.step_size is None:
            return
        f_max = max(abs(self.beta0 + self.q_bound), abs(self.beta0 - self.q_bound))
        worst = float(self.step_size) * (self.alpha * f_max**2 + self.c)
        if worst >= 2.0:
            warnings.warn(
                f"nnsghmc: h·(α·max f_Q² + c) = {worst:.3g} ≥ 2 (h = {float(self.step_size):.3g}, "
                f"α = {self.alpha:.3g}, f_Q up to {f_max:.3g}), so the friction step can diverge "
                f"where the networks output large f_Q; take alpha ≤ "
                f"{(1.0 / float(self.step_size) - self.c) / f_max**2:.3g} or a smaller step_size.",
                RuntimeWarning,
                stacklevel=3,
            )

    def recipe(self) -> NNSGHMCRecipe:
        n = 1.0 if self.num_data is None else float(self.num_data)
        return NNSGHMCRecipe(
            meta_params=self.meta_params,
            alpha=self.alpha,
            beta0=self.beta0,
            c=self.c,
            energy_scale=self.energy_scale / n,
            momentum_scale=self.momentum_scale,
            grad_scale=self.grad_scale / n,
            d_scale=self.d_scale,
            q_bound=self.q_bound,
        )

    def init_aux(self, position: PyTree, key: jax.Array) -> dict[str, PyTree]:
        if self.init_momentum == "zero":
            return {"r": jax.tree.map(jnp.zeros_like, position)}
        return {"r": tree_normal_like(key, position)}


def make_nnsghmc(*, meta_params: Any = None, seed: int | None = None, **hyper: Any) -> NNSGHMC:
    """Registry factory: ``meta_params`` (dict or path) or ``seed`` (random meta-parameters)."""
    params = resolve_meta_params("nnsghmc", meta_params, seed, init_nnsghmc_params)
    return NNSGHMC(meta_params=params, **hyper)

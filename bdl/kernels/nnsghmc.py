"""NNSGHMC: the meta-learned SG-MCMC sampler of Gong, Li & Hernández-Lobato (ICLR 2019).

Recipe (Gong et al. 2019, Eq. 6, 8, 9), z = (θ, r), identity mass, g = ½‖r‖²:

    Q_θr = −diag(f_Q),  Q_rθ = diag(f_Q),  D_θθ = 0,  D_rr = diag(α·f_Q² + f_D + c),
    f_Q,i = β₀ + net_Q(u, pᵢ),          f_D,i = s_D·|net_D(u, pᵢ, gᵢ)|,

with per-coordinate network inputs (Sec. 3.2, App. E) the standardised energy per dimension,
momentum and gradient of :mod:`bdl.kernels.nnsghmc_inputs`,

    u = (Ũ(θ)/d − m_U)/s_U,      pᵢ = (rᵢ − m_r)/s_r,      gᵢ = (∂ᵢŨ(θ) − m_g)/s_g,

with constant statistics (m, s) from meta-training's pilot run, stored with the meta-parameters
(the same function in training and here). net_Q and net_D are small elementwise MLPs (1 hidden
layer of 10 units, as in the paper's MNIST set-up); α ≥ 0 and c > 0 are friction constants and
β₀ an offset on f_Q.

The correction Γ_i = Σ_j ∂_j(D_ij + Q_ij) of the declared blocks (Ma et al. 2015) is

    Γ_θ,i = −∂f_Q,i/∂rᵢ,    Γ_r,i = ∂f_Q,i/∂U · ∂ᵢU + ∂(α f_Q,i² + f_D,i)/∂rᵢ,

which :meth:`NNSGHMCRecipe.evaluate` computes from one pass of each network that carries its
partial derivatives (O(d)); :meth:`bdl.kernels.recipe.Recipe.evaluate` derives the same Γ by
forward-mode autodiff of the blocks, and the checker compares Γ with their dense divergence.

∂ᵢŨ enters only D_rr, an r-column block, whose divergence differentiates in r only: no Hessian of
U is ever needed. Any function of Ũ (here an affine one) is allowed: the chain rule through U is
exact, and so is it through p, because the statistics are constants.

Discretisation (the paper's "modified Euler", Eq. 7) = :class:`SymplecticEuler`:

    r ← r − h[D_rr r + f_Q ∇Ũ] + hT·Γ_r + √(2ThD_rr)·ξ       (at (θ, r)),
    θ ← θ + h f_Q r + hT·Γ_θ                                  (at (θ, r_new)).

Deep-learning parameterisation (as SGHMC): learning rate ℓ and momentum β give h = √(ℓ/n) and
α = (1 − β)√(n/ℓ) (the paper's α = friction/η); with f_Q ≈ β₀ = 1 the friction is ≈ α.
With all network outputs zero, NNSGHMC is exactly SGHMC with friction α·β₀² + c.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from bdl.kernels import elementwise_mlp
from bdl.kernels.blocks import Block, Elementwise, GroupKind
from bdl.kernels.elementwise_mlp import (
    MetaParams,
    init_mlp,
    load_meta_metadata,
    resolve_meta_params,
)
from bdl.kernels.integrators import SymplecticEuler
from bdl.kernels.nnsghmc_inputs import HEADER_KEY as STATS_KEY
from bdl.kernels.nnsghmc_inputs import (
    IDENTITY,
    InputStatistics,
    input_statistics,
    normalised_inputs,
    num_coordinates,
)
from bdl.kernels.parameterisation import LearningRate, learning_rate_or_step
from bdl.kernels.recipe import Context, Evaluation, Recipe, State, hamiltonian_grad
from bdl.kernels.recipe_kernel import RecipeKernel, StepSize
from bdl.kernels.sghmc import check_init_momentum
from bdl.utils import arguments
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
    """Gong et al.'s D(z), Q(z) with f_Q(u, pᵢ) and f_D(u, pᵢ, gᵢ) (module docstring); the
    inputs are :func:`bdl.kernels.nnsghmc_inputs.normalised_inputs` with ``input_stats``."""

    meta_params: MetaParams
    alpha: Any = 1.0
    beta0: Any = 1.0
    c: Any = 0.01
    input_stats: InputStatistics = IDENTITY
    d_scale: Any = 1.0
    q_bound: float | None = eqx.field(static=True, default=None)
    init_momentum: str = eqx.field(static=True, default="zero")

    @property
    def groups(self) -> dict[str, GroupKind]:
        return {"theta": "elementwise", "r": "elementwise"}

    def kinetic(self, z: State) -> jax.Array:
        return 0.5 * sum(jnp.sum(r * r) for r in jax.tree.leaves(z["r"]))

    def _inputs(self, z: State, ctx: Context) -> tuple[jax.Array, PyTree, PyTree]:
        dim = num_coordinates(z["theta"])
        return normalised_inputs(ctx.energy, z["r"], ctx.grad, dim, self.input_stats)

    def f_q(self, z: State, ctx: Context) -> PyTree:
        u, p, _ = self._inputs(z, ctx)
        (out,) = self.meta_params["q"].map_tree(u, p)
        if self.q_bound is not None:
            b = self.q_bound
            out = jax.tree.map(lambda x: b * jnp.tanh(x / b), out)
        return jax.tree.map(lambda x: self.beta0 + x, out)

    def f_d(self, z: State, ctx: Context) -> PyTree:
        u, p, g = self._inputs(z, ctx)
        (out,) = self.meta_params["d"].map_tree(u, p, g)
        return jax.tree.map(lambda x: self.d_scale * jnp.abs(x), out)

    def diffusion(self, z: State, ctx: Context) -> dict[str, Block]:
        friction = jax.tree.map(
            lambda q, d: self.alpha * q * q + d + self.c, self.f_q(z, ctx), self.f_d(z, ctx)
        )
        return {"r": Elementwise(friction)}

    def curl(self, z: State, ctx: Context) -> dict[tuple[str, str], Block]:
        fq = Elementwise(self.f_q(z, ctx))
        return {("theta", "r"): fq.map(jnp.negative), ("r", "theta"): fq}

    def evaluate(self, z: State, ctx: Context) -> Evaluation:
        """Blocks, Γ and ∇H from one pass of each network that carries its partial derivatives.

        The same Γ as :meth:`Recipe.evaluate` derives by forward-mode autodiff of the blocks
        (module docstring), written out because the networks are elementwise:

            Γ_θ = −∂f_Q/∂r,    Γ_r = ∂f_Q/∂U·∇Ũ + 2α·f_Q·∂f_Q/∂r + ∂f_D/∂r,

        with ∂f_Q/∂r = B'(net_Q)·∂net_Q/∂p / s_r, ∂f_Q/∂U = B'(net_Q)·∂net_Q/∂u / (d·s_U) (B the
        bound b·tanh(·/b), or the identity; s_r, s_U the input statistics) and
        ∂f_D/∂r = s_D·sign(net_D)·∂net_D/∂p / s_r. Each
        network runs once, values and partials stacked in one matrix product per layer
        (:meth:`ElementwiseMLP.map_tree_with_partials`), instead of a primal pass and one
        tangent pass per column group. The checker compares this Γ with the dense divergence of
        :meth:`diffusion` and :meth:`curl`, and a test with the generic derivation.
        """
        u, p, g = self._inputs(z, ctx)
        du = self.input_stats.energy_slope(num_coordinates(z["theta"]))
        dp = self.input_stats.momentum_slope()
        (q,), ((dq_du,), (dq_dp,)) = self.meta_params["q"].map_tree_with_partials(u, p, wrt=(0, 1))
        (d,), ((dd_dp,),) = self.meta_params["d"].map_tree_with_partials(u, p, g, wrt=(1,))

        def bounded(x: jax.Array) -> tuple[jax.Array, jax.Array]:
            if self.q_bound is None:
                return x, jnp.ones_like(x)
            t = jnp.tanh(x / self.q_bound)
            return self.q_bound * t, 1.0 - t * t

        def per_coordinate(q, dq_du, dq_dp, d, dd_dp, dudl):
            bq, slope = bounded(q)
            fq = self.beta0 + bq
            fq_r = dp * slope * dq_dp
            fq_u = du * slope * dq_du
            fd = self.d_scale * jnp.abs(d)
            fd_r = self.d_scale * dp * jnp.sign(d) * dd_dp
            friction = self.alpha * fq * fq + fd + self.c
            gamma_r = fq_u * dudl + 2.0 * self.alpha * fq * fq_r + fd_r
            return fq, friction, -fq_r, gamma_r

        fq, friction, gamma_theta, gamma_r = _unzip(
            jax.tree.map(per_coordinate, q, dq_du, dq_dp, d, dd_dp, ctx.grad), 4, z["r"]
        )
        curl = Elementwise(fq)
        return Evaluation(
            {"r": Elementwise(friction)},
            {("theta", "r"): curl.map(jnp.negative), ("r", "theta"): curl},
            {"theta": gamma_theta, "r": gamma_r},
            hamiltonian_grad(self, z, ctx),
        )

    def init_aux(self, position: PyTree, key: jax.Array) -> State:
        if self.init_momentum == "zero":
            return {"r": jax.tree.map(jnp.zeros_like, position)}
        return {"r": tree_normal_like(key, position)}

    def file_metadata(self) -> dict[str, Any]:
        """What :func:`~bdl.kernels.save_meta_params` stores beside the networks: the input
        statistics, so that the file alone rebuilds the same sampler."""
        return {STATS_KEY: self.input_stats.as_dict()}

    def with_friction(self, friction: float) -> NNSGHMCRecipe:
        return eqx.tree_at(lambda r: r.alpha, self, friction)


def _unzip(tree_of_tuples: PyTree, count: int, like: PyTree) -> tuple[PyTree, ...]:
    """A pytree of ``count``-tuples (leaves of ``like``) as ``count`` pytrees."""
    treedef = jax.tree.structure(like)
    leaves = treedef.flatten_up_to(tree_of_tuples)
    return tuple(jax.tree.unflatten(treedef, [leaf[k] for leaf in leaves]) for k in range(count))


def nnsghmc(
    step_size: StepSize | None = None,
    *,
    meta_params: Any = None,
    seed: int | None = None,
    alpha: float | None = None,
    beta0: float = 1.0,
    c: float = 0.01,
    learning_rate: float | None = None,
    momentum: float | None = None,
    input_stats: InputStatistics | Mapping[str, float] | None = None,
    d_scale: float = 1.0,
    q_bound: float | None = 4.0,
    init_momentum: str = "zero",
) -> RecipeKernel:
    """NNSGHMC with step size h (or learning rate ℓ and momentum β) and meta-parameters.

    Args:
        step_size: h (float or schedule); or ``None`` with ``learning_rate``.
        meta_params: ``{"q": net_Q, "d": net_D}`` (:class:`ElementwiseMLP`), the path of a file
            from :func:`save_meta_params`, or ``None`` for the package default (shipped trained
            parameters if present, else random ones with a fixed seed).
        seed: random meta-parameters from this seed instead.
        alpha: α ≥ 0, the friction multiplying f_Q² (default 1; derived from (ℓ, β) when given).
        beta0: β₀, the offset of f_Q.
        c: c > 0, the constant friction.
        learning_rate: ℓ, instead of ``step_size``: h = √(ℓ/n) at bind.
        momentum: β, with ``learning_rate``: α = (1 − β)√(n/ℓ) at bind.
        input_stats: the statistics (m, s) of the input normalisation
            (:class:`~bdl.kernels.nnsghmc_inputs.InputStatistics` or a mapping of its six
            fields); ``None``: those stored with the meta-parameters (the file given as
            ``meta_params``, or the shipped file), and no standardisation for networks given as
            objects or drawn from ``seed`` (or a file without statistics).
        d_scale: s_D ≥ 0, the scale of f_D.
        q_bound: if set, net_Q's output is bounded smoothly to (−b, b) by b·tanh(·/b) (the paper
            clamps f_Q to [−5, 5] in evaluation).
        init_momentum: ``"zero"`` or ``"sample"`` (r ~ N(0, I)).

    Returns:
        The kernel, a :class:`RecipeKernel`.
    """
    step = learning_rate_or_step("nnsghmc", step_size, learning_rate, momentum)
    if step is None:
        raise ValueError("nnsghmc: step_size is required (or learning_rate with momentum).")
    if learning_rate is not None and alpha is not None:
        raise ValueError("nnsghmc: alpha is derived from learning_rate and momentum; not both.")
    alpha = arguments.number(1.0 if alpha is None else alpha, "nnsghmc: alpha", at_least=0.0)
    c = arguments.number(c, "nnsghmc: c", above=0.0)
    beta0 = arguments.number(beta0, "nnsghmc: beta0")
    d_scale = arguments.number(d_scale, "nnsghmc: d_scale", at_least=0.0)
    if q_bound is not None:
        q_bound = arguments.number(q_bound, "nnsghmc: q_bound", above=0.0)
    check_init_momentum(init_momentum, "nnsghmc")
    params = resolve_meta_params("nnsghmc", meta_params, seed, init_nnsghmc_params, NETWORKS)
    stats = resolve_input_stats(meta_params, seed, input_stats)
    recipe = NNSGHMCRecipe(params, alpha, beta0, c, stats, d_scale, q_bound, init_momentum)
    _warn_if_friction_unstable(step, recipe)
    return RecipeKernel(recipe, step, SymplecticEuler(), name="nnsghmc")


def resolve_input_stats(meta_params: Any, seed: int | None, input_stats: Any) -> InputStatistics:
    """The input statistics a kernel uses: ``input_stats`` if given; else those in the
    meta-parameter file (``meta_params`` a path, or the shipped file when neither
    ``meta_params`` nor ``seed`` is given); else :data:`IDENTITY`."""
    if input_stats is not None:
        return input_statistics(input_stats)
    if isinstance(meta_params, str | os.PathLike):
        path: Any = meta_params
    elif meta_params is None and seed is None:
        path = elementwise_mlp.shipped_meta_params_path("nnsghmc")
    else:
        return IDENTITY
    if path is None:
        return IDENTITY
    stored = load_meta_metadata(path).get(STATS_KEY)
    if stored is None:
        return IDENTITY
    return input_statistics(stored, f"nnsghmc: the input statistics in {path}")


def _warn_if_friction_unstable(step: Any, recipe: NNSGHMCRecipe) -> None:
    """Warn when h·(α·max f_Q² + c) ≥ 2: the explicit friction update r ← (1 − h·D_rr)·r + …
    can then amplify r (f_D ≥ 0 only adds to D_rr). The advice is the setting that keeps
    h·D_rr ≤ 1 (r is damped without flipping sign), in the parameterisation the kernel was given:
    with (h, α) a smaller alpha or step_size; with (ℓ, β) a larger momentum only, since there
    h·α = 1 − β whatever the learning rate."""
    if recipe.q_bound is None or callable(step):
        return
    f_max = max(abs(recipe.beta0 + recipe.q_bound), abs(recipe.beta0 - recipe.q_bound))
    if isinstance(step, LearningRate):
        worst = (1.0 - step.momentum) * f_max**2  # h·α; h·c → 0 as n grows
        if worst >= 2.0:
            warnings.warn(
                f"nnsghmc: h·α·max f_Q² = (1 − momentum)·{f_max**2:.3g} = {worst:.3g} ≥ 2, so the "
                "friction step can diverge where the networks output large f_Q; take momentum "
                f"≥ {1.0 - 1.0 / f_max**2:.3g}, which keeps it ≤ 1. A smaller learning_rate does "
                "not help: with (learning_rate, momentum), h·α = 1 − momentum whatever the "
                "learning rate.",
                RuntimeWarning,
                stacklevel=3,
            )
        return
    h = float(step)
    worst = h * (recipe.alpha * f_max**2 + recipe.c)
    if worst >= 2.0:
        fixes = [f"step_size ≤ {1.0 / (recipe.alpha * f_max**2 + recipe.c):.3g} at this alpha"]
        if 1.0 / h > recipe.c:
            fixes.insert(0, f"alpha ≤ {(1.0 / h - recipe.c) / f_max**2:.3g} at this step_size")
        warnings.warn(
            f"nnsghmc: h·(α·max f_Q² + c) = {worst:.3g} ≥ 2 (h = {h:.3g}, α = {recipe.alpha:.3g}, "
            f"f_Q up to {f_max:.3g}), so the friction step can diverge where the networks output "
            f"large f_Q; take {' or '.join(fixes)}, which keeps h·(α·f_Q² + c) ≤ 1.",
            RuntimeWarning,
            stacklevel=3,
        )

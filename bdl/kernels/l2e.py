"""L2E: Learning to Explore (Kim, Jung, Kim & Lee, ICML 2024).

SGHMC's D = diag(0, C) and Q = [[0, −I], [I, 0]] with the kinetic gradient (∇_θ g, ∇_r g)
replaced by a learned field (α_φ, β_φ). Symplectic Euler (Kim et al. 2024, Eq. 6):

    r ← r − h[∇Ũ(θ) + α_φ(θ, r) + C·β_φ(θ, r)] + √(2ThC)·ξ,
    θ ← θ + h·β_φ(θ, r_new).

α_φ and β_φ come from ONE elementwise MLP (two hidden layers of 32, a shared trunk and a 2-output
last layer: the two heads) applied to 9 features per coordinate (App. I.1): the stochastic
gradient gᵢ, the parameter θᵢ, the momentum rᵢ and six running averages of the gradient
m_k ← d_k·m_k + (1 − d_k)·g with decays d = (0.1, 0.5, 0.9, 0.99, 0.999, 0.9999), updated with
the step's gradient before the features are formed. Each feature is divided by its RMS over its
tensor (leaf), x̂ = x/√(mean(x²) + ε). The heads are read in the units of the quantity they
correct, with the network as a residual around SGHMC:

    α_φ = σ_g·head_α(x̂),    β_φ = r + σ_r·head_β(x̂),

where σ_g and σ_r are the per-leaf RMS of the gradient and of the momentum. Zero heads give
α = 0, β = r: exactly SGHMC (with unit mass), step for step. This is ``form="residual"``, the
default, on a tanh network.

``form="paper"`` reads the heads as Eq. 6 writes them, the network outputs themselves, on a ReLU
network:

    α_φ = head_α(x̂),    β_φ = head_β(x̂).

Zero heads then freeze θ (β = 0); the paper form's initial parameters instead route the
normalised momentum through two ReLU units, head_β = relu(r̂) − relu(−r̂) = r̂ = r/σ_r, so it
starts at SGHMC with the momentum rescaled by its per-leaf RMS (σ_r ≈ 1 at T = 1).

The running averages are a history transform (:class:`GradientAverages`), not recipe variables,
and the field is neither constrained to be a gradient nor a function of z alone: ``bdl check
l2e`` reports L2E as approximate (the paper's Assumption 3.1 is assumed, not enforced). The
recipe the checker reads is SGHMC's D, Q with the learned field at the state's stored gradient
and averages.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from bdl.kernels.blocks import Block, Scalar
from bdl.kernels.elementwise_mlp import (
    ElementwiseMLP,
    MetaParams,
    init_mlp,
    resolve_meta_params,
)
from bdl.kernels.history import History
from bdl.kernels.integrators import SymplecticEuler
from bdl.kernels.parameterisation import step_and_friction
from bdl.kernels.recipe import Recipe, State
from bdl.kernels.recipe_kernel import RecipeKernel, StepSize
from bdl.kernels.sghmc import UnitMassMomentum, check_init_momentum
from bdl.utils.trees import tree_normal_like

PyTree = Any

#: decays of the gradient running averages (Kim et al. 2024, App. I.1)
EMA_DECAYS: tuple[float, ...] = (0.1, 0.5, 0.9, 0.99, 0.999, 0.9999)
NUM_FEATURES = 3 + len(EMA_DECAYS)
NETWORKS: dict[str, tuple[int, int]] = {"net": (NUM_FEATURES, 2)}
_EPS = 1e-30

#: how the two heads become (α_φ, β_φ): ``"residual"`` (scaled, around SGHMC; the default) or
#: ``"paper"`` (the outputs themselves, Kim et al. 2024 Eq. 6)
FORMS: tuple[str, ...] = ("residual", "paper")
DEFAULT_FORM = "residual"
#: the hidden activation of each form's initial network
ACTIVATION: dict[str, str] = {"residual": "tanh", "paper": "relu"}


def check_form(form: Any) -> str:
    """``form`` if it is one of :data:`FORMS`, else a ``ValueError`` naming the argument."""
    if not isinstance(form, str) or form not in FORMS:
        raise ValueError(
            f"l2e: form must be one of {list(FORMS)} ('residual': α = σ_g·head_α, "
            f"β = r + σ_r·head_β; 'paper': α, β = the network outputs, Kim et al. 2024 Eq. 6); "
            f"got {form!r}."
        )
    return form


def meta_params_name(form: str) -> str:
    """The shipped meta-parameter file of a form: ``l2e`` or ``l2e-paper``
    (``bdl/kernels/meta_params/<name>.npz``)."""
    return "l2e" if check_form(form) == "residual" else "l2e-paper"


def init_l2e_params(
    seed: int = 0,
    hidden: tuple[int, ...] = (32, 32),
    *,
    final_scale: float = 0.1,
    activation: str | None = None,
    form: str = DEFAULT_FORM,
) -> MetaParams:
    """Random meta-parameters: one MLP 9 → 32 → 32 → 2 (heads α, β) whose last layer is scaled
    by ``final_scale``; the activation defaults to the form's (:data:`ACTIVATION`).

    ``form="residual"``: ``final_scale=0`` makes L2E exactly SGHMC. ``form="paper"``: the first
    two units of every hidden layer carry relu(r̂) and relu(−r̂) (the first layer reads r̂ with
    weights ±1, later layers pass the two units on with weight 1) and head_β adds their
    difference, r̂, to the scaled random output; ``final_scale=0`` gives α = 0, β = r/σ_r.
    Needs a ReLU network and hidden widths of at least 2.
    """
    form = check_form(form)
    activation = ACTIVATION[form] if activation is None else activation
    key = jax.random.key(seed)
    sizes = (NUM_FEATURES, *hidden, 2)
    net = init_mlp(key, sizes, activation=activation, final_scale=final_scale)
    if form == "paper":
        net = _with_momentum_path(net)
    return {"net": net}


def _with_momentum_path(net: ElementwiseMLP) -> ElementwiseMLP:
    """``net`` with units 0 and 1 of every hidden layer set to relu(±r̂) and head_β += r̂."""
    if net.activation != "relu" or min(w.shape[1] for w in net.weights[:-1]) < 2:
        raise ValueError(
            "l2e: the paper form's initial network needs activation='relu' and hidden widths "
            f">= 2 (the momentum path); got {net.activation!r}, "
            f"{[int(w.shape[1]) for w in net.weights[:-1]]}."
        )
    weights, biases = list(net.weights), list(net.biases)
    w0 = weights[0].at[:, :2].set(0.0)
    weights[0] = w0.at[_R_FEATURE, 0].set(1.0).at[_R_FEATURE, 1].set(-1.0)
    for i in range(1, len(weights) - 1):
        weights[i] = weights[i].at[:, :2].set(0.0).at[0, 0].set(1.0).at[1, 1].set(1.0)
    for i in range(len(biases) - 1):
        biases[i] = biases[i].at[:2].set(0.0)
    weights[-1] = weights[-1].at[0, 1].add(1.0).at[1, 1].add(-1.0)
    return ElementwiseMLP(tuple(weights), tuple(biases), net.activation)


def _rms(x: jax.Array) -> jax.Array:
    return jnp.sqrt(jnp.mean(jnp.square(x)) + _EPS)


def update_emas(emas: tuple[PyTree, ...], grad: PyTree) -> tuple[PyTree, ...]:
    """m_k ← d_k·m_k + (1 − d_k)·g for every decay d_k."""
    return tuple(
        jax.tree.map(lambda m, g, d=d: d * m + (1.0 - d) * g, m, grad)
        for d, m in zip(EMA_DECAYS, emas, strict=True)
    )


def features(theta: PyTree, r: PyTree, grad: PyTree, emas: tuple[PyTree, ...]) -> list[PyTree]:
    """The 9 per-coordinate features (g, θ, r, m_0.1, …, m_0.9999), each divided by its RMS over
    its leaf."""
    raw = [grad, theta, r, *emas]
    return [jax.tree.map(lambda x: x / _rms(x), f) for f in raw]


def learned_field(
    net: ElementwiseMLP,
    theta: PyTree,
    r: PyTree,
    grad: PyTree,
    emas: tuple[PyTree, ...],
    form: str = DEFAULT_FORM,
) -> tuple[PyTree, PyTree]:
    """(α_φ, β_φ) = (σ_g·head_α, r + σ_r·head_β) (``form="residual"``) or (head_α, head_β)
    (``form="paper"``, Kim et al. 2024 Eq. 6) at (θ, r) given the gradient features.

    The same function as :func:`features` followed by ``net.map_tree``, computed on one flat
    vector per feature: the leaves are concatenated once, the per-leaf RMS of all features come
    from one segment sum and go back to the leaves' entries by one gather, and the first layer
    Σ_k W_k·x̂_k + b is one matrix product over the eight features that do not depend on r plus
    the r term. Within a step of
    :class:`SymplecticEuler` only r changes between the two evaluations, so the compiled step
    computes the eight-feature product once and shares it (common subexpressions).
    """
    leaves, treedef = jax.tree.flatten(theta)
    sizes = [int(np.size(leaf)) for leaf in leaves]

    def flat(tree: PyTree) -> jax.Array:
        parts = [jnp.ravel(x) for x in treedef.flatten_up_to(tree)]
        return parts[0] if len(parts) == 1 else jnp.concatenate(parts)

    fixed = jnp.stack([flat(grad), flat(theta), *(flat(m) for m in emas)])  # (8, N)
    r_flat = flat(r)
    rms_fixed = _per_leaf_rms(fixed, sizes)  # (8, leaves)
    rms_r = _per_leaf_rms(r_flat[None], sizes)  # (1, leaves)
    w0, b0 = net.weights[0], net.biases[0]
    fixed_rows = [i for i in range(NUM_FEATURES) if i != _R_FEATURE]
    base = (
        jnp.tensordot(
            w0[jnp.asarray(fixed_rows)], fixed / _per_coordinate(rms_fixed, sizes), axes=(0, 0)
        )
        + b0[:, None]
    )
    r_hat = r_flat / _per_coordinate(rms_r, sizes)[0]
    heads = net.after_first_layer(base + w0[_R_FEATURE][:, None] * r_hat[None])  # (N, 2)
    if form == "paper":
        alpha, beta = heads[:, 0], heads[:, 1]
    else:
        alpha = _per_coordinate(rms_fixed[:1], sizes)[0] * heads[:, 0]
        beta = r_flat + _per_coordinate(rms_r, sizes)[0] * heads[:, 1]
    return _unflat(alpha, treedef, leaves, sizes), _unflat(beta, treedef, leaves, sizes)


#: the index of r among the features (g, θ, r, m_0.1, …)
_R_FEATURE = 2


def _segments(sizes: list[int]) -> np.ndarray:
    """The leaf index of every coordinate of the concatenated leaves (a constant of the trace)."""
    return np.repeat(np.arange(len(sizes)), sizes)


def _per_leaf_rms(x: jax.Array, sizes: list[int]) -> jax.Array:
    """√(mean(x²) + ε) of every row of ``x`` (F, N) over each leaf's coordinates: (F, leaves)."""
    if len(sizes) == 1:
        return jnp.sqrt(jnp.mean(jnp.square(x), axis=1, keepdims=True) + _EPS)
    sums = jax.ops.segment_sum(
        jnp.square(x).T, _segments(sizes), num_segments=len(sizes), indices_are_sorted=True
    )  # (leaves, F)
    return jnp.sqrt(sums.T / np.asarray(sizes, dtype=np.float32) + _EPS)


def _per_coordinate(per_leaf: jax.Array, sizes: list[int]) -> jax.Array:
    """(F, leaves) → (F, N): each leaf's value repeated over its coordinates."""
    if len(sizes) == 1:
        return per_leaf
    return jnp.take(per_leaf, _segments(sizes), axis=1)


def _unflat(x: jax.Array, treedef: Any, leaves: list[jax.Array], sizes: list[int]) -> PyTree:
    parts = jnp.split(x, [int(s) for s in np.cumsum(sizes)[:-1]]) if len(sizes) > 1 else [x]
    return jax.tree.unflatten(
        treedef, [p.reshape(jnp.shape(v)) for p, v in zip(parts, leaves, strict=True)]
    )


class L2ERecipe(UnitMassMomentum):
    """SGHMC's D = diag(0, C) and Q = [[0, −I], [I, 0]] with the kinetic field (α_φ, β_φ) in
    place of ∇g, at fixed gradient features (set by :class:`GradientAverages`)."""

    net: ElementwiseMLP
    friction: Block = eqx.field(default=Scalar(1.0), kw_only=True)
    grad: PyTree = None
    emas: tuple[PyTree, ...] = ()
    init_momentum: str = eqx.field(static=True, default="zero")
    form: str = eqx.field(static=True, default=DEFAULT_FORM)

    @property
    def meta_params(self) -> MetaParams:
        return {"net": self.net}

    def kinetic(self, z: State) -> jax.Array:
        return 0.5 * sum(jnp.sum(r * r) for r in jax.tree.leaves(z["r"]))

    def kinetic_grad(self, z: State) -> State:
        alpha, beta = learned_field(self.net, z["theta"], z["r"], self.grad, self.emas, self.form)
        return {"theta": alpha, "r": beta}

    def init_aux(self, position: PyTree, key: jax.Array) -> State:
        if self.init_momentum == "zero":
            return {"r": jax.tree.map(jnp.zeros_like, position)}
        return {"r": tree_normal_like(key, position)}


class GradientHistory(NamedTuple):
    """The gradient running averages m_k and the last gradient."""

    emas: tuple[PyTree, ...]
    grad: PyTree


class GradientAverages(History):
    """L2E's features from the gradient history: m_k ← d_k·m_k + (1 − d_k)·g, updated with the
    step's gradient before the move, and that gradient itself."""

    @property
    def adaptive(self) -> bool:
        return True

    def init(self, position: PyTree) -> GradientHistory:
        zeros = jax.tree.map(jnp.zeros_like, position)
        return GradientHistory(tuple(zeros for _ in EMA_DECAYS), zeros)

    def prepare(self, state: GradientHistory, grad: PyTree) -> GradientHistory:
        return GradientHistory(update_emas(state.emas, grad), grad)

    def condition(self, recipe: Recipe, state: GradientHistory) -> Recipe:
        return eqx.tree_at(
            lambda r: (r.grad, r.emas), recipe, (state.grad, state.emas), is_leaf=_is_none
        )


def _is_none(x: Any) -> bool:
    return x is None


def l2e(
    step_size: StepSize | None = None,
    friction: float | None = None,
    *,
    meta_params: Any = None,
    seed: int | None = None,
    learning_rate: float | None = None,
    momentum: float | None = None,
    init_momentum: str = "zero",
    form: str = DEFAULT_FORM,
) -> RecipeKernel:
    """L2E with step size h and friction C (or learning rate ℓ and momentum β).

    Args:
        step_size: h (float or schedule); or ``None`` with ``learning_rate``.
        friction: C > 0 (default 1; derived from (ℓ, β) when given).
        meta_params: ``{"net": ElementwiseMLP(9 → … → 2)}``, a path from
            :func:`save_meta_params`, or ``None`` for the package default.
        seed: random meta-parameters from this seed instead.
        learning_rate: ℓ, instead of ``step_size``: h = √(ℓ/n) at bind.
        momentum: β, with ``learning_rate``: C = (1 − β)√(n/ℓ) at bind.
        init_momentum: ``"zero"`` or ``"sample"`` (r ~ N(0, I)).
        form: how the heads become (α_φ, β_φ): ``"residual"`` (default; α = σ_g·head_α,
            β = r + σ_r·head_β, tanh network, zero heads = SGHMC) or ``"paper"`` (α = head_α,
            β = head_β as in Kim et al. 2024 Eq. 6, ReLU network). Each form has its own
            shipped meta-parameters (``l2e.npz``, ``l2e-paper.npz``).

    Returns:
        The kernel, a :class:`RecipeKernel`.
    """
    form = check_form(form)
    step, friction = step_and_friction("l2e", step_size, friction, learning_rate, momentum)
    check_init_momentum(init_momentum, "l2e")
    params = resolve_meta_params(
        meta_params_name(form),
        meta_params,
        seed,
        functools.partial(init_l2e_params, form=form),
        NETWORKS,
    )
    recipe = L2ERecipe(
        params["net"], friction=Scalar(friction), init_momentum=init_momentum, form=form
    )
    return RecipeKernel(recipe, step, SymplecticEuler(), GradientAverages(), name="l2e")

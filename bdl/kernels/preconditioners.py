"""Diagonal preconditioners as small composable objects (in the spirit of Optax transforms).

A preconditioner maintains a diagonal mass M (a pytree shaped like θ, or with one 0-d array per
leaf of θ) from the stochastic gradients the kernel computes anyway — no extra backpropagation.
Kernels use it as

* SGLD (Euler–Maruyama): D = G = M⁻¹, Q = 0:  θ ← θ − hG∇Ũ + √(2ThG)·ξ;
* SGHMC (symplectic Euler): r ← r − h∇Ũ − hγr + √(2ThγM)·ξ,  θ ← θ + hM⁻¹r (Wenzel et al.
  2020, Eq. 8–10; g = ½rᵀM⁻¹r, D = diag(0, γM), Q = [[0, −I], [I, 0]]); when M changes the
  momentum is rescaled r ← M_new^{1/2} M_old^{−1/2} r (App. D), which keeps the canonical
  momentum p = M^{−1/2}r unchanged — so the kernel stores p and the rescaling costs nothing.

A preconditioner is a :class:`bdl.kernels.history.History` transform: ``prepare`` (RMSprop:
initialise V at the first step), ``condition`` (set the recipe's mass to the current M), the move,
then ``update`` (fold g into the statistics; M may change for the next step).

M never depends on the current θ — only on past gradients — so every recipe has Γ = 0 and
each step is an exact discretisation of the recipe with the M it uses. What is approximate is
the *history* dependence, which the checker reports when M changes from one step to the next:

* :class:`RMSprop` (pSGLD, Li et al. 2016, Alg. 1): V ← αV + (1−α)ḡ², M = λ + √V
  (G = 1/(λ + √V)), with ḡ = ∇Ũ/n the mean minibatch gradient (``grad_scale`` = 1/n, set at
  ``bind``, so λ has the paper's meaning), updated every step → approximate ("depends on
  gradient history");
* :class:`Layerwise` (Wenzel et al. 2020, App. D, Alg. 4): per leaf l of θ,
  m_l = √(mean over the leaf's entries of g², averaged over K gradients + ε), M_l = m_l / min m,
  with g the mean-loss gradient ∇G̃ = ∇Ũ/n (``grad_scale`` = 1/n, set at ``bind``). ``"fixed"``:
  estimated once from the first K gradients, then frozen; ``"semi"`` (semi-adaptive): re-estimated
  from the last K gradients of every window of ``update_every`` steps (default one epoch,
  ``target.num_batches``). Between updates the recipe is constant → exact.
* :class:`Identity`: M = I.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from bdl.kernels.blocks import Elementwise, PerLeaf
from bdl.kernels.history import History
from bdl.kernels.recipe import Recipe
from bdl.utils import arguments

PyTree = Any

_DEFAULT_UPDATE_EVERY = 100  # steps, when the target has no epochs (e.g. a bdl.Potential)


class PreconditionerState(NamedTuple):
    """``mass``: the diagonal M the next step uses; ``stats``: running gradient statistics;
    ``count``: gradients folded in so far.

    Attributes:
        mass: the diagonal M the next step uses.
        stats: running gradient statistics.
        count: gradients folded in so far.
    """

    mass: PyTree
    stats: PyTree
    count: jax.Array


class Preconditioner(History):
    """A diagonal mass M adapted from past stochastic gradients (see module docstring)."""


def rescale_momentum(r: PyTree, old_mass: PyTree, new_mass: PyTree) -> PyTree:
    """r ← M_new^{1/2} M_old^{−1/2} r (Wenzel et al. 2020, App. D): M^{−1/2}r is preserved.

    Args:
        r: the momentum.
        old_mass: M_old, a pytree like ``r`` (or of 0-d arrays).
        new_mass: M_new, likewise.

    Returns:
        The rescaled momentum.
    """
    return jax.tree.map(lambda x, mo, mn: x * jnp.sqrt(mn / mo), r, old_mass, new_mass)


def _leaf_scalars(position: PyTree, value: float) -> PyTree:
    return jax.tree.map(lambda x: jnp.full((), value, jnp.result_type(x)), position)


# --------------------------------------------------------------------------------- identity
class Identity(Preconditioner):
    """M = I (or the recipe's own constant mass): no statistics, the recipe as declared."""

    def init(self, position: PyTree) -> tuple[()]:
        return ()

    def condition(self, recipe: Recipe, state: PyTree) -> Recipe:
        return recipe


# ---------------------------------------------------------------------------------- RMSprop
class RMSprop(Preconditioner):
    """pSGLD's preconditioner (Li et al. 2016, Alg. 1): with ḡ = ∇Ũ/n the mean minibatch gradient,

        V ← αV + (1−α)ḡ²,    G = 1/(λ + √V),  i.e. M = λ + √V

    (Kim et al. 2024, Eq. 3 write ḡ = ∇Ũ/n). The factor 1/n is ``grad_scale``, set at
    :meth:`bind` from the target's n, so λ and α have their paper meanings and G ≈ n/|∇Ũ|.

    G_t uses the gradients of steps < t (V is updated after the move, the order of Kim et al.'s
    Eq. 3), except at the very first step, which initialises V = ḡ₁² from its own gradient
    (instead of V = 0, whose G = 1/λ would make the first steps explode). Li et al. (2016,
    Alg. 1) fold ḡ_t in before the move; the one-step lag makes G_t independent of the current θ,
    so Γ = 0 is exact for each step and the only approximation is the adaptation itself.

    Args:
        alpha: EMA decay α ∈ [0, 1) (default 0.99, as Li et al. 2016).
        eps: λ > 0, the regulariser of the diagonal (default 1e-5, as Li et al. 2016).
        grad_scale: factor applied to ∇Ũ before squaring; ``None``: 1/n at :meth:`bind` (1 when
            unbound, e.g. on a :class:`bdl.Potential`, whose n is 1).
    """

    alpha: float = 0.99
    eps: float = 1e-5
    grad_scale: float | None = None

    def __check_init__(self) -> None:
        if not isinstance(self.alpha, jax.core.Tracer):
            arguments.number(self.alpha, "rmsprop: alpha", at_least=0.0, below=1.0)
        if not isinstance(self.eps, jax.core.Tracer):
            arguments.number(self.eps, "rmsprop: eps", above=0.0)
        if self.grad_scale is not None and not isinstance(self.grad_scale, jax.core.Tracer):
            arguments.number(self.grad_scale, "rmsprop: grad_scale", above=0.0)

    def bind(self, target: Any) -> RMSprop:
        if self.grad_scale is not None:
            return self
        return RMSprop(self.alpha, self.eps, 1.0 / float(target.n))

    @property
    def adaptive(self) -> bool:
        return True

    def init(self, position: PyTree) -> PreconditionerState:
        ones = jax.tree.map(jnp.ones_like, position)
        zeros = jax.tree.map(jnp.zeros_like, position)
        return PreconditionerState(ones, zeros, jnp.zeros((), jnp.int32))

    def _mass(self, v: PyTree) -> PyTree:
        return jax.tree.map(lambda x: self.eps + jnp.sqrt(x), v)

    def _square(self, g: jax.Array) -> jax.Array:
        """ḡ² with ḡ = grad_scale·∇Ũ (the mean minibatch gradient once bound)."""
        mean = g if self.grad_scale is None else self.grad_scale * g
        return mean * mean

    def prepare(self, state: PreconditionerState, grad: PyTree) -> PreconditionerState:
        first = state.count == 0
        v = jax.tree.map(lambda s, g: jnp.where(first, self._square(g), s), state.stats, grad)
        return state._replace(mass=self._mass(v), stats=v)

    def condition(self, recipe: Recipe, state: PreconditionerState) -> Recipe:
        return recipe.with_mass(Elementwise(state.mass))

    def update(self, state: PreconditionerState, grad: PyTree) -> PreconditionerState:
        a = self.alpha
        v = jax.tree.map(lambda s, g: a * s + (1.0 - a) * self._square(g), state.stats, grad)
        return PreconditionerState(self._mass(v), v, state.count + 1)


# -------------------------------------------------------------------------------- layerwise
class Layerwise(Preconditioner):
    """Wenzel et al. (2020, App. D) layerwise diagonal mass, fixed or semi-adaptive.

    Per leaf l (one "model variable"), from K stochastic gradients g^(k) of the mean loss
    (g = ``grad_scale``·∇Ũ with ``grad_scale`` = 1/n after :meth:`bind`):

        m_l = √( (1/K) Σ_k mean_i (g^(k)_{l,i})² + ε ),    M_l = m_l / min_j m_j.

    The gradients are the ones the kernel computes at its own steps (at the chain's current θ,
    whereas Alg. 4 of the paper evaluates K fresh minibatches at a fixed θ). M = I until the
    first estimate.

    Args:
        mode: ``"semi"`` (re-estimated at the end of every window of ``update_every`` steps from
            its last K gradients) or ``"fixed"`` (estimated once from the first K gradients).
        update_every: window length in steps (``"semi"``); ``None``: one epoch,
            ``target.num_batches``, resolved at :meth:`bind` (100 when the target has no epochs
            or the preconditioner is unbound).
        num_gradients: K (default 32, as the paper); at most ``update_every``.
        eps: ε (default 1e-7, as the paper).
        grad_scale: factor applied to ∇Ũ before squaring; ``None``: 1/n at :meth:`bind` (1 when
            unbound).
    """

    mode: Literal["semi", "fixed"] = eqx.field(static=True, default="semi")
    update_every: int | None = eqx.field(static=True, default=None)
    num_gradients: int = eqx.field(static=True, default=32)
    eps: float = 1e-7
    grad_scale: float | None = None

    def __check_init__(self) -> None:
        if self.mode not in ("semi", "fixed"):
            raise ValueError(f"layerwise: mode must be 'semi' or 'fixed'; got {self.mode!r}.")
        if self.update_every is not None and (
            not isinstance(self.update_every, int) or self.update_every < 1
        ):
            raise ValueError(
                f"layerwise: update_every must be an int >= 1; got {self.update_every}."
            )
        if not isinstance(self.num_gradients, int) or self.num_gradients < 1:
            raise ValueError(
                f"layerwise: num_gradients must be an int >= 1; got {self.num_gradients}."
            )
        arguments.number(self.eps, "layerwise: eps", at_least=0.0)
        if self.grad_scale is not None:
            arguments.number(self.grad_scale, "layerwise: grad_scale", above=0.0)

    def bind(self, target: Any) -> Layerwise:
        every = self.update_every
        if every is None:
            every = int(getattr(target, "num_batches", 0) or _DEFAULT_UPDATE_EVERY)
        scale = self.grad_scale if self.grad_scale is not None else 1.0 / float(target.n)
        return Layerwise(self.mode, every, self.num_gradients, self.eps, scale)

    @property
    def window(self) -> int:
        """Steps per estimation window (``"semi"``); K for ``"fixed"``."""
        if self.mode == "fixed":
            return self.num_gradients
        return self.update_every if self.update_every is not None else _DEFAULT_UPDATE_EVERY

    @property
    def gradients_per_estimate(self) -> int:
        return min(self.num_gradients, self.window)

    def init(self, position: PyTree) -> PreconditionerState:
        return PreconditionerState(
            _leaf_scalars(position, 1.0), _leaf_scalars(position, 0.0), jnp.zeros((), jnp.int32)
        )

    def condition(self, recipe: Recipe, state: PreconditionerState) -> Recipe:
        return recipe.with_mass(PerLeaf(state.mass))

    def update(self, state: PreconditionerState, grad: PyTree) -> PreconditionerState:
        count = state.count + 1  # gradients seen, this one included
        k = self.gradients_per_estimate
        if self.mode == "fixed":
            use = count <= k
            due = count == k
        else:
            pos = jnp.mod(count - 1, self.window)  # this gradient's place in its window
            use = pos >= self.window - k
            due = pos == self.window - 1
        scale = 1.0 if self.grad_scale is None else self.grad_scale
        stats = jax.tree.map(
            lambda s, g: s + jnp.where(use, jnp.mean(jnp.square(scale * g)), 0.0).astype(s.dtype),
            state.stats,
            grad,
        )
        estimate = layerwise_mass(jax.tree.map(lambda s: s / k, stats), self.eps)
        mass = jax.tree.map(lambda new, old: jnp.where(due, new, old), estimate, state.mass)
        stats = jax.tree.map(lambda s: jnp.where(due, jnp.zeros_like(s), s), stats)
        return PreconditionerState(mass, stats, count)


def layerwise_mass(mean_square: PyTree, eps: float = 1e-7) -> PyTree:
    """M_l = m_l / min_j m_j with m_l = √(mean_square_l + ε), one 0-d array per leaf.

    Args:
        mean_square: the mean squared gradient of each leaf.
        eps: ε.

    Returns:
        The mass of each leaf, a pytree of 0-d arrays.
    """
    m = jax.tree.map(lambda v: jnp.sqrt(v + eps), mean_square)
    smallest = jnp.min(jnp.stack([jnp.ravel(x)[0] for x in jax.tree.leaves(m)]))
    return jax.tree.map(lambda x: x / smallest, m)


# -------------------------------------------------------------------------------- factories
#: the default preconditioner of every kernel: M = I
IDENTITY = Identity()


def identity() -> Identity:
    """M = I.

    Returns:
        The identity preconditioner.
    """
    return Identity()


def rmsprop(alpha: float = 0.99, eps: float = 1e-5, grad_scale: float | None = None) -> RMSprop:
    """pSGLD's RMSprop preconditioner (Li et al. 2016), adapted every step, on the mean
    minibatch gradient ∇Ũ/n (``grad_scale`` = 1/n at bind).

    Args:
        alpha: the EMA decay α ∈ [0, 1).
        eps: λ > 0, the regulariser of the diagonal.
        grad_scale: the factor applied to ∇Ũ (``None``: 1/n at bind).

    Returns:
        The preconditioner.
    """
    return RMSprop(alpha, eps, grad_scale)


def layerwise(
    mode: Literal["semi", "fixed"] = "semi",
    update_every: int | None = None,
    num_gradients: int = 32,
    eps: float = 1e-7,
    grad_scale: float | None = None,
) -> Layerwise:
    """Wenzel et al. (2020, App. D) layerwise preconditioner (``"semi"`` or ``"fixed"``).

    Args:
        mode: ``"semi"`` (re-estimated every ``update_every`` steps) or ``"fixed"`` (once).
        update_every: the window in steps (``None``: one epoch, at bind).
        num_gradients: K, the gradients of each estimate.
        eps: ε.
        grad_scale: the factor applied to ∇Ũ (``None``: 1/n at bind).

    Returns:
        The preconditioner, for ``sghmc(preconditioner=...)`` and the other kernels.
    """
    return Layerwise(mode, update_every, num_gradients, eps, grad_scale)


def check_preconditioner(value: Any, owner: str) -> None:
    """Raise a ValueError naming ``preconditioner`` unless ``value`` is one.

    Args:
        value: the argument given.
        owner: the kernel whose argument it is, for the message.

    Raises:
        ValueError: ``value`` is not a preconditioner.
    """
    if not isinstance(value, Preconditioner):
        raise ValueError(
            f"{owner}: preconditioner must be a bdl.kernels.preconditioners object (identity(), "
            f"rmsprop(), layerwise()); got {arguments.shown(value)}."
        )

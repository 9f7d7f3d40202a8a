"""Conjugate Gibbs updates of Gamma precisions, composed with any kernel every k steps.

Chen, Fox & Guestrin (2014, Sec. 5) resample the weight-decay precisions of a network by Gibbs
steps inside SGHMC. For a centred hierarchical prior (:class:`bdl.HierarchicalNormal` with
``precision=dist.Gamma(a, b)``), the m weights w_i of a group with location μ give

    λ | w, rest  ∝  Gamma(λ; a, b) Π_i N(w_i; μ, 1/λ)  =  Gamma(a + m/2, b + S/2),
    S = Σ_i (w_i − μ)².

bdl samples u = log λ with the log-Jacobian u in the prior, and tempers the whole target,
π_T ∝ exp(−U/T). The conditional density of u is then ∝ exp([(a + m/2)u − (b + S/2)e^u]/T), so
λ = e^u is drawn exactly from

    λ | rest ~ Gamma((a + m/2)/T, (b + S/2)/T)    (shape, rate),

which is Gamma(a + m/2, b + S/2) at T = 1; at T = 0 it is the maximiser of the conditional,
λ = (a + m/2)/(b + S/2). The likelihood does not involve λ (centred form), so the draw needs no
data. With ARD (``per="input"``) each input unit's λ_j has its own m_j and S_j.

A draw from the exact conditional of π_T leaves π_T invariant, so ``gibbs(kernel, every=k)`` —
k steps of ``kernel``, then one Gibbs draw of every conjugate precision — keeps the stationary law
of ``kernel`` whenever the kernel's auxiliary variables are independent of θ given nothing else
(g(θ, r) independent of θ: SGLD, SGHMC, SGNHT, NNSGHMC, …). The stationarity checker checks the
inner kernel and, for this wrapper, that ∂g/∂θ = 0 (Kinetic-L2E's g = ½‖r − f_φ(θ)‖² fails it).
The momentum of u is kept: under exp(−H/T) it is independent of θ.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from bdl.kernels.base import EnergyAndGrad, Info, Kernel
from bdl.kernels.recipe import Recipe
from bdl.kernels.recipe_kernel import RecipeState
from bdl.kernels.wrapper import Wrapper, base_kernel, check_inner
from bdl.utils import arguments

if TYPE_CHECKING:  # the DSL imports NumPyro, which `bdl kernels` does not need
    from bdl.dsl.hierarchical import HierarchicalLeaf, HyperGroup
    from bdl.dsl.priors import LeafInfo

PyTree = Any


@dataclasses.dataclass(frozen=True, eq=False)
class Conjugate:
    """A hyper-parameter group with a Gamma(a, b) precision and its centred member leaves
    (index in the flattened network leaves, leaf prior, leaf info)."""

    group: HyperGroup
    a: float
    b: float
    members: tuple[tuple[int, HierarchicalLeaf, LeafInfo], ...]


def conjugate_groups(target: Any) -> tuple[Conjugate, ...]:
    """The groups of ``target`` whose precision has a conjugate Gamma conditional."""
    from bdl.dsl.hierarchical import HierarchicalLeaf

    groups = getattr(target, "hyper_groups", ())
    found = []
    for g in groups:
        if not g.spec.gibbs_conjugate or "precision" not in g.spec.hyper_priors:
            continue
        members = tuple(
            (i, p, info)
            for i, (p, info) in enumerate(zip(target.leaf_priors, target.leaf_infos, strict=True))
            if isinstance(p, HierarchicalLeaf) and p.group == g.key
        )
        gamma = g.spec.precision
        found.append(Conjugate(g, float(gamma.concentration), float(gamma.rate), members))
    return tuple(found)


def conditional_precision(
    key: jax.Array, group: Conjugate, net: list[jax.Array], hyper: PyTree, temperature: jax.Array
) -> jax.Array:
    """One draw of λ from its tempered conditional (module docstring); shape of the group."""
    count = jnp.zeros(group.group.shape)
    squares = jnp.zeros(group.group.shape)
    values = group.group.get(hyper)
    for i, prior, info in group.members:
        w = net[i]  # centred: the sampled coordinate is the weight
        loc, _ = prior.loc_scale(values, info)
        d2 = jnp.square(w - loc)
        if prior.shape:  # ARD: sum over every axis but the input axis
            axes = tuple(a for a in range(w.ndim) if a != prior.axis)
            squares = squares + jnp.sum(d2, axis=axes)
            count = count + w.size // prior.shape[0]
        else:
            squares = squares + jnp.sum(d2)
            count = count + w.size
    shape = group.a + 0.5 * count
    rate = group.b + 0.5 * squares
    t = jnp.asarray(temperature, squares.dtype)
    hot = t > 0
    safe_t = jnp.where(hot, t, 1.0)
    draw = jax.random.gamma(key, shape / safe_t, dtype=squares.dtype) * safe_t / rate
    return jnp.where(hot, draw, shape / rate)


class GibbsState(NamedTuple):
    """The inner kernel's state and the number of steps taken (a draw follows every
    ``every``-th)."""

    inner: Any
    count: jax.Array


class Gibbs(Wrapper):
    """``inner`` with an exact Gibbs draw of every conjugate Gamma precision after every
    ``every``-th step (Chen et al. 2014, Sec. 5).

    Args:
        inner: any kernel whose state holds the model's position as its recipe's θ (every
            registered kernel but Entropy-MCMC, which samples a joint position).
        every: k ≥ 1, steps of ``inner`` between Gibbs draws.

    The conjugate groups are read from the model at :meth:`bind` (``bdl.sample`` binds);
    a model with none raises there. The state is a :class:`GibbsState`: the inner kernel's
    and the number of steps taken.
    """

    every: int = eqx.field(static=True, default=1)
    groups: tuple[Conjugate, ...] = eqx.field(static=True, default=())
    hyper_groups: tuple[HyperGroup, ...] = eqx.field(static=True, default=())
    net_treedef: Any = eqx.field(static=True, default=None)

    def __check_init__(self) -> None:
        check_inner(self.inner, "gibbs")
        arguments.integer(self.every, "gibbs(every=...)", minimum=1)

    @property
    def name(self) -> str:
        return f"gibbs({self.inner.name})"

    def bind(self, target: Any) -> Gibbs:
        groups = conjugate_groups(target)
        if not groups:
            raise ValueError(
                f"gibbs: {getattr(target, 'name', 'the target')} has no hierarchical prior with a "
                "conjugate precision; declare bdl.HierarchicalNormal(precision=dist.Gamma(a, b), "
                "centred=True, ...) on the weights, or sample without the gibbs wrapper."
            )
        return dataclasses.replace(
            self,
            inner=self.inner.bind(target),
            groups=groups,
            hyper_groups=target.hyper_groups,
            net_treedef=target.net_treedef,
        )

    def init(self, position: PyTree, key: jax.Array) -> GibbsState:
        state = self.inner.init(position, key)
        inner = self.inner.recipe_kernel()
        theta = None if inner is None else self.inner.recipe_state(state).z.get("theta")
        if theta is None or jax.tree.structure(theta) != jax.tree.structure(position):
            raise ValueError(
                f"gibbs: the inner kernel {self.inner.name} does not sample the model's position "
                "as its θ (Entropy-MCMC samples a joint position); wrap the kernel inside it, "
                "e.g. entropy(gibbs(sghmc(...))) is not supported, gibbs(sghmc(...)) is."
            )
        return GibbsState(state, jnp.zeros((), jnp.int32))

    def step(
        self,
        key: jax.Array,
        state: GibbsState,
        energy_and_grad: EnergyAndGrad,
        step_size: jax.Array,
        temperature: jax.Array,
    ) -> tuple[GibbsState, Info]:
        k_inner, k_gibbs = jax.random.split(key)
        inner, info = self.inner.step(k_inner, state.inner, energy_and_grad, step_size, temperature)
        count = state.count + 1
        if self.groups:
            recipe_state = self.inner.recipe_state(inner)
            z = recipe_state.z
            drawn = self.draw(k_gibbs, z["theta"], temperature)
            due = jnp.mod(count, self.every) == 0
            theta = jax.tree.map(lambda new, old: jnp.where(due, new, old), drawn, z["theta"])
            inner = self.inner.with_recipe_state(
                inner, recipe_state._replace(z={**z, "theta": theta})
            )
        return GibbsState(inner, count), info

    def draw(self, key: jax.Array, position: PyTree, temperature: jax.Array) -> PyTree:
        """``position`` with every conjugate precision drawn from its conditional at T.

        Args:
            key: the draw's random key.
            position: the current position.
            temperature: T.

        Returns:
            The position with the precisions drawn.
        """
        from bdl.dsl.hierarchical import constrain_hyper

        net = self.net_treedef.flatten_up_to(position["net"])
        hyper = constrain_hyper(self.hyper_groups, position["hyper"])
        new_hyper = jax.tree.map(lambda x: x, position["hyper"])
        for i, group in enumerate(self.groups):
            lam = conditional_precision(jax.random.fold_in(key, i), group, net, hyper, temperature)
            g = group.group
            slot = new_hyper[g.spec.name] if g.leaf is None else new_hyper[g.spec.name][g.leaf]
            old = slot["precision"]
            slot["precision"] = jnp.log(lam).astype(old.dtype)  # u = log λ (biject_to positive)
        return {**position, "hyper": new_hyper}

    # the protocol on the inner state
    def position(self, state: GibbsState) -> PyTree:
        return self.inner.position(state.inner)

    def collect(self, state: GibbsState) -> dict[str, PyTree]:
        return self.inner.collect(state.inner)

    def recipe_at(self, state: GibbsState) -> Recipe | None:
        return self.inner.recipe_at(state.inner)

    def recipe_state(self, state: GibbsState) -> RecipeState:
        return self.inner.recipe_state(state.inner)

    def with_recipe_state(self, state: GibbsState, inner: RecipeState) -> GibbsState:
        return state._replace(inner=self.inner.with_recipe_state(state.inner, inner))


def gibbs(base: str | Kernel = "sghmc", *, every: int = 1, **base_hyper: Any) -> Gibbs:
    """Gibbs draws of the conjugate Gamma precisions every ``every`` steps of ``base`` (a kernel
    object, or a registered name with its hyper-parameters).

    This is the factory registered as ``"gibbs"``, e.g.
    ``bdl.kernels.get("gibbs", base="sghmc", every=10, step_size=1e-2, friction=1.0)`` or
    ``gibbs(sghmc(1e-2), every=10)``.

    Args:
        base: the base kernel, or the registered name of one.
        every: k ≥ 1, the base kernel's steps between two Gibbs draws.
        **base_hyper: the hyper-parameters of a ``base`` given by name.

    Returns:
        The kernel, a :class:`Gibbs`.

    Raises:
        ValueError: ``every`` below 1, or hyper-parameters for a kernel object.
    """
    return Gibbs(base_kernel("gibbs", base, base_hyper), every=every)

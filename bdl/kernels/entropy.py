"""Entropy-MCMC: sampling from flat basins with a guiding variable (Li & Zhang 2024).

The position θ is augmented with a guide θ_a of the same shape, and the target becomes the joint

    π(θ, θ_a) ∝ exp(−U_joint/T),   U_joint(θ, θ_a) = U(θ) + ‖θ − θ_a‖²/(2η)        (Eq. 4)

with no prior on θ_a. Its θ-marginal is π_T ∝ exp(−U/T) (Lemma 1); its θ_a-marginal is the
smoothed posterior ∝ ∫ exp(−U(θ)/T − ‖θ − θ_a‖²/(2ηT)) dθ (Eq. 3), whose sharp modes are damped:
the coupling term pulls θ towards flat basins. The gradient (Eq. 5)

    ∇_θ U_joint = ∇U(θ) + (θ − θ_a)/η,   ∇_{θ_a} U_joint = (θ_a − θ)/η

costs one backward pass of U, as plain SGLD: the wrapper wraps ``energy_and_grad`` and adds the
coupling analytically. Energies are at full-data scale (docs/design.md, *Energy*); the paper's
mean-loss form
(App. A.1, ‖θ − θ_a‖²/(2ηN) added to the mean loss) is the same joint with the same η.

Variants:

* ``"joint"`` (the paper's Algorithm 1): the inner kernel runs on the joint position
  ``{"position": θ, "guide": θ_a}``; its recipe (g, D, Q) applies leafwise to the joint pytree, so
  ``entropy(sgld)`` is θ̃ ← θ̃ − h∇U_joint(θ̃) + √(2Th)ξ (Eq. 11, with temperature as App. A.2) and
  ``entropy(sghmc)`` gives θ_a its own momentum. Exact whenever the inner recipe is.
* ``"gibbs"`` (App. A.3): one inner step on θ under U_joint(·, θ_a) with θ_a fixed, then the exact
  conditional draw θ_a ~ N(θ, ηT·I) (Eq. 19, tempered). Both halves leave the joint invariant,
  but the θ_a move is an O(1) jump, not the increment of one SDE, so no single recipe describes
  the step and the checker cannot verify it (it reports the variant as not checkable).

Both θ and θ_a are collected (App. E.3): ``collect`` gives ``{"position": θ, "guide": θ_a}``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from bdl.kernels.base import EnergyAndGrad, Info, Kernel
from bdl.kernels.recipe import Recipe
from bdl.kernels.recipe_kernel import RecipeState
from bdl.kernels.wrapper import Wrapper, base_kernel, check_inner
from bdl.utils.trees import tree_normal_like

PyTree = Any
VARIANTS = ("joint", "gibbs")


def joint_position(position: PyTree, guide: PyTree) -> dict[str, PyTree]:
    """The joint position the inner kernel sees: ``{"position": θ, "guide": θ_a}``."""
    return {"position": position, "guide": guide}


def _coupling(theta: PyTree, guide: PyTree) -> tuple[PyTree, jax.Array]:
    diff = jax.tree.map(jnp.subtract, theta, guide)
    return diff, sum(jnp.sum(jnp.square(x)) for x in jax.tree.leaves(diff))


def joint_energy_and_grad(energy_and_grad: EnergyAndGrad, eta: float) -> EnergyAndGrad:
    """(U_joint, ∇U_joint) over the joint position from (Ũ, ∇Ũ) over θ: one call of the inner
    gradient, the coupling gradient ±(θ − θ_a)/η added analytically (Eq. 5)."""

    def fn(joint: dict[str, PyTree]) -> tuple[jax.Array, dict[str, PyTree]]:
        energy, grad = energy_and_grad(joint["position"])
        diff, sq = _coupling(joint["position"], joint["guide"])
        return energy + sq / (2.0 * eta), {
            "position": jax.tree.map(lambda g, x: g + x / eta, grad, diff),
            "guide": jax.tree.map(lambda x: -x / eta, diff),
        }

    return fn


def conditional_energy_and_grad(
    energy_and_grad: EnergyAndGrad, guide: PyTree, eta: float
) -> EnergyAndGrad:
    """(U_joint(·, θ_a), ∇_θ U_joint(·, θ_a)) over θ for a fixed guide θ_a (Gibbs variant)."""

    def fn(theta: PyTree) -> tuple[jax.Array, PyTree]:
        energy, grad = energy_and_grad(theta)
        diff, sq = _coupling(theta, guide)
        return energy + sq / (2.0 * eta), jax.tree.map(lambda g, x: g + x / eta, grad, diff)

    return fn


class GuideState(NamedTuple):
    """Gibbs-like Entropy-MCMC: the inner kernel's state over θ, and the guide θ_a."""

    inner: Any
    guide: PyTree


class EntropyMCMC(Wrapper):
    """Entropy-MCMC around any kernel (Li & Zhang 2024).

    Args:
        inner: the base kernel (e.g. ``sgld(5e-3)``); for ``"joint"`` it runs on the joint
            position ``{"position": θ, "guide": θ_a}`` (pytree-valued hyper-parameters of the
            inner kernel, such as a diagonal mass, must then be shaped like that joint pytree).
        eta: η > 0, the coupling variance: small η ties θ_a to θ, large η smooths more.
        variant: ``"joint"`` (default, Algorithm 1) or ``"gibbs"`` (App. A.3).

    The guide starts at θ₀. Schedules, temperatures and ``is_sample`` are the inner kernel's.
    """

    eta: float = eqx.field(static=True)
    variant: str = eqx.field(static=True, default="joint")

    def __check_init__(self) -> None:
        check_inner(self.inner, "entropy")
        if isinstance(self.eta, bool) or not isinstance(self.eta, int | float) or not self.eta > 0:
            raise ValueError(f"entropy: eta must be a float > 0; got {self.eta!r}.")
        if self.variant not in VARIANTS:
            raise ValueError(f"entropy: variant must be one of {VARIANTS}; got {self.variant!r}.")

    @property
    def name(self) -> str:
        prefix = "entropy" if self.variant == "joint" else "entropy-gibbs"
        return f"{prefix}({self.inner.name})"

    def init(self, position: PyTree, key: jax.Array) -> Any:
        guide = jax.tree.map(jnp.array, position)
        if self.variant == "joint":
            return self.inner.init(joint_position(position, guide), key)
        return GuideState(self.inner.init(position, key), guide)

    def step(
        self,
        key: jax.Array,
        state: Any,
        energy_and_grad: EnergyAndGrad,
        step_size: jax.Array,
        temperature: jax.Array,
    ) -> tuple[Any, Info]:
        if self.variant == "joint":
            fn = joint_energy_and_grad(energy_and_grad, float(self.eta))
            return self.inner.step(key, state, fn, step_size, temperature)
        k_inner, k_guide = jax.random.split(key)
        fn = conditional_energy_and_grad(energy_and_grad, state.guide, float(self.eta))
        inner, info = self.inner.step(k_inner, state.inner, fn, step_size, temperature)
        theta = self.inner.position(inner)
        scale = jnp.sqrt(self.eta * temperature)
        noise = tree_normal_like(k_guide, theta)
        guide = jax.tree.map(lambda x, e: x + scale * e, theta, noise)
        return GuideState(inner, guide), info

    def recipe_at(self, state: Any) -> Recipe | None:
        # the joint variant discretises the inner recipe over the joint position; the Gibbs
        # variant alternates a recipe step with an exact conditional draw: no single recipe
        return self.inner.recipe_at(state) if self.variant == "joint" else None

    def augment_energy(self, energy_fn: Any) -> Any:
        """U_joint over the joint position ``{"position": θ, "guide": θ_a}`` (then the inner
        kernel's own augmentation, if any). The Gibbs variant's recipe moves θ alone under
        U(θ) + ‖θ − θ_a‖²/(2η) for the current guide; its energy over θ is given here with the
        guide at 0, which has the same Hessian (what warm-up reads) for every guide.

        Args:
            energy_fn: θ ↦ U(θ) over the model's position.

        Returns:
            The energy over the recipe's θ group.
        """
        eta = float(self.eta)
        if self.variant != "joint":

            def conditional(theta: PyTree) -> jax.Array:
                squares = sum(jnp.sum(jnp.square(x)) for x in jax.tree.leaves(theta))
                return energy_fn(theta) + squares / (2 * eta)

            return self.inner.augment_energy(conditional)

        def joint(j: dict[str, PyTree]) -> jax.Array:
            return energy_fn(j["position"]) + _coupling(j["position"], j["guide"])[1] / (2 * eta)

        return self.inner.augment_energy(joint)

    def recipe_state(self, state: Any) -> RecipeState:
        return self.inner.recipe_state(state if self.variant == "joint" else state.inner)

    def with_recipe_state(self, state: Any, inner: RecipeState) -> Any:
        if self.variant == "joint":
            return self.inner.with_recipe_state(state, inner)
        return state._replace(inner=self.inner.with_recipe_state(state.inner, inner))

    def _joint_of(self, state: Any) -> dict[str, PyTree]:
        if self.variant == "joint":
            return self.inner.position(state)
        return joint_position(self.inner.position(state.inner), state.guide)

    def position(self, state: Any) -> PyTree:
        return self._joint_of(state)["position"]

    def guide(self, state: Any) -> PyTree:
        """The guiding variable θ_a.

        Args:
            state: a state of this kernel.

        Returns:
            θ_a, a position pytree.
        """
        return self._joint_of(state)["guide"]

    def collect(self, state: Any) -> dict[str, PyTree]:
        inner_state = state if self.variant == "joint" else state.inner
        extra = {k: v for k, v in self.inner.collect(inner_state).items() if k != "position"}
        joint = self._joint_of(state)
        return {**extra, "position": joint["position"], "guide": joint["guide"]}


def entropy(
    base: str | Kernel = "sgld",
    *,
    eta: float | None = None,
    variant: str = "joint",
    **base_hyper: Any,
) -> EntropyMCMC:
    """Entropy-MCMC around ``base``: a kernel object, or a registered name with its
    hyper-parameters, e.g. ``entropy("sghmc", eta=0.5, step_size=1e-2, friction=1.0)``.

    This is the factory registered as ``"entropy"``:
    ``bdl.kernels.get("entropy", base="sgld", eta=0.5, step_size=5e-3)``.

    Args:
        base: the base kernel, or the registered name of one.
        eta: η > 0, the coupling variance of θ and the guide θ_a.
        variant: ``"joint"`` (Algorithm 1) or ``"gibbs"`` (θ_a drawn exactly, App. A.3).
        **base_hyper: the hyper-parameters of a ``base`` given by name.

    Returns:
        The kernel, an :class:`EntropyMCMC`.

    Raises:
        ValueError: an ``eta`` that is not > 0, an unknown ``variant``, or hyper-parameters for
            a kernel object.
    """
    if eta is None:
        raise ValueError("entropy: eta (the coupling variance η > 0) is required.")
    return EntropyMCMC(base_kernel("entropy", base, base_hyper), eta=eta, variant=variant)

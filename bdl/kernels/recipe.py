"""The complete recipe of Ma, Chen & Fox (2015) in structured form.

The state z is a dict of named groups (:mod:`bdl.kernels.blocks`): ``"theta"`` (the position)
and auxiliary groups (momentum, thermostat, …). A recipe declares the kinetic energy g(θ, r), the
diffusion D(z) (diagonal blocks, one per noisy group) and the curl Q(z) (blocks between groups).
With H(z) = U(θ) + g(θ, r) the dynamics are

    dz = [−(D + Q)∇H + T·Γ] dt + √(2T·D) dW,    Γ_i = Σ_j ∂(D_ij + Q_ij)/∂z_j,

and exp(−H/T) is stationary whenever D is positive semi-definite, Q skew-symmetric and
∫ exp(−g/T) dr does not depend on θ (docs/design.md, *The complete recipe*).

Blocks may depend on z locally (entry i of a block on coordinate i of each group) and on the global
scalar U(θ) (and, in r-columns only, on ∂_iU). Γ is then derived exactly by forward-mode autodiff
at O(d) cost (:meth:`Recipe.evaluate`): the blocks are linearised once, and the linear map is
applied to an all-ones tangent per column group, plus a tangent in U chained with ∂_iU for
θ-columns. The checker compares this Γ with the dense divergence, so a recipe that breaks locality
is caught rather than trusted.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from bdl.kernels.blocks import Block, GroupKind, as_block, divergence, matvec

PyTree = Any
State = dict[str, PyTree]


class Context(NamedTuple):
    """Global inputs a recipe's D and Q may read: the energy estimate Ũ and its gradient ∇Ũ.

    Attributes:
        energy: Ũ(θ).
        grad: ∇Ũ(θ), a pytree like θ.
    """

    energy: jax.Array
    grad: PyTree


class Evaluation(NamedTuple):
    """A recipe evaluated at one state: its blocks, Γ and ∇H, each computed once.

    ``diffusion`` maps a noisy group to its diagonal block, ``curl`` maps (row, column) to a block;
    ``gamma`` holds the non-zero rows of Γ only.
    """

    diffusion: dict[str, Block]
    curl: dict[tuple[str, str], Block]
    gamma: dict[str, PyTree]
    grad_h: dict[str, PyTree]


class Recipe(eqx.Module):
    """A choice of (g, D, Q). Subclasses are pytrees (learned parameters are leaves)."""

    @property
    @abc.abstractmethod
    def groups(self) -> dict[str, GroupKind]:
        """Names and kinds of the state groups; always contains ``"theta"``."""

    @abc.abstractmethod
    def kinetic(self, z: State) -> jax.Array:
        """g(θ, r), the part of H beyond U(θ); ∫ exp(−g/T) dr must not depend on θ.

        Args:
            z: the state's groups ``{"theta": θ, …}``.

        Returns:
            The scalar g.
        """

    @abc.abstractmethod
    def diffusion(self, z: State, ctx: Context) -> dict[str, Block]:
        """The diagonal blocks ``{group: D_aa}`` of the PSD diffusion (absent groups: 0).

        Args:
            z: the state's groups ``{"theta": θ, …}``.
            ctx: the energy estimate Ũ and its gradient ∇Ũ at z.

        Returns:
            The diagonal blocks of D by group.
        """

    @abc.abstractmethod
    def curl(self, z: State, ctx: Context) -> dict[tuple[str, str], Block]:
        """Blocks ``{(a, b): Q_ab}`` of the skew-symmetric curl (both (a, b) and (b, a)).

        Args:
            z: the state's groups ``{"theta": θ, …}``.
            ctx: the energy estimate Ũ and its gradient ∇Ũ at z.

        Returns:
            The blocks of Q by pair of groups.
        """

    #: whether D or Q depend on z or U; when ``False`` (a class attribute of the recipes whose D
    #: and Q are constant), Γ = 0 and costs nothing
    state_dependent: ClassVar[bool] = True

    def init_aux(self, position: PyTree, key: jax.Array) -> State:
        """The auxiliary groups of the initial state (none for first-order recipes).

        Args:
            position: θ₀.
            key: the key of the auxiliary variables' draw.

        Returns:
            The auxiliary groups by name (``{}`` for a first-order recipe).
        """
        return {}

    def readapted(self, z: State) -> State:
        """The state to continue from after warm-up adaptation changed this recipe's constants
        (mass, friction): unchanged unless an auxiliary variable's stationary law depends on
        them.

        Args:
            z: the state's groups ``{"theta": θ, …}``.

        Returns:
            The state to continue from.
        """
        return z

    def warmup_guarded(self, z: State, step_size: Any) -> State:
        """The state warm-up continues from after a step of size h: unchanged unless an
        auxiliary variable can leave the integrator's stable region while the chain is still far
        from the posterior (warm-up need not be exact; the sampling phase never calls this).

        Args:
            z: the state's groups ``{"theta": θ, …}``.
            step_size: h of the step just taken.

        Returns:
            The state to continue from.
        """
        return z

    def observables(self, z: State) -> dict[str, PyTree]:
        """Named functions of the state a kernel may collect with its draws (e.g. the momentum).

        Args:
            z: the state's groups ``{"theta": θ, …}``.

        Returns:
            The observables by name.
        """
        return {}

    def bind(self, target: Any) -> Recipe:
        """This recipe with settings that depend on the target (e.g. its size n) resolved.

        Args:
            target: the compiled target (its size n).

        Returns:
            The recipe with those settings resolved.
        """
        return self

    def with_friction(self, friction: float) -> Recipe:
        """This recipe with friction γ, for the (ℓ, β) parameterisation
        (:mod:`bdl.kernels.parameterisation`); recipes without friction raise.

        Args:
            friction: γ.

        Returns:
            The recipe with it.

        Raises:
            TypeError: the recipe has no friction.
        """
        raise TypeError(
            f"{type(self).__name__} has no friction: give step_size, not learning_rate."
        )

    def with_mass(self, mass: Block) -> Recipe:
        """This recipe with the diagonal mass M set by a preconditioner
        (:mod:`bdl.kernels.preconditioners`); recipes without a mass raise.

        Args:
            mass: M, a diagonal block.

        Returns:
            The recipe with it.

        Raises:
            TypeError: the recipe has no mass.
        """
        raise TypeError(f"{type(self).__name__} takes no preconditioner (it has no mass).")

    def kinetic_grad(self, z: State) -> State:
        """∇g over every group, by autodiff of :meth:`kinetic`.

        A kernel whose dynamics use a learned field in place of ∇g overrides this; the checker
        then tests whether that field is a gradient at all.

        Args:
            z: the state's groups ``{"theta": θ, …}``.

        Returns:
            ∇g, by group.
        """
        return jax.grad(self.kinetic)(z)

    def evaluate(self, z: State, ctx: Context) -> Evaluation:
        """Blocks, Γ and ∇H at z, each evaluated once (module docstring for Γ).

        Args:
            z: the state's groups ``{"theta": θ, …}``.
            ctx: the energy estimate Ũ and its gradient ∇Ũ at z.

        Returns:
            The :class:`Evaluation` at z.
        """
        kinds = self.groups
        grad_h = hamiltonian_grad(self, z, ctx)
        if not self.state_dependent:
            return Evaluation(self.diffusion(z, ctx), self.curl(z, ctx), {}, grad_h)

        def blocks_at(zz: State, energy: jax.Array) -> tuple[dict, dict]:
            c = Context(energy, ctx.grad)
            return self.diffusion(zz, c), self.curl(zz, c)

        (d_blocks, q_blocks), linear = jax.linearize(blocks_at, z, ctx.energy)
        zero_z = jax.tree.map(jnp.zeros_like, z)
        zero_u = jnp.zeros_like(ctx.energy)
        gamma: dict[str, Any] = {}

        def add(row: str, value: Any) -> None:
            gamma[row] = value if row not in gamma else _tree_add(gamma[row], value)

        for col in kinds:
            tangent = {**zero_z, col: jax.tree.map(jnp.ones_like, z[col])}
            d_dot, q_dot = linear(tangent, zero_u)
            for (row, c), block in _pairs(d_dot, q_dot):
                if c == col:
                    add(row, divergence(block, z[row], z[col], kinds[row], kinds[col]))
        # chain rule through the global scalar U(θ) for θ-columns
        d_dot, q_dot = linear(zero_z, jnp.ones_like(ctx.energy))
        for (row, col), block in _pairs(d_dot, q_dot):
            if col == "theta":
                add(row, matvec(block, ctx.grad, z[row], kinds[row], "elementwise"))
        return Evaluation(d_blocks, q_blocks, gamma, grad_h)


def _pairs(diffusion: dict[str, Block], curl: dict[tuple[str, str], Block]) -> Any:
    yield from (((g, g), b) for g, b in diffusion.items())
    yield from curl.items()


def _tree_add(a: Any, b: Any) -> Any:
    return jax.tree.map(jnp.add, a, b)


def hamiltonian_grad(recipe: Recipe, z: State, ctx: Context) -> State:
    """∇H = (∇U + ∇_θ g, ∇_r g, …) with ∇g from the recipe and ∇U from the context."""
    out = dict(recipe.kinetic_grad(z))
    out["theta"] = jax.tree.map(jnp.add, ctx.grad, out["theta"])
    return out


def drift(
    recipe: Recipe, ev: Evaluation, z: State, temperature: Any, rows: tuple[str, ...]
) -> State:
    """[−(D + Q)∇H + T·Γ] restricted to ``rows``, from one evaluation."""
    kinds = recipe.groups
    out = {}
    for row in rows:
        acc = None
        terms = [((row, row), ev.diffusion[row])] if row in ev.diffusion else []
        terms += [(key, b) for key, b in ev.curl.items() if key[0] == row]
        for (_, col), block in terms:
            prod = matvec(as_block(block), ev.grad_h[col], z[row], kinds[row], kinds[col])
            acc = prod if acc is None else _tree_add(acc, prod)
        value = jax.tree.map(jnp.zeros_like, z[row]) if acc is None else _negate(acc)
        if row in ev.gamma:
            value = jax.tree.map(lambda v, g: v + temperature * g, value, ev.gamma[row])
        out[row] = value
    return out


def _negate(tree: Any) -> Any:
    return jax.tree.map(jnp.negative, tree)


def noise_increment(
    recipe: Recipe, ev: Evaluation, z: State, noise: State, temperature: Any, h: Any, row: str
) -> PyTree:
    """√(2·T·h·D_row)·ξ_row for a noisy group (elementwise or scalar)."""
    scale = as_block(ev.diffusion[row]).noise_factor(2.0 * temperature * h)
    if recipe.groups[row] == "elementwise":
        return scale.times(noise[row])
    return scale.value * noise[row]

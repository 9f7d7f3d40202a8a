"""The complete recipe of Ma, Chen & Fox (2015) in structured form.

State z = (θ, r) is a dict of named groups: ``"theta"`` (the position) and auxiliary groups
(momentum, thermostat, …). A group is *elementwise* (a pytree shaped like θ) or *scalar*. A recipe
declares the kinetic energy g(θ, r), the diffusion D(z) (diagonal blocks only) and the curl Q(z)
as blocks between groups:

    (elementwise a, elementwise b): a diagonal, stored like θ (or a broadcast scalar),
    (elementwise a, scalar b):     a column, stored like θ,
    (scalar a, elementwise b):     a row, stored like θ,
    (scalar a, scalar b):          a scalar.

The dynamics, with H(z) = U(θ) + g(θ, r), are

    dz = [−(D + Q)∇H + T·Γ] dt + √(2T·D) dW,    Γ_i = Σ_j ∂(D_ij + Q_ij)/∂z_j.

Blocks may depend on z locally (entry i of a block on coordinate i of each group) and on the global
scalar U(θ) (and, in r-columns only, on ∂_iU). Γ is then derived exactly by forward-mode
autodiff at O(d) cost (:func:`correction`): one JVP with an all-ones tangent per column group,
plus a JVP in U chained with ∂_iU for θ-columns. The checker compares this structured Γ with the
dense divergence, so a recipe that breaks locality is caught rather than trusted.
"""

from __future__ import annotations

import abc
from typing import Any, Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

PyTree = Any
Blocks = dict[tuple[str, str], Any]
GroupKind = Literal["elementwise", "scalar"]


class Context(NamedTuple):
    """Global inputs a recipe's D and Q may read: the energy estimate Ũ and its gradient ∇Ũ."""

    energy: jax.Array
    grad: PyTree


class Recipe(eqx.Module):
    """A choice of (g, D, Q). Subclasses are pytrees (their learned parameters are leaves)."""

    @property
    @abc.abstractmethod
    def groups(self) -> dict[str, GroupKind]:
        """Names and kinds of the state groups; always contains ``"theta"``."""

    @abc.abstractmethod
    def kinetic(self, z: dict[str, PyTree]) -> jax.Array:
        """g(θ, r), the part of H beyond U(θ); ∫ exp(−g/T) dr must not depend on θ."""

    @abc.abstractmethod
    def diffusion(self, z: dict[str, PyTree], ctx: Context) -> Blocks:
        """Diagonal blocks ``{(a, a): D_aa}`` of the PSD diffusion (absent groups: 0)."""

    @abc.abstractmethod
    def curl(self, z: dict[str, PyTree], ctx: Context) -> Blocks:
        """Blocks ``{(a, b): Q_ab}`` of the skew-symmetric curl (both (a, b) and (b, a))."""

    @property
    def state_dependent(self) -> bool:
        """Whether D or Q depend on z or U; when ``False``, Γ = 0 and costs nothing."""
        return True

    def kinetic_grad(self, z: dict[str, PyTree]) -> dict[str, PyTree]:
        """∇g over every group, by autodiff of :meth:`kinetic`.

        A kernel whose dynamics use a learned field in place of ∇g overrides this; the checker
        then tests whether that field is a gradient at all.
        """
        return jax.grad(self.kinetic)(z)

    def gamma(self, z: dict[str, PyTree], ctx: Context) -> dict[str, PyTree]:
        """The correction Γ the dynamics use: :func:`correction`, derived by autodiff."""
        return correction(self, z, ctx)


# ---------------------------------------------------------------------------- block algebra
def _leafwise(fn: Any, *trees: Any) -> Any:
    """Map over θ-shaped pytrees, broadcasting plain scalars."""
    ref = next((t for t in trees if not _is_scalar(t)), None)
    if ref is None:
        return fn(*trees)
    expanded = [jax.tree.map(lambda _, s=t: s, ref) if _is_scalar(t) else t for t in trees]
    return jax.tree.map(fn, *expanded)


def _is_scalar(x: Any) -> bool:
    return isinstance(x, int | float) or (
        hasattr(x, "shape") and x.shape == () and not isinstance(x, dict | list | tuple)
    )


def _tree_total(tree: Any) -> jax.Array:
    if _is_scalar(tree):
        return jnp.asarray(tree)
    return sum(jnp.sum(x) for x in jax.tree.leaves(tree))


def block_matvec(block: Any, v: Any, row: GroupKind, col: GroupKind) -> Any:
    """The product of one block with the column group's vector ``v``."""
    if row == "elementwise" and col == "elementwise":
        return _leafwise(lambda m, x: m * x, block, v)
    if row == "elementwise" and col == "scalar":
        return _leafwise(lambda m: m * v, block)
    if row == "scalar" and col == "elementwise":
        return _tree_total(_leafwise(lambda m, x: m * x, block, v))
    return block * v


def _add(a: Any, b: Any) -> Any:
    if a is None:
        return b
    return _leafwise(lambda x, y: x + y, a, b)


def _zeros_like_group(z: dict[str, PyTree], group: str) -> Any:
    return jax.tree.map(jnp.zeros_like, z[group])


def _combined(recipe: Recipe, z: dict[str, PyTree], ctx: Context) -> Blocks:
    blocks = {k: _as_array(v) for k, v in recipe.curl(z, ctx).items()}
    for key, value in recipe.diffusion(z, ctx).items():
        blocks[key] = _add(blocks.get(key), _as_array(value))
    return blocks


def _as_array(block: Any) -> Any:
    return jnp.asarray(block) if isinstance(block, int | float) else block


# ---------------------------------------------------------------------------- derived terms
def correction(recipe: Recipe, z: dict[str, PyTree], ctx: Context) -> dict[str, PyTree]:
    """Γ_a = Σ_b Σ_j ∂(D + Q)_{a,b_j} / ∂z_{b_j}, exact by forward-mode autodiff.

    Column group b contributes the JVP of the blocks with an all-ones tangent on z_b (entry i
    of a block depends on z_b only through z_{b,i}); θ-columns add ∂(block)/∂U · ∂_iU.
    """
    kinds = recipe.groups
    gamma: dict[str, Any] = {g: _zeros_like_group(z, g) for g in kinds}
    if not recipe.state_dependent:
        return gamma

    def blocks_of(zz: dict[str, PyTree], energy: jax.Array) -> Blocks:
        return _combined(recipe, zz, Context(energy, ctx.grad))

    zero_z = jax.tree.map(jnp.zeros_like, z)
    for col in kinds:
        tangent = dict(zero_z)
        tangent[col] = jax.tree.map(jnp.ones_like, z[col])
        _, d_blocks = jax.jvp(blocks_of, (z, ctx.energy), (tangent, jnp.zeros_like(ctx.energy)))
        for (row, c), d in d_blocks.items():
            if c != col:
                continue
            gamma[row] = _add(gamma[row], _column_divergence(d, kinds[row], kinds[col]))
    # chain rule through the global scalar U(θ) for θ-columns
    _, d_blocks = jax.jvp(blocks_of, (z, ctx.energy), (zero_z, jnp.ones_like(ctx.energy)))
    for (row, col), d in d_blocks.items():
        if col != "theta":
            continue
        chained = block_matvec(d, ctx.grad, kinds[row], "elementwise")
        gamma[row] = _add(gamma[row], chained)
    return gamma


def _column_divergence(d_block: Any, row: GroupKind, col: GroupKind) -> Any:
    if row == "scalar" and col == "elementwise":
        return _tree_total(d_block)
    return d_block


def hamiltonian_grad(recipe: Recipe, z: dict[str, PyTree], ctx: Context) -> dict[str, PyTree]:
    """∇H = (∇U + ∇_θ g, ∇_r g, …) with ∇g by autodiff and ∇U from the context."""
    grad_g = recipe.kinetic_grad(z)
    out = dict(grad_g)
    out["theta"] = jax.tree.map(jnp.add, ctx.grad, grad_g["theta"])
    return out


def drift(
    recipe: Recipe,
    z: dict[str, PyTree],
    ctx: Context,
    temperature: jax.Array,
    groups: tuple[str, ...] | None = None,
) -> dict[str, PyTree]:
    """−(D + Q)∇H + T·Γ, restricted to ``groups`` (all by default)."""
    kinds = recipe.groups
    groups = tuple(kinds) if groups is None else groups
    grad_h = hamiltonian_grad(recipe, z, ctx)
    blocks = _combined(recipe, z, ctx)
    gamma = recipe.gamma(z, ctx)
    out = {}
    for row in groups:
        acc = None
        for (r, col), block in blocks.items():
            if r != row:
                continue
            acc = _add(acc, block_matvec(block, grad_h[col], kinds[row], kinds[col]))
        acc = _zeros_like_group(z, row) if acc is None else acc
        out[row] = _leafwise(lambda m, g: -m + temperature * g, acc, gamma[row])
    return out


def noise_scale(
    recipe: Recipe, z: dict[str, PyTree], ctx: Context, temperature: jax.Array, h: jax.Array
) -> dict[str, PyTree]:
    """√(2·T·h·D_aa) for every noisy group."""
    return {
        a: _leafwise(lambda d: jnp.sqrt(2.0 * temperature * h * d), block)
        for (a, _), block in recipe.diffusion(z, ctx).items()
    }

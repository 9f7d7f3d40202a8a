"""Blocks of the diffusion D and the curl Q between two groups of the recipe state.

A recipe's state z is a dict of named groups: *elementwise* groups are pytrees shaped like θ
(θ itself, a momentum), *scalar* groups are single numbers (a thermostat). A block couples a row
group a with a column group b; its coefficients come in three shapes, each a small module that
broadcasts explicitly:

* :class:`Scalar` — one number for every coordinate (D = I is ``Scalar(1.0)``);
* :class:`PerLeaf` — one number per leaf of θ (a layerwise mass);
* :class:`Elementwise` — one number per coordinate, a θ-shaped pytree (an RMSprop mass).

What a block means depends on the kinds of its two groups (:func:`matvec`):

=============  =============  ========================================================
row a          column b       the block is
=============  =============  ========================================================
elementwise    elementwise    a diagonal: (B v)_i = B_i v_i
elementwise    scalar         a column: (B v)_i = B_i v
scalar         elementwise    a row: B v = Σ_i B_i v_i
scalar         scalar         a number: B v = B·v (a :class:`Scalar`)
=============  =============  ========================================================

Blocks are pytrees, so ``jax.jvp`` of a function returning blocks returns tangent blocks of the
same type: the correction Γ (:mod:`bdl.kernels.recipe`) is assembled from them.
"""

from __future__ import annotations

import abc
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

PyTree = Any
GroupKind = Literal["elementwise", "scalar"]


class Block(eqx.Module):
    """Coefficients of one block of D or Q (see the module docstring)."""

    @abc.abstractmethod
    def times(self, v: PyTree) -> PyTree:
        """The coordinatewise product B_i·v_i with a θ-shaped pytree ``v``.

        Args:
            v: a θ-shaped pytree.

        Returns:
            B·v, shaped like ``v``.
        """

    @abc.abstractmethod
    def expand(self, like: PyTree) -> PyTree:
        """The coefficients as a pytree shaped like ``like`` (a θ-shaped pytree).

        Args:
            like: a θ-shaped pytree.

        Returns:
            The coefficients, shaped like ``like``.
        """

    @abc.abstractmethod
    def map(self, fn: Any) -> Block:
        """The block with ``fn`` applied to every coefficient (same type).

        Args:
            fn: a function of an array.

        Returns:
            The block of the same type with ``fn`` applied.
        """

    def power(self, exponent: float) -> Block:
        """B^e of a positive diagonal block (a mass: e = −1 gives M⁻¹, e = −½ a square root).

        Args:
            exponent: e.

        Returns:
            The block B^e.
        """
        return self.map(lambda m: m**exponent)

    def transpose(self) -> Block:
        """Bᵀ (a diagonal block is its own transpose).

        Returns:
            Bᵀ.
        """
        return self

    def noise_factor(self, scale: Any) -> Block:
        """A block S with S·Sᵀ = scale·B, for the injected noise √(2ThD)·ξ.

        Args:
            scale: the factor (2Th).

        Returns:
            The block S.
        """
        return self.map(lambda d: jnp.sqrt(scale * d))


class Scalar(Block):
    """The same coefficient for every coordinate. A Python number stays a trace-time constant,
    so ``Scalar(1.0)`` costs no multiplication.

    Args:
        value: the coefficient, a number or a 0-d array.
    """

    value: Any

    def times(self, v: PyTree) -> PyTree:
        if _is_one(self.value):
            return v
        return jax.tree.map(lambda x: self.value * x, v)

    def expand(self, like: PyTree) -> PyTree:
        return jax.tree.map(
            lambda x: jnp.broadcast_to(jnp.asarray(self.value, x.dtype), x.shape), like
        )

    def map(self, fn: Any) -> Scalar:
        return Scalar(fn(self.value))


class PerLeaf(Block):
    """One coefficient per leaf of θ: a pytree of θ's structure with 0-d leaves.

    Args:
        values: the coefficients, a pytree of θ's structure with 0-d leaves.
    """

    values: PyTree

    def times(self, v: PyTree) -> PyTree:
        return jax.tree.map(lambda m, x: m * x, self.values, v)

    def expand(self, like: PyTree) -> PyTree:
        return jax.tree.map(
            lambda m, x: jnp.broadcast_to(m, x.shape).astype(x.dtype), self.values, like
        )

    def map(self, fn: Any) -> PerLeaf:
        return PerLeaf(jax.tree.map(fn, self.values))


class Elementwise(Block):
    """One coefficient per coordinate: a pytree shaped like θ.

    Args:
        values: the coefficients, a pytree shaped like θ.
    """

    values: PyTree

    def times(self, v: PyTree) -> PyTree:
        return jax.tree.map(lambda m, x: m * x, self.values, v)

    def expand(self, like: PyTree) -> PyTree:
        return self.values

    def map(self, fn: Any) -> Elementwise:
        return Elementwise(jax.tree.map(fn, self.values))


class Dense(Block):
    """A dense matrix acting on the flattened θ-shaped pytree (small dimension only: O(d²) per
    product). ``factor``, when known, is a square root F with F·Fᵀ = matrix (for the noise).

    Args:
        matrix: the (d, d) matrix.
        factor: a square root F with F·Fᵀ = ``matrix`` (``None``: not known).
    """

    matrix: jax.Array
    factor: jax.Array | None = None

    def times(self, v: PyTree) -> PyTree:
        flat, unravel = ravel_pytree(v)
        return unravel(self.matrix @ flat)

    def expand(self, like: PyTree) -> PyTree:
        raise TypeError("a dense block has no elementwise form.")

    def map(self, fn: Any) -> Dense:
        """``fn`` entrywise (scaling and sign changes only: they commute with the product).

        Args:
            fn: a scaling or sign change.

        Returns:
            The dense block with ``fn`` applied to its matrix (and its factor).
        """
        return Dense(fn(self.matrix), None if self.factor is None else fn(self.factor))

    def transpose(self) -> Dense:
        return Dense(self.matrix.T)

    def noise_factor(self, scale: Any) -> Dense:
        if self.factor is None:
            raise TypeError("a dense diffusion needs its square root (factor) for the noise.")
        return Dense(jnp.sqrt(scale) * self.factor)


class DenseMass(Block):
    """A dense mass M given by a square root S of its inverse, S·Sᵀ = M⁻¹ (a covariance): M^{−1/2}
    is taken as S and M⁻¹ as S·Sᵀ (with S its square root), so no matrix is inverted or
    factorised per step. :func:`dense_mass` builds one from a covariance.

    Args:
        root: S, with S·Sᵀ = M⁻¹.
    """

    root: jax.Array

    def times(self, v: PyTree) -> PyTree:
        flat, unravel = ravel_pytree(v)
        return unravel(jnp.linalg.solve(self.root @ self.root.T, flat))

    def expand(self, like: PyTree) -> PyTree:
        raise TypeError("a dense mass has no elementwise form.")

    def map(self, fn: Any) -> Block:
        raise TypeError("a dense mass has no entrywise map; use power().")

    def power(self, exponent: float) -> Block:
        if exponent == -1:
            return Dense(self.root @ self.root.T, self.root)
        if exponent == -0.5:
            return Dense(self.root)
        if exponent == 0.5:  # S⁻ᵀ: (S⁻ᵀ)(S⁻ᵀ)ᵀ = (S·Sᵀ)⁻¹ = M
            return Dense(jnp.linalg.inv(self.root).T)
        raise ValueError(f"a dense mass takes powers −1, −½ and ½; got {exponent}.")


def dense_mass(inverse: jax.Array, floor: float = 1e-12) -> DenseMass:
    """The dense mass with M⁻¹ = ``inverse`` (symmetrised), its root from the eigendecomposition
    of the matrix scaled to a unit diagonal, C = D⁻¹·M⁻¹·D⁻¹ with D² = diag M⁻¹: S = D·V·Λ^{1/2}
    for C = V·Λ·Vᵀ, the eigenvalues floored at ``floor`` times the largest. The scaling keeps
    what float32 resolves: a covariance whose diagonal spans 10¹⁰ (a coefficient of a feature
    measured in thousands beside one measured in thousandths) has a correlation matrix whose
    spectrum spans far less, and a nearly singular one does not break the eigendecomposition as
    it breaks a Cholesky factorisation.

    Args:
        inverse: M⁻¹, a symmetric positive semi-definite (d, d) matrix.
        floor: the smallest eigenvalue kept, relative to the largest.

    Returns:
        The :class:`DenseMass`.
    """
    inverse = 0.5 * (inverse + inverse.T)
    scale = jnp.sqrt(jnp.maximum(jnp.diagonal(inverse), 1e-30))
    eigval, eigvec = jnp.linalg.eigh(inverse / scale[:, None] / scale[None, :])
    eigval = jnp.maximum(eigval, floor * jnp.max(eigval) + 1e-30)
    return DenseMass(scale[:, None] * eigvec * jnp.sqrt(eigval))


def as_block(value: Any) -> Block:
    """A block from a number (:class:`Scalar`) or a block (unchanged).

    Args:
        value: a number or a block.

    Returns:
        The block.
    """
    if isinstance(value, Block):
        return value
    if isinstance(value, int | float) or jnp.ndim(value) == 0:
        return Scalar(value)
    raise TypeError(
        f"a block must be a number or a bdl.kernels.blocks.Block; got {type(value).__name__}."
    )


def tree_total(tree: PyTree) -> jax.Array:
    """Σ over every coordinate of a pytree.

    Args:
        tree: a pytree of arrays.

    Returns:
        The scalar sum.
    """
    return sum(jnp.sum(x) for x in jax.tree.leaves(tree))


def matvec(block: Block, v: Any, row_like: Any, row: GroupKind, col: GroupKind) -> Any:
    """The product of ``block`` (row group of kind ``row`` shaped like ``row_like``, column group
    of kind ``col``) with the column group's value ``v``.

    Args:
        block: the block.
        v: the column group's value.
        row_like: a value of the row group.
        row: the row group's kind.
        col: the column group's kind.

    Returns:
        The product, shaped like the row group.
    """
    if col == "elementwise":
        product = block.times(v)
        return product if row == "elementwise" else tree_total(product)
    if row == "elementwise":
        return jax.tree.map(lambda b: b * v, block.expand(row_like))
    if not isinstance(block, Scalar):
        raise TypeError(f"a block between two scalar groups must be a Scalar; got {block}.")
    return block.value * v


def divergence(tangent: Block, row_like: Any, col_like: Any, row: GroupKind, col: GroupKind) -> Any:
    """Σ_j ∂B_{ij}/∂z_j from the tangent of a block under an all-ones tangent on its column group
    (entry i of a block depends on the column group only through coordinate i).

    Args:
        tangent: the tangent of the block.
        row_like: a value of the row group.
        col_like: a value of the column group.
        row: the row group's kind.
        col: the column group's kind.

    Returns:
        The divergence, shaped like the row group.
    """
    if isinstance(tangent, Dense | DenseMass):  # dense blocks are constant in z by contract
        return jax.tree.map(jnp.zeros_like, row_like) if row == "elementwise" else 0.0
    if row == "scalar" and col == "elementwise":
        return tree_total(tangent.expand(col_like))
    if row == "elementwise":
        return tangent.expand(row_like)
    return tangent.value


def _is_one(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == 1

"""Dense views of a recipe at small dimension, for the stationarity checker.

At a state z of a few coordinates, D(z), Q(z), the divergence Γ = ∇·(D + Q), the kinetic field
and the Fokker–Planck residual are formed as dense matrices and vectors by ``jax.jacfwd``, so
they can be compared with what the structured recipe (:mod:`bdl.kernels.recipe`) computes in
O(d). With p = exp(−H/T) the flux J = [−(D+Q)∇H + TΓ]p − T∇·(Dp) is p·w with
w = −(D+Q)∇H + TΓ − TΓ_D + D∇H (Γ_D = ∇·D), so (∇·J)/p = ∇·w − w·∇H/T: the residual is
evaluated in log space, without forming p (docs/checker.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from bdl.kernels.blocks import as_block, matvec
from bdl.kernels.recipe import Context, Recipe, drift, hamiltonian_grad
from bdl.utils.owner_jit import owner_jit

PyTree = Any


class DenseRecipe:
    """Dense views of a recipe at small dimension: D(z), Q(z), Γ, ∇g field, FP residual."""

    def __init__(self, recipe: Recipe, energy: Callable[[PyTree], jax.Array], z: dict):
        self.recipe, self.energy = recipe, energy
        self.kinds = recipe.groups
        self.zf, self.unravel = ravel_pytree(z)

    def ctx(self, z: dict) -> Context:
        u, g = jax.value_and_grad(self.energy)(z["theta"])
        return Context(u, g)

    def _matrix(self, which: str) -> Callable[[jax.Array], jax.Array]:
        def matrix(zf: jax.Array) -> jax.Array:
            z = self.unravel(zf)
            ctx = self.ctx(z)
            if which == "D":
                blocks = {(g, g): b for g, b in self.recipe.diffusion(z, ctx).items()}
            else:
                blocks = self.recipe.curl(z, ctx)

            def apply(vf: jax.Array) -> jax.Array:
                v = self.unravel(vf)
                out = {g: jax.tree.map(jnp.zeros_like, z[g]) for g in self.kinds}
                for (row, col), block in blocks.items():
                    kinds = self.kinds[row], self.kinds[col]
                    prod = matvec(as_block(block), v[col], z[row], *kinds)
                    out[row] = jax.tree.map(jnp.add, out[row], prod)
                return ravel_pytree(out)[0]

            return jax.jacfwd(apply)(jnp.zeros_like(zf))

        return matrix

    @property
    def D(self) -> Callable[[jax.Array], jax.Array]:
        return self._matrix("D")

    @property
    def Q(self) -> Callable[[jax.Array], jax.Array]:
        return self._matrix("Q")

    def gamma_true(self, zf: jax.Array) -> jax.Array:
        """Γ_i = Σ_j ∂_j (D + Q)_ij by dense autodiff (through U and ∇U exactly)."""
        dm = jax.jacfwd(lambda x: self.D(x) + self.Q(x))(zf)
        return jnp.einsum("ijj->i", dm)

    def gamma_diffusion(self, zf: jax.Array) -> jax.Array:
        return jnp.einsum("ijj->i", jax.jacfwd(self.D)(zf))

    def gamma_kernel(self, zf: jax.Array) -> jax.Array:
        z = self.unravel(zf)
        return ravel_pytree(full(self.recipe.evaluate(z, self.ctx(z)).gamma, z))[0]

    def kinetic_field(self, zf: jax.Array) -> jax.Array:
        z = self.unravel(zf)
        return ravel_pytree(full(self.recipe.kinetic_grad(z), z))[0]

    def grad_h(self, zf: jax.Array) -> jax.Array:
        z = self.unravel(zf)
        return ravel_pytree(full(hamiltonian_grad(self.recipe, z, self.ctx(z)), z))[0]

    def drift(self, zf: jax.Array, T: float) -> jax.Array:
        z = self.unravel(zf)
        ev = self.recipe.evaluate(z, self.ctx(z))
        return ravel_pytree(drift(self.recipe, ev, z, T, tuple(self.kinds)))[0]

    def fokker_planck(self, zf: jax.Array, T: float) -> tuple[jax.Array, jax.Array]:
        def w(x: jax.Array) -> jax.Array:
            return self.drift(x, T) - T * self.gamma_diffusion(x) + self.D(x) @ self.grad_h(x)

        div = jnp.trace(jax.jacfwd(w)(zf))
        flow = w(zf) @ self.grad_h(zf) / T
        return div - flow, jnp.abs(div) + jnp.abs(flow)


def _like(value: Any, template: Any) -> Any:
    """Broadcast a block product to the structure of the row group."""
    structured = isinstance(template, dict | list | tuple) or bool(jnp.shape(template))
    if structured and not isinstance(value, dict | list | tuple) and jnp.ndim(value) == 0:
        return jax.tree.map(lambda t: jnp.broadcast_to(value, t.shape), template)
    return value


def full(values: dict[str, PyTree], z: dict[str, PyTree]) -> dict[str, PyTree]:
    """``values`` over every group of z, zeros for the groups it leaves out."""
    return {
        g: _like(values[g], z[g]) if g in values else jax.tree.map(jnp.zeros_like, z[g]) for g in z
    }


@owner_jit
def analyse(recipe: Recipe, energy: Any, z: dict, T: float) -> dict[str, jax.Array]:
    """Every dense quantity the checker needs at state z, in one compiled function."""
    dense = DenseRecipe(recipe, energy, z)
    zf = dense.zf
    residual, fp_scale = dense.fokker_planck(zf, T)
    return {
        "D": dense.D(zf),
        "Q": dense.Q(zf),
        "kinetic_field": dense.kinetic_field(zf),
        "kinetic_jacobian": jax.jacfwd(dense.kinetic_field)(zf),
        "gamma_true": dense.gamma_true(zf),
        "gamma_kernel": dense.gamma_kernel(zf),
        "fp_residual": residual,
        "fp_scale": fp_scale,
        "drift0": dense.drift(zf, 0.0),
    }

"""Discretisations of the recipe SDE, kept apart from the dynamics they integrate.

An integrator maps (recipe, z, Ũ and ∇Ũ at θ, h, T, key) to the next z. Every one draws the
injected noise of all noisy groups with one Gaussian draw ξ and then moves deterministically
given ξ (:meth:`Integrator.move`), evaluating the recipe (blocks, Γ, ∇H) once per state it visits
(:meth:`bdl.kernels.recipe.Recipe.evaluate`). With the draw an explicit input, the stationarity
checker computes the one-step noise covariance B·Bᵀ, B = ∂z'/∂ξ, exactly by autodiff.
"""

from __future__ import annotations

import abc
from typing import Any

import equinox as eqx
import jax
from jax.flatten_util import ravel_pytree

from bdl.kernels.recipe import Context, Evaluation, Recipe, State, drift, noise_increment


class Integrator(eqx.Module):
    """One step of the recipe's SDE: ξ ~ N(0, I) for :meth:`noisy_groups`, then :meth:`move`."""

    def __call__(
        self, recipe: Recipe, z: State, ctx: Context, h: Any, temperature: Any, key: jax.Array
    ) -> State:
        """The state after one step of size h from z (Ũ, ∇Ũ at z's θ in ``ctx``)."""
        ev = recipe.evaluate(z, ctx)
        noise = standard_normal(key, z, self.noisy_groups(ev))
        return self.move(recipe, ev, z, ctx, h, temperature, noise)

    def noisy_groups(self, ev: Evaluation) -> tuple[str, ...]:
        """The groups ξ is drawn for: every group with a diffusion block, in sorted order.

        Args:
            ev: the recipe evaluated at the state.

        Returns:
            The groups' names.
        """
        return tuple(sorted(ev.diffusion))

    @abc.abstractmethod
    def move(
        self,
        recipe: Recipe,
        ev: Evaluation,
        z: State,
        ctx: Context,
        h: Any,
        temperature: Any,
        noise: State,
    ) -> State:
        """The state after one step of size h from z given the draw ``noise`` (ξ, one array
        like ``z[g]`` per group of :meth:`noisy_groups`) and ``ev``, the recipe evaluated at z.

        Args:
            recipe: the recipe discretised.
            ev: the recipe evaluated at z.
            z: the state's groups.
            ctx: Ũ and ∇Ũ at z.
            h: the step size.
            temperature: T.
            noise: ξ, by group.

        Returns:
            The next state's groups.
        """


def standard_normal(key: jax.Array, z: State, groups: tuple[str, ...]) -> State:
    """ξ ~ N(0, I) for ``groups`` from one ``random.normal`` call.

    Args:
        key: the random key.
        z: the state's groups (the draws' shapes).
        groups: the groups to draw for.

    Returns:
        ξ by group.
    """
    if not groups:
        return {}
    flat, unravel = ravel_pytree({g: z[g] for g in groups})
    return unravel(jax.random.normal(key, flat.shape, flat.dtype))


def advance(
    recipe: Recipe,
    ev: Evaluation,
    z: State,
    rows: tuple[str, ...],
    h: Any,
    temperature: Any,
    noise: State,
    at: State | None = None,
) -> State:
    """z with ``rows`` moved by h·drift + noise, both from ``ev`` (evaluated at ``at``, by default
    z).

    Args:
        recipe: the recipe discretised.
        ev: the recipe evaluated at ``at``.
        z: the state's groups.
        rows: the groups to move.
        h: the step size.
        temperature: T.
        noise: ξ, by group.
        at: the state ``ev`` was evaluated at (default z).

    Returns:
        z with ``rows`` moved.
    """
    at = z if at is None else at
    velocity = drift(recipe, ev, at, temperature, rows)
    out = dict(z)
    for g in rows:
        moved = jax.tree.map(lambda x, v: x + h * v, z[g], velocity[g])
        if g in ev.diffusion:
            kick = noise_increment(recipe, ev, at, noise, temperature, h, g)
            moved = jax.tree.map(lambda x, e: x + e, moved, kick)
        out[g] = moved
    return out


class EulerMaruyama(Integrator):
    """z ← z + h·[−(D + Q)(z)∇H(z) + TΓ(z)] + √(2ThD(z))·ξ, every group at once (affine in ξ: its
    one-step covariance is 2hT·D(z) exactly)."""

    def move(
        self,
        recipe: Recipe,
        ev: Evaluation,
        z: State,
        ctx: Context,
        h: Any,
        temperature: Any,
        noise: State,
    ) -> State:
        return advance(recipe, ev, z, tuple(recipe.groups), h, temperature, noise)


class SymplecticEuler(Integrator):
    """Auxiliary groups first at (θ, r), then θ at (θ, r_new) (semi-implicit Euler).

    For SGHMC: r ← r − h∇Ũ − hCr + √(2ThC)ξ, θ ← θ + hr (Chen et al. 2014). θ does not move in
    the first half, so Ũ and ∇Ũ are reused; the recipe is evaluated again only at (θ, r_new),
    where the θ-update needs it (e.g. NNSGHMC's f_Q(r_new), Gong et al. 2019, Eq. 7). With
    Σ = 2hT·D_rr and J = ∂(θ-drift)/∂r, the one-step covariance is [[h²JΣJᵀ, hJΣ], [hΣJᵀ, Σ]]
    (exactly when the θ-drift is affine in r, as SGHMC's; [the stationarity
    checker](../checker.md)).
    """

    def move(
        self,
        recipe: Recipe,
        ev: Evaluation,
        z: State,
        ctx: Context,
        h: Any,
        temperature: Any,
        noise: State,
    ) -> State:
        aux = tuple(g for g in recipe.groups if g != "theta")
        z = advance(recipe, ev, z, aux, h, temperature, noise)
        return advance(recipe, recipe.evaluate(z, ctx), z, ("theta",), h, temperature, noise)

"""Warm-up adaptation as an object: ``init``, ``update`` and ``final`` over a per-chain state.

:class:`WarmUp` holds the kernel as built (without a step size) and is a pure function of its
arguments, in the style of BlackJAX's window adaptation: ``init`` gives a chain's first (h, γ, M)
and an empty window, ``step`` judges each warm-up step (:mod:`.guard`) and adds θ to the window,
``update`` re-adapts at the schedule's points (:mod:`.schedule`), and ``final`` reads the values
a chain was frozen with. The sampling loop runs these inside its compiled programs; the kernel a
chain steps with is :meth:`WarmUp.kernel_at` of its adapted values, a constant recipe after
burn-in, so the checker's verdict on the frozen kernel (:func:`frozen`) is the kernel's own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from bdl.compile.target import Target
from bdl.kernels.base import Info, Kernel
from bdl.kernels.blocks import DenseMass, Elementwise, dense_mass
from bdl.sampling.warmup import extremes as edges
from bdl.sampling.warmup import guard as guards
from bdl.sampling.warmup.anchor import (
    PAYS,
    Anchor,
    anchor_at,
    anchored,
    hessian_correction,
    moves,
    recentred,
)
from bdl.sampling.warmup.laplace import laplace_draw, mode_mass, newton_mode
from bdl.sampling.warmup.mass import (
    Welford,
    accumulate,
    adapts_mass,
    dense,
    dense_hessian,
    empty_stats,
    hessian_diagonal_mass,
    hessian_mass,
    history_mass,
    laplace_mass,
    window_mass,
)
from bdl.sampling.warmup.schedule import Point
from bdl.sampling.warmup.step_size import (
    NOISE_BATCHES,
    AdaptParams,
    back_off,
    friction_floor,
    gradient_noise,
    largest_curvature,
    params_at,
)
from bdl.utils.trees import tree_size, tree_where

PyTree = Any
#: a chain whose step size was halved this often failed at every step size
FAILED_BACKOFF = 2.0**-40


class AdaptationState(NamedTuple):
    """One chain's warm-up: its adapted values, the window's statistics of θ, the guard, the
    largest curvature λ_max measured since the mass last changed, and for a dense mass the
    extreme states of the window before the last new mass and of the one since
    (:mod:`.extremes`); the final step is set from the last two (:meth:`WarmUp.update`). For a
    small model with minibatches, the control-variate anchor at the mode (:mod:`.anchor`)."""

    params: AdaptParams
    stats: Welford
    guard: guards.Guard
    peak: jax.Array
    extremes: tuple[edges.Extremes, edges.Extremes] | None = None
    anchor: Anchor | None = None


def needs_adaptation(kernel: Kernel) -> bool:
    """Whether the kernel was built without a step size (then ``bdl.sample`` adapts it)."""
    inner = kernel.recipe_kernel()
    return inner is not None and inner.step_size is None


def momentum_kernel(kernel: Kernel) -> bool:
    """Whether the kernel's recipe has momentum (more than the θ group)."""
    return len(kernel.recipe_kernel().recipe.groups) > 1


def with_adapted(kernel: Kernel, params: AdaptParams) -> Kernel:
    """``kernel`` with its recipe kernel set to the adapted (h, γ, M)."""
    inner = kernel.recipe_kernel()
    recipe = inner.recipe
    if params.mass is not None:
        recipe = recipe.with_mass(params.mass)
    if len(recipe.groups) > 1:
        recipe = recipe.with_friction(params.friction)
    return kernel.with_recipe_kernel(
        dataclasses.replace(inner, recipe=recipe, step_size=params.step_size)
    )


def frozen(kernel: Kernel, adapted: dict[str, Any], chain: int = 0) -> Kernel:
    """The constant kernel chain ``chain`` ran after burn-in: ``kernel`` (as built, without a
    step size) with ``samples.adapted``'s values, to reuse them or check them."""
    if "inverse_mass" in adapted:
        mass = dense_mass(jnp.asarray(adapted["inverse_mass"][chain]))
    elif "mass" in adapted:
        mass = Elementwise(jax.tree.map(lambda m: jnp.asarray(m[chain]), adapted["mass"]))
    else:
        mass = None
    params = AdaptParams(
        jnp.asarray(adapted["step_size"][chain]),
        jnp.asarray(adapted.get("friction", adapted["step_size"])[chain]),
        mass,
        jnp.ones(()),
    )
    return with_adapted(kernel, params)


def _random_minibatch(target: Target, key: jax.Array) -> Callable[[PyTree], Any]:
    """θ ↦ (Ũ(θ; S), ∇Ũ(θ; S)) on a fresh random minibatch S over the model's position."""
    batch, _ = target.next_batch(target.init_batches(key), jnp.zeros((), jnp.int32))
    return partial(target.stochastic_energy_and_grad, batch=batch)


def _recipe_energy(target: Target, kernel: Kernel, key: jax.Array) -> Callable[[PyTree], Any]:
    """The minibatch energy over the recipe's θ group, on a fresh random minibatch."""
    minibatch = _random_minibatch(target, key)
    return kernel.augment_energy(lambda theta: minibatch(theta)[0])


def _recipe_grad(target: Target, kernel: Kernel, key: jax.Array) -> Callable[[PyTree], PyTree]:
    """∇ of the minibatch energy over the recipe's θ group, on a fresh random minibatch."""
    return jax.grad(_recipe_energy(target, kernel, key))


def _correction(grad_fn: Callable[[PyTree], PyTree], anchor: Anchor | None) -> Any:
    """The anchor's control variate for minibatch Hessian-vector products, if any."""
    return None if anchor is None else hessian_correction(grad_fn, anchor)


class WarmUp(eqx.Module):
    """Warm-up adaptation of ``kernel`` (built without a step size, bound to the target): pure
    per-chain functions that the sampling loop runs inside its programs (module docstring)."""

    kernel: Kernel

    # ------------------------------------------------------------------ the kernel it adapts
    def kernel_at(self, params: AdaptParams) -> Kernel:
        """The kernel a chain steps with under its adapted values."""
        return with_adapted(self.kernel, params)

    # ------------------------------------------------------------------ init
    def init(self, target: Target, state: Any, key: jax.Array) -> tuple[Any, AdaptationState]:
        """A chain's first (h, γ) from the curvature at its start, M from the Hessian there
        (:func:`hessian_mass`, or its diagonal), an empty window and the guard."""
        kernel = self.kernel
        inner = kernel.recipe_state(state)
        theta = inner.z["theta"]
        is_dense = dense(kernel, theta)
        k_batch, k_power = jax.random.split(key)
        grad_fn = _recipe_grad(target, kernel, k_batch)
        temperature = target.temperature(jnp.zeros((), jnp.int32))
        mass = anchor = None
        if adapts_mass(kernel):
            if is_dense:
                state, theta, mass, anchor = self._laplace_start(target, state, temperature, key)
                inner = kernel.recipe_state(state)
            else:
                mass = hessian_diagonal_mass(grad_fn, theta, jax.random.fold_in(key, 3))
            moving = mass
        else:
            moving = history_mass(kernel, inner, grad_fn(theta))
        correction = _correction(grad_fn, anchor)
        curvature = largest_curvature(grad_fn, theta, moving, k_power, correction)
        floor = friction_floor(kernel, theta, temperature)
        second = momentum_kernel(kernel)
        params = params_at(curvature, mass, second, jnp.ones_like(curvature), floor)
        state = self._readapted(state, params)
        noise = self._energy_noise(target, theta, jax.random.fold_in(key, 4))
        guard = guards.start_guard(state, noise)
        extremes = (edges.empty(theta), edges.empty(theta)) if is_dense else None
        stats = empty_stats(theta, is_dense)
        return state, AdaptationState(params, stats, guard, curvature, extremes, anchor)

    def anchors(self, target: Target) -> bool:
        """Whether a dense model's chains get a control-variate anchor (:mod:`.anchor`): the
        target has minibatches smaller than its data and the kernel moves the model's own
        position (its recipe energy is the target's, not an augmentation of it)."""
        batch = getattr(target, "batch_size", None)
        energy = target.energy
        plain = self.kernel.augment_energy(energy) is energy
        return plain and batch is not None and batch < target.n

    def _laplace_start(
        self, target: Target, state: Any, temperature: jax.Array, key: jax.Array
    ) -> tuple[Any, PyTree, DenseMass, Anchor | None]:
        """A dense model's start (:mod:`.laplace`): where Newton's method converges from the
        chain's start (whether or not the energy is convex there), a draw of the Laplace
        approximation at the mode, with M = H(θ̂); else the start itself, with M from the
        minibatch Hessian there (:func:`hessian_mass`). With minibatches, the anchor at the
        mode (:meth:`anchors`)."""
        kernel = self.kernel
        inner = kernel.recipe_state(state)
        theta = inner.z["theta"]
        energy = kernel.augment_energy(target.energy)
        mode = newton_mode(energy, theta, temperature)
        drawn = laplace_draw(mode, theta, temperature, jax.random.fold_in(key, 5))
        theta = jax.tree.map(lambda new, old: jnp.where(mode.converged, new, old), drawn, theta)
        state = kernel.with_recipe_state(state, inner._replace(z={**inner.z, "theta": theta}))
        grad_fn = _recipe_grad(target, kernel, jax.random.split(key)[0])
        start = hessian_mass(grad_fn, theta)
        mass = DenseMass(jnp.where(mode.converged, mode_mass(mode).root, start.root))
        anchor = None
        if self.anchors(target):
            unravel = ravel_pytree(theta)[1]
            anchor = anchor_at(
                target.energy_and_grad, unravel(mode.position), mode.hessian, mode.converged
            )
        return state, theta, mass, anchor

    def gradient(self, adaptation: AdaptationState, minibatch: Any) -> Any:
        """The minibatch estimate a chain steps with: ``minibatch`` (θ ↦ (Ũ, ∇Ũ) on this step's
        minibatch), re-centred on the chain's anchor where it has one (:mod:`.anchor`)."""
        if adaptation.anchor is None:
            return minibatch
        return anchored(minibatch, adaptation.anchor)

    # ------------------------------------------------------------------ step
    def hyper(self, adaptation: AdaptationState, temperature: jax.Array) -> tuple[Any, Any]:
        """(h, T) of a warm-up step: the adapted step at the target's temperature (no
        schedule)."""
        return adaptation.params.step_size, temperature

    def stabilised(self, state: Any, adaptation: AdaptationState) -> Any:
        """The state after a warm-up step with any auxiliary variable pulled back into the
        integrator's stable region (:meth:`Recipe.warmup_guarded`: SGNHT's thermostat)."""
        inner = self.kernel.recipe_state(state)
        params = adaptation.params
        recipe = self.kernel_at(params).recipe_kernel().recipe
        guarded = inner._replace(z=recipe.warmup_guarded(inner.z, params.step_size))
        return self.kernel.with_recipe_state(state, guarded)

    def step(
        self,
        before: Any,
        after: Any,
        info: Info,
        after_finite: jax.Array,
        live: jax.Array,
        adaptation: AdaptationState,
        temperature: jax.Array,
    ) -> tuple[Any, AdaptationState, jax.Array]:
        """A warm-up step from ``before`` to ``after`` judged by the guard (:mod:`.guard`):
        taken, undone or rejected, h halved on failure, θ added to the window when taken.
        Returns the chain's state, its warm-up and whether it failed at every step size."""
        guard, params = adaptation.guard, adaptation.params
        inner = self.kernel.recipe_state(before)
        recipe = self.kernel_at(params).recipe_kernel().recipe
        dtype = info.energy.dtype
        kinetic = recipe.kinetic(inner.z).astype(dtype)
        previous = recipe.kinetic(self.kernel.recipe_state(guard.previous).z).astype(dtype)
        injection = params.step_size * params.friction if momentum_kernel(self.kernel) else 0.0
        dim = tree_size(inner.z["theta"])
        verdict = guards.judge(
            guard, info.energy, kinetic, previous, info.grad_norm, after_finite, live,
            temperature, dim, injection,
        )  # fmt: skip

        def where(mask: jax.Array, a: Any, b: Any) -> Any:
            return jax.tree.map(lambda x, y: jnp.where(mask, x, y), a, b)

        state = where(verdict.taken, after, where(verdict.undone, guard.previous, before))
        guard = guards.advance(guard, verdict, before, info.energy)
        params = back_off(params, verdict.ok)
        moved = self.kernel.recipe_state(state).z["theta"]
        stats = where(verdict.taken, accumulate(adaptation.stats, moved), adaptation.stats)
        extremes = adaptation.extremes
        if extremes is not None:
            seen = (extremes[0], edges.record(extremes[1], moved))
            extremes = where(verdict.taken, seen, extremes)
        failed = params.backoff < FAILED_BACKOFF  # nothing is finite at any step size
        state_out = adaptation._replace(params=params, stats=stats, guard=guard, extremes=extremes)
        return state, state_out, failed

    # ------------------------------------------------------------------ update
    def update(
        self,
        target: Target,
        state: Any,
        adaptation: AdaptationState,
        key: jax.Array,
        point: Point,
        t: jax.Array,
    ) -> tuple[Any, AdaptationState]:
        """(h, γ) from the curvature at an adaptation point, after a new mass from the window
        at the end of a slow window; the window's statistics restart at every window end. In
        the final window (the one whose values are frozen) h is also held to half the
        stability limit at the stiffest state measured since the last mass change, at its
        points every :data:`.schedule.FINAL_STEP_EVERY` steps. The point's flags may be traced
        booleans (one compilation for every point)."""
        kernel = self.kernel
        params, stats = adaptation.params, adaptation.stats
        inner = kernel.recipe_state(state)
        theta = inner.z["theta"]
        mass = params.mass
        is_dense = dense(kernel, theta)
        temperature = target.temperature(t)
        if mass is not None:

            def new_mass(stats: Welford) -> Any:
                window = window_mass(stats)
                if not is_dense:
                    return window
                unravel = ravel_pytree(theta)[1]
                energy = kernel.augment_energy(target.energy)  # full data: d ≤ 100 here
                hessian = dense_hessian(jax.grad(energy), unravel(stats.mean))
                return laplace_mass(window, hessian, temperature)

            mass = jax.lax.cond(point.new_mass, new_mass, lambda _: mass, stats)
        k_batch, k_power = jax.random.split(key)
        grad_fn = _recipe_grad(target, kernel, k_batch)
        moving = mass if mass is not None else history_mass(kernel, inner, grad_fn(theta))
        correction = _correction(grad_fn, adaptation.anchor)
        curvature = largest_curvature(grad_fn, theta, moving, k_power, correction)
        peak = jnp.where(point.new_mass, curvature, jnp.maximum(adaptation.peak, curvature))
        # the final window's step is also stable at the stiffest state it saw: the frozen
        # kernel must not diverge wherever the chain goes next, not only where it was measured
        stiffest = jnp.where(point.final, peak, curvature)
        extremes = adaptation.extremes
        if extremes is not None:  # and at the edges of the last two windows (.extremes)
            unravel = ravel_pytree(theta)[1]
            k_edge = jax.random.fold_in(key, 5)

            def at_edges() -> jax.Array:
                def curvature_at(x: PyTree) -> jax.Array:
                    return largest_curvature(grad_fn, x, moving, k_edge, correction)

                return edges.stiffest(curvature_at, extremes, unravel)

            last = jnp.logical_and(point.final, point.window_end)
            edge = jax.lax.cond(last, at_edges, lambda: jnp.zeros_like(curvature))
            stiffest = jnp.maximum(stiffest, edge)
            extremes = jax.lax.cond(
                point.new_mass, lambda e: (e[1], edges.empty(theta)), lambda e: e, extremes
            )
        backoff = jnp.minimum(1.0, 2.0 * params.backoff)
        floor = friction_floor(kernel, theta, temperature)
        k_noise = jax.random.fold_in(key, 2)
        second = momentum_kernel(kernel)
        anchor = adaptation.anchor

        def params_for(noise: jax.Array) -> AdaptParams:
            return params_at(curvature, mass, second, backoff, floor, noise, temperature, stiffest)

        if anchor is None:
            noise = jax.lax.cond(
                point.final,
                lambda: self._noise(target, theta, moving, k_noise),
                lambda: jnp.zeros((), curvature.dtype),
            )
            params = params_for(noise)
        else:  # both estimates' noise on the same minibatches; the anchor is kept if it pays
            measured = jax.lax.cond(
                point.final,
                lambda: jnp.stack(self._noise_pair(target, theta, moving, k_noise, anchor)),
                lambda: jnp.zeros((2,), curvature.dtype),
            )
            # the anchored estimate's noise grows with the distance from θ̂ (60-fold over a
            # mixture's posterior), so the rules read its mean over the final window's states
            noise = jnp.where(point.new_mass, 0.0, anchor.noise) + measured
            points = jnp.where(point.new_mass, 0, anchor.points) + point.final
            mean = noise / jnp.maximum(points, 1).astype(noise.dtype)
            plain, centred = params_for(mean[0]), params_for(mean[1])
            pays = moves(centred.step_size, centred.friction, second) >= PAYS * moves(
                plain.step_size, plain.friction, second
            )
            on = jnp.where(point.final, anchor.usable & pays, anchor.on)
            params = tree_where(on, centred, plain)
            anchor = anchor._replace(on=on, noise=noise, points=points)
        state = self._readapted(state, params)
        stats = jax.lax.cond(point.window_end, lambda: empty_stats(theta, is_dense), lambda: stats)
        return state, AdaptationState(params, stats, adaptation.guard, peak, extremes, anchor)

    # ------------------------------------------------------------------ final
    def final(self, adaptation: AdaptationState) -> dict[str, Any]:
        """The values the chains were frozen with (leading chain axis, host arrays), as
        ``Samples.adapted`` reports them: ``step_size``, ``friction`` (momentum kernels), and
        ``inverse_mass`` (a dense mass) or ``mass`` (diagonal)."""
        params = jax.device_get(adaptation.params)
        adapted = {"step_size": np.asarray(params.step_size)}
        if momentum_kernel(self.kernel):
            adapted["friction"] = np.asarray(params.friction)
        if adaptation.anchor is not None:
            adapted["control_variate"] = np.asarray(jax.device_get(adaptation.anchor.on))
        if isinstance(params.mass, DenseMass):
            root = np.asarray(params.mass.root)
            adapted["inverse_mass"] = root @ np.swapaxes(root, -1, -2)
        elif params.mass is not None:
            adapted["mass"] = jax.tree.map(np.asarray, params.mass.values)
        return adapted

    # ------------------------------------------------------------------ helpers
    def _readapted(self, state: Any, params: AdaptParams) -> Any:
        """``state`` with the recipe's auxiliary variables re-expressed for new values
        (:meth:`Recipe.readapted`, e.g. a momentum under a new mass)."""
        inner = self.kernel.recipe_state(state)
        recipe = self.kernel_at(params).recipe_kernel().recipe
        return self.kernel.with_recipe_state(state, inner._replace(z=recipe.readapted(inner.z)))

    def _noise(self, target: Target, theta: PyTree, mass: Any, key: jax.Array) -> jax.Array:
        """V of :func:`gradient_noise` from independent random minibatches at θ."""
        keys = jax.random.split(key, NOISE_BATCHES)
        grads = jax.vmap(lambda k: _recipe_grad(target, self.kernel, k)(theta))(keys)
        return gradient_noise(grads, mass)

    def _noise_pair(
        self, target: Target, theta: PyTree, mass: Any, key: jax.Array, anchor: Anchor
    ) -> tuple[jax.Array, jax.Array]:
        """V of the plain and of the anchored minibatch gradient on the same independent
        minibatches at θ."""
        keys = jax.random.split(key, NOISE_BATCHES)

        def both(k: jax.Array) -> tuple[PyTree, PyTree]:
            minibatch = _random_minibatch(target, k)
            plain = minibatch(theta)
            return plain[1], recentred(plain, minibatch(anchor.position), anchor, True)[1]

        plain, centred = jax.vmap(both)(keys)
        return gradient_noise(plain, mass), gradient_noise(centred, mass)

    def _energy_noise(self, target: Target, theta: PyTree, key: jax.Array) -> jax.Array:
        """s_Ũ of :class:`.guard.Guard`: the standard deviation of the minibatch energy across
        :data:`.guard.ENERGY_NOISE_BATCHES` independent minibatches at θ (0 with full
        batches)."""
        keys = jax.random.split(key, guards.ENERGY_NOISE_BATCHES)
        energies = jax.vmap(lambda k: _recipe_energy(target, self.kernel, k)(theta))(keys)
        return jnp.std(energies, ddof=1)

"""Control-variate minibatch gradients anchored at the posterior's mode, for small models whose
step is held by minibatch noise.

When warm-up's Laplace start (:mod:`.laplace`) finds the mode θ̂ of a model with minibatches,
the minibatch estimates are re-centred on it (Baker et al. 2019, *Control variates for
stochastic gradient MCMC*, Statistics and Computing 29, eq. 4):

    ∇Ũ_cv(θ) = ∇U(θ̂) + ∇Ũ(θ; S) − ∇Ũ(θ̂; S),    Ũ_cv(θ) = U(θ̂) + Ũ(θ; S) − Ũ(θ̂; S),

with U(θ̂) and ∇U(θ̂) on the full data, computed once, and both minibatch terms on the same
minibatch S. The estimate stays unbiased for every θ (E_S ∇Ũ(θ; S) = ∇U(θ)), so the recipe,
its stationary distribution and the checker's verdict are those of the plain estimator; its
variance is that of the difference of the per-example gradients at θ and θ̂, which vanishes
as θ → θ̂: within the posterior's width of a mode it is a small fraction of the plain
estimate's. Warm-up's step rule (:mod:`.step_size`) reads the gradient noise V, and a step held
to h ≤ 2Tε/V (first-order kernels) or h·γ ≤ 1 (momentum kernels) by the plain estimate's noise
grows back towards the curvature's limit.

The same control variate serves the curvature that sets the step (:func:`hessian_correction`):
the largest eigenvalue of a minibatch Hessian over-states the full data's, and the step rules
want the latter. The anchored gradient costs a second minibatch gradient a step, so a chain
keeps it only where it pays: at each of the final window's adaptation points (the last one sets
the frozen kernel) warm-up measures V for both estimates on the same minibatches, and
re-centres the chain's gradients when the adapted step that the mean V over the window's points
so far allows moves it at least :data:`PAYS` times as far per step (h for first-order kernels,
h/γ, the diffusion per step of a damped chain, for momentum kernels); before the final window
they are re-centred wherever the anchor is usable.
The mean matters: the anchored estimate's noise grows with the squared distance from θ̂, and
on a two-component mixture's posterior it varies 60-fold between states (0.06 to 3.4, mean
0.83, against 5.8 to 11.9 for the plain one); a step and friction set from one state's V heated
the chain by 13–23 % in sd.

An anchor is made only where the Newton iteration converged, the kernel moves the model's own
position (no augmentation such as Entropy-MCMC's) and the target's minibatches are smaller than
its data. ``samples.adapted["control_variate"]`` says, per chain, whether it was used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from bdl.sampling.run.carry import all_finite

PyTree = Any
EnergyAndGrad = Callable[[PyTree], tuple[jax.Array, PyTree]]

#: how many times further per step the anchored estimate must let a chain move to be kept
PAYS = 2.0


class Anchor(NamedTuple):
    """A chain's control-variate anchor: the mode θ̂, the full-data U(θ̂), ∇U(θ̂) and H(θ̂)
    (d × d, over the flattened position), whether it can be used (Newton's method converged
    there: ``usable``), whether the chain's gradients are re-centred on it (``on``), and the
    sums of the gradient noise V of the plain and the anchored estimate over the final window's
    adaptation points (``noise``, shape (2,)) with their count (``points``)."""

    position: PyTree
    energy: jax.Array
    grad: PyTree
    hessian: jax.Array
    usable: jax.Array
    on: jax.Array
    noise: jax.Array
    points: jax.Array


def anchor_at(
    energy_and_grad: EnergyAndGrad, position: PyTree, hessian: jax.Array, converged: jax.Array
) -> Anchor:
    """The anchor at ``position`` (the mode, where the full-data Hessian is ``hessian``),
    switched on where Newton's method ``converged`` and U and ∇U are finite there."""
    energy, grad = energy_and_grad(position)
    usable = jnp.asarray(converged) & all_finite((energy, grad))
    noise = jnp.zeros((2,), energy.dtype)
    return Anchor(position, energy, grad, hessian, usable, usable, noise, jnp.zeros((), jnp.int32))


def hessian_correction(
    grad_fn: Callable[[PyTree], PyTree], anchor: Anchor
) -> Callable[[PyTree], PyTree]:
    """u ↦ H(θ̂)u − H̃(θ̂; S)u, where the anchor is usable (else 0): added to a minibatch
    Hessian-vector product H̃(θ; S)u of ``grad_fn`` (θ ↦ ∇Ũ(θ; S)), the same control variate
    for the curvature. A minibatch Hessian's largest eigenvalue over-states the full data's
    (by 1.5–2× at n/B ≈ 11 on a 12-parameter regression), and the step rules want the
    latter: the minibatch's own fluctuation is the gradient noise that V accounts for."""
    unravel = ravel_pytree(anchor.position)[1]

    def correction(u: PyTree) -> PyTree:
        full = unravel(anchor.hessian @ ravel_pytree(u)[0])
        mini = jax.jvp(grad_fn, (anchor.position,), (u,))[1]
        return jax.tree.map(lambda f, m: jnp.where(anchor.usable, f - m, 0.0), full, mini)

    return correction


def anchored(minibatch: EnergyAndGrad, anchor: Anchor) -> EnergyAndGrad:
    """``minibatch`` (θ ↦ (Ũ(θ; S), ∇Ũ(θ; S)) on one minibatch S) re-centred on ``anchor``
    where it is on (module docstring); the plain estimate where it is off."""

    def estimate(position: PyTree) -> tuple[jax.Array, PyTree]:
        return recentred(minibatch(position), minibatch(anchor.position), anchor, anchor.on)

    return estimate


def recentred(
    at: tuple[jax.Array, PyTree], at_anchor: tuple[jax.Array, PyTree], anchor: Anchor, on: Any
) -> tuple[jax.Array, PyTree]:
    """The control variate: (Ũ(θ; S) − Ũ(θ̂; S) + U(θ̂), ∇Ũ(θ; S) − ∇Ũ(θ̂; S) + ∇U(θ̂)) from one
    minibatch's values ``at`` θ and ``at_anchor`` θ̂, where ``on``; ``at`` itself where not."""
    (energy, grad), (energy_hat, grad_hat) = at, at_anchor
    energy = jnp.where(on, energy - energy_hat + anchor.energy, energy)
    grad = jax.tree.map(
        lambda g, g_hat, full: jnp.where(on, g - g_hat + full, g), grad, grad_hat, anchor.grad
    )
    return energy, grad


def moves(step_size: jax.Array, friction: jax.Array, second_order: bool) -> jax.Array:
    """How far a chain moves per step under an adapted step, up to a constant: h (first order),
    h/γ (momentum kernels)."""
    return step_size / friction if second_order else step_size

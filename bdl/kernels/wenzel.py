"""The symplectic-Euler Langevin scheme of Wenzel et al. (2020, Alg. 1, App. B–D).

SGHMC (:func:`bdl.kernels.sghmc.sghmc`) in the deep-learning parameterisation with a layerwise
preconditioner, inside the :class:`WenzelSchedule` wrapper: cyclical time stepping, a temperature
ramp and one sample per cycle.

Recipe (between preconditioner updates): z = (θ, m), g = ½mᵀM⁻¹m, Q = [[0, −I], [I, 0]],
D = diag(0, γM) with M the layerwise diagonal mass. Symplectic Euler with step h_t = C(t)·h₀:

    m ← (1 − h_tγ)m − h_t∇Ũ(θ) + √(2γh_tT_t)·M^{1/2}·ξ,     θ ← θ + h_t·M⁻¹m,

with ∇Ũ = n∇G̃ the full-scale minibatch gradient (Eq. 8–10) and, from the learning rate ℓ and
momentum decay β (App. B, Eq. 12–13),

    h₀ = √(ℓ/n),    γ = (1 − β)·√(n/ℓ).

At T = 0 with M = I and C ≡ 1 this is ``optax.sgd(ℓ, momentum=β)`` on the mean loss G̃ (App. C).

Preconditioner (App. D, Alg. 4): per parameter leaf l, m_l = √(mean of (∇G̃)² over the leaf's
entries and K minibatch gradients + 10⁻⁷), M_l = m_l / min_j m_j, re-estimated once per epoch
from the last K gradients of the epoch (the kernel's own; no extra backprop); M = I during the
first epoch. When M changes, m ← M_new^{1/2} M_old^{−1/2} m; the state stores the canonical
momentum p = M^{−1/2}m (recipe g = ½pᵀp, Q_θp = −M^{−1/2} = −Q_pθ, D_pp = γ: the same
iterates), which that rescaling leaves unchanged, so it is exact and free.

Schedules (App. A; the authors' code, ``cold_posterior_bnn``): with E steps per epoch, cycle
length L epochs and sampling start S epochs,

* C(t) = 1 for t < S·E, then the cosine cycles of Zhang et al. (2020),
  C(t) = ½[cos(π·mod(t − S·E, L·E)/(L·E)) + 1];
* T_t = T(t)·ρ(t): ρ = 0 until epoch S − R, then a linear ramp to 1 over R epochs
  (R = ``ramp_epochs``, default L), so the full temperature is reached when sampling starts;
* one sample at the last step of each cycle after S·E (``is_sample``), the step where h_t is
  smallest and the simulation most accurate.

Reference: F. Wenzel, K. Roth, B. S. Veeling, J. Świątkowski, L. Tran, S. Mandt, J. Snoek,
T. Salimans, R. Jenatton, S. Nowozin. How Good is the Bayes Posterior in Deep Neural Networks
Really? ICML 2020.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from bdl.kernels.parameterisation import learning_rate_or_step
from bdl.kernels.preconditioners import Layerwise, Preconditioner, layerwise
from bdl.kernels.sghmc import sghmc
from bdl.kernels.wrapper import Wrapper
from bdl.schedules import cosine_cycle

SCHEDULES = ("cosine", "flat")
#: the paper's preconditioner: layerwise, re-estimated every epoch from K = 32 gradients
LAYERWISE = layerwise()


class WenzelSchedule(Wrapper):
    """Wenzel et al.'s cycles, temperature ramp and one draw per cycle around ``inner``
    (module docstring; lengths in epochs of E steps).

    Args:
        inner: the kernel stepped (SGHMC with a layerwise mass in :func:`wenzel`).
        cycle_length: L, epochs per cycle.
        sampling_start: S, the epoch at which cycling and sampling start.
        ramp_epochs: R, epochs of the temperature ramp ending at S (default L).
        epoch_length: E, steps per epoch (``None``: the target's at bind).
        schedule: ``"cosine"`` or ``"flat"``.
    """

    cycle_length: int = eqx.field(static=True, default=5)
    sampling_start: int = eqx.field(static=True, default=10)
    ramp_epochs: int | None = eqx.field(static=True, default=None)
    epoch_length: int | None = eqx.field(static=True, default=None)
    schedule: str = eqx.field(static=True, default="cosine")

    def __check_init__(self) -> None:
        for name in ("cycle_length", "epoch_length"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(f"wenzel: {name} must be an int >= 1; got {value!r}.")
        for name in ("sampling_start", "ramp_epochs"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise ValueError(f"wenzel: {name} must be an int >= 0; got {value!r}.")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"wenzel: schedule must be 'cosine' or 'flat'; got {self.schedule!r}.")

    @property
    def name(self) -> str:
        return "wenzel"

    def bind(self, target: Any) -> WenzelSchedule:
        epoch = self.epoch_length
        if epoch is None:
            epoch = getattr(target, "num_batches", None)
            if epoch is None:
                raise ValueError(
                    "wenzel: the target has no minibatch epochs (num_batches); give "
                    "epoch_length=<steps per epoch>."
                )
        return dataclasses.replace(self, inner=self.inner.bind(target), epoch_length=int(epoch))

    def _epoch(self) -> int:
        if self.epoch_length is None:
            raise ValueError(
                "wenzel: the epoch length is set when the kernel is bound to a target; call "
                "kernel.bind(compiled) first (bdl.sample does), or give epoch_length=..."
            )
        return self.epoch_length

    @property
    def cycle_steps(self) -> int:
        """Steps per cycle, L·E (after :meth:`bind` or with ``epoch_length``)."""
        return self.cycle_length * self._epoch()

    @property
    def sampling_start_step(self) -> int:
        """First step of the first sampled cycle, S·E."""
        return self.sampling_start * self._epoch()

    def cycle_factor(self, step: jax.Array) -> jax.Array:
        """C(t): 1 before sampling starts, then cosine cycles of L·E steps.

        Args:
            step: the global step t.

        Returns:
            C(t).
        """
        if self.schedule == "flat":
            return jnp.ones(())
        t = jnp.asarray(step) - self.sampling_start_step
        return jnp.where(t >= 0, cosine_cycle(jnp.maximum(t, 0), self.cycle_steps), 1.0)

    def temperature_factor(self, step: jax.Array) -> jax.Array:
        """ρ(t) ∈ [0, 1]: 0, then a linear ramp over R epochs that ends when sampling starts.

        Args:
            step: the global step t.

        Returns:
            ρ(t).
        """
        ramp = self.cycle_length if self.ramp_epochs is None else self.ramp_epochs
        ramp = min(ramp, self.sampling_start)
        if ramp == 0:
            return jnp.ones(())
        length = ramp * self._epoch()
        begin = self.sampling_start_step - length
        return jnp.clip((jnp.asarray(step) + 1.0 - begin) / length, 0.0, 1.0)

    def hyper(self, step: jax.Array, temperature: jax.Array) -> tuple[jax.Array, jax.Array]:
        h, temp = self.inner.hyper(step, temperature)
        return h * self.cycle_factor(step), temp * self.temperature_factor(step)

    def is_sample(self, step: jax.Array) -> jax.Array:
        """True only at the last step of each cycle after sampling starts.

        Args:
            step: the global step t.

        Returns:
            A boolean scalar.
        """
        t = jnp.asarray(step) - self.sampling_start_step
        return (t >= 0) & (jnp.mod(t + 1, self.cycle_steps) == 0) & self.inner.is_sample(step)

    def num_samples(self, num_steps: int) -> int:
        """Samples a run of ``num_steps`` steps yields (with ``thin=1`` and no burn-in cut).

        Args:
            num_steps: the run's steps.

        Returns:
            The number of draws.
        """
        return max(0, (num_steps - self.sampling_start_step) // self.cycle_steps)


def wenzel(
    learning_rate: float | None = None,
    momentum: float | None = None,
    *,
    cycle_length: int = 5,
    sampling_start: int = 10,
    ramp_epochs: int | None = None,
    epoch_length: int | None = None,
    schedule: str = "cosine",
    preconditioner: Preconditioner = LAYERWISE,
    init_momentum: str = "sample",
    collect_momentum: bool = False,
    step_size: Any = None,
    friction: Any = None,
) -> WenzelSchedule:
    """Wenzel et al. (2020) symplectic-Euler Langevin: SGHMC with a layerwise mass inside
    :class:`WenzelSchedule`.

    Args:
        learning_rate: ℓ (default 0.1, as the paper); h₀ = √(ℓ/n) at bind.
        momentum: β (default 0.98, as the paper); γ = (1 − β)√(n/ℓ) at bind.
        cycle_length: L, epochs per cycle (default 5).
        sampling_start: S, epoch at which cycling and sampling start (default 10; the paper's
            runs use L = 50, S = 150 for 1500 epochs on CIFAR-10).
        ramp_epochs: R, epochs of the linear temperature ramp ending at S (default L; 0 turns
            the ramp off).
        epoch_length: E, steps per epoch; ``None``: ``target.num_batches`` at bind.
        schedule: ``"cosine"`` (default) or ``"flat"`` (C ≡ 1; cycles still set the samples).
        preconditioner: default ``layerwise()`` re-estimated every epoch from K = 32 gradients;
            ``identity()`` for M = I.
        init_momentum: ``"sample"`` (default; m ~ N(0, M) as Alg. 1) or ``"zero"`` (as SGD).
        collect_momentum: also collect ``"momentum"`` and ``"mass"`` with each draw (for the
            kinetic-temperature diagnostics).
        step_size: h₀, given directly instead of ``learning_rate`` (then ``learning_rate=None``).
        friction: γ, given with ``step_size``.

    Returns:
        The kernel, a :class:`WenzelSchedule` around SGHMC.
    """
    if step_size is None:  # the paper's defaults
        learning_rate = 0.1 if learning_rate is None else learning_rate
        momentum = 0.98 if momentum is None else momentum
    learning_rate_or_step("wenzel", step_size, learning_rate, momentum)  # named as wenzel's
    if (
        epoch_length is not None
        and isinstance(preconditioner, Layerwise)
        and preconditioner.update_every is None
    ):
        preconditioner = dataclasses.replace(preconditioner, update_every=epoch_length)
    inner = sghmc(
        step_size,
        friction,
        learning_rate=learning_rate,
        momentum=momentum,
        init_momentum=init_momentum,
        preconditioner=preconditioner,
        collect_momentum=collect_momentum,
    )
    return WenzelSchedule(inner, cycle_length, sampling_start, ramp_epochs, epoch_length, schedule)

"""Cyclical SG-MCMC: cosine step-size cycles with an exploration and a sampling stage
(Zhang, Li, Zhang, Chen & Wilson 2020, "Cyclical Stochastic Gradient MCMC for Bayesian Deep
Learning", ICLR).

Around any kernel with base step size h₀(t) (its own ``hyper``), with K steps per cycle and a
0-based step counter t (the paper's Eq. 1 uses t − 1 with t from 1):

    h_t = h₀(t)/2 · [cos(π·mod(t, K)/K) + 1],   K = cycle_length or ⌈num_steps/num_cycles⌉.

The first ``exploration`` fraction of each cycle (steps with mod(t, K) < ⌈βK⌉, β = exploration)
runs at temperature T_t = 0: the noise and the T·Γ correction vanish and the inner kernel becomes
its optimiser limit (SGLD → gradient descent, SGHMC → SGD with momentum), which moves fast to a
new mode while the step is large. The rest of the cycle runs at the target's T and its states are
the samples (``is_sample``). Each step is the inner kernel's step at (h_t, T_t), so the wrapper is
exact in the checker's sense whenever the inner kernel is; the sampling stage is, as in the paper,
a time-inhomogeneous chain whose stationary law at each fixed h is the inner kernel's.
"""

from __future__ import annotations

import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from bdl.kernels.base import Kernel
from bdl.kernels.wrapper import Wrapper, base_kernel, check_inner
from bdl.schedules import cosine_cycle


class Cyclical(Wrapper):
    """Cyclical step size and exploration/sampling stages around ``inner``.

    Args:
        inner: the kernel stepped at (h_t, T_t); its own ``hyper(t, T)`` gives h₀(t).
        cycle_length: K ≥ 1, steps per cycle.
        exploration: β ∈ [0, 1), fraction of each cycle run at T = 0 and not collected.
    """

    cycle_length: int = eqx.field(static=True)
    exploration: float = eqx.field(static=True, default=0.8)

    def __check_init__(self) -> None:
        check_inner(self.inner, "cyclical")
        k = self.cycle_length
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"cyclical: cycle_length must be an integer >= 1; got {k!r}.")
        b = self.exploration
        if isinstance(b, bool) or not isinstance(b, int | float) or not 0 <= b < 1:
            raise ValueError(f"cyclical: exploration must be a fraction in [0, 1); got {b!r}.")
        if self.exploration_steps >= k:
            raise ValueError(
                f"cyclical: exploration={b} leaves no sampling step in a cycle of "
                f"cycle_length={k} steps; lengthen the cycle or lower exploration."
            )

    @property
    def name(self) -> str:
        return f"cyclical({self.inner.name})"

    @property
    def exploration_steps(self) -> int:
        """Steps per cycle at T = 0: the number of m ∈ {0, …, K−1} with m/K < β."""
        return math.ceil(round(self.exploration * self.cycle_length, 9))

    def exploring(self, step: jax.Array) -> jax.Array:
        """Whether step t is in the exploration stage of its cycle.

        Args:
            step: the global step t.

        Returns:
            A boolean scalar.
        """
        return jnp.mod(jnp.asarray(step), self.cycle_length) < self.exploration_steps

    def hyper(self, step: jax.Array, temperature: jax.Array) -> tuple[jax.Array, jax.Array]:
        h0, temp = self.inner.hyper(step, temperature)
        temp = jnp.asarray(temp)
        h = h0 * cosine_cycle(step, self.cycle_length)
        return h, jnp.where(self.exploring(step), jnp.zeros_like(temp), temp)

    def is_sample(self, step: jax.Array) -> jax.Array:
        return jnp.logical_and(~self.exploring(step), self.inner.is_sample(step))


def cyclical(
    base: str | Kernel = "sghmc",
    *,
    cycle_length: int | None = None,
    num_cycles: int | None = None,
    num_steps: int | None = None,
    exploration: float = 0.8,
    **base_hyper: Any,
) -> Cyclical:
    """Cyclical SG-MCMC around ``base``: a kernel object, or a registered name with its
    hyper-parameters. Give ``cycle_length`` (K steps), or ``num_cycles`` with the run's
    ``num_steps`` (K = ⌈num_steps/num_cycles⌉, Zhang et al. 2020).

    This is the factory registered as ``"cyclical"``, e.g.
    ``bdl.kernels.get("cyclical", base="sghmc", step_size=0.05, friction=2.0, cycle_length=500)``
    or ``cyclical(entropy(sghmc(0.05), eta=0.5), num_cycles=4, num_steps=10_000)``.

    Args:
        base: the kernel to cycle, or the registered name of one.
        cycle_length: K, steps per cycle.
        num_cycles: the number of cycles in ``num_steps`` (instead of ``cycle_length``).
        num_steps: the run's steps, with ``num_cycles``.
        exploration: β ∈ [0, 1), the fraction of each cycle run at T = 0 and not collected.
        **base_hyper: the hyper-parameters of a ``base`` given by name.

    Returns:
        The kernel, a :class:`Cyclical`.

    Raises:
        ValueError: neither ``cycle_length`` nor ``num_cycles`` with ``num_steps`` (or both), a
            length below 1, an ``exploration`` outside [0, 1), or hyper-parameters for a kernel
            object.
    """
    if cycle_length is None:
        if num_cycles is None or num_steps is None:
            raise ValueError(
                "cyclical: give cycle_length (steps per cycle), or num_cycles with num_steps."
            )
        for arg, value in (("num_cycles", num_cycles), ("num_steps", num_steps)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"cyclical: {arg} must be an integer >= 1; got {value!r}.")
        cycle_length = math.ceil(num_steps / num_cycles)
    elif num_cycles is not None:
        raise ValueError("cyclical: give either cycle_length or num_cycles, not both.")
    return Cyclical(base_kernel("cyclical", base, base_hyper), cycle_length, exploration)

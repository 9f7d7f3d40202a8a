"""``bdl.Potential``: a target given directly by its log-density (no data, no network).

Used for synthetic energies (the two-mode 2-D mixture of Li & Zhang 2024, Gaussian toys of
Gong et al. 2019) and for testing kernels. ``grad_noise`` injects N(0, s²·I) noise into every
stochastic gradient, mimicking minibatch noise with a known covariance.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax

from bdl.dsl.temperature import TemperatureLike, check_temperature
from bdl.utils import arguments
from bdl.utils.arguments import shown

PyTree = Any


@dataclasses.dataclass(frozen=True, eq=False)
class Potential:
    """A target π_T(θ) ∝ exp(log_density(θ)/T), U = −log_density.

    Args:
        log_density: jittable ``θ -> log π(θ)`` (up to a constant) on a pytree θ.
        init: an initial position pytree, or ``key -> position`` for distinct chain starts.
        temperature: T ≥ 0 or a schedule ``step -> T``.
        grad_noise: standard deviation s of the N(0, s²·I) noise added to each stochastic
            gradient (0: exact gradients).
        name: label used in reports and caches.
    """

    log_density: Callable[[PyTree], jax.Array]
    init: PyTree | Callable[[jax.Array], PyTree]
    temperature: TemperatureLike = 1.0
    grad_noise: float = 0.0
    name: str = "potential"

    def __post_init__(self) -> None:
        if not callable(self.log_density):
            raise TypeError("Potential(log_density=...) must be a function θ -> log π(θ).")
        if self.init is None:
            raise ValueError(
                "Potential(init=...) is required: the initial position pytree, or a function "
                "key -> position."
            )
        check_temperature(self.temperature)
        arguments.number(self.grad_noise, "Potential(grad_noise=...)", at_least=0.0)
        if not isinstance(self.name, str):
            raise TypeError(f"Potential(name=...) must be a string; got {shown(self.name)}.")

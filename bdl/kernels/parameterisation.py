"""The deep-learning parameterisation: a learning rate ℓ and a momentum decay β instead of a step
size h and a friction γ (Wenzel et al. 2020, App. B, Eq. 12–13):

    h = √(ℓ/n),    γ = (1 − β)·√(n/ℓ),

with n the training-set size. Momentum kernels given (ℓ, β) are resolved when they are bound to a
target; at T = 0 SGHMC in this parameterisation is ``optax.sgd(ℓ, momentum=β)`` on the mean
minibatch loss Ũ/n, step for step (docs/design.md, *Deep-learning parameterisation*).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from bdl.utils import arguments


class LearningRate(NamedTuple):
    """(ℓ, β), resolved to (h, γ) with the target's n by :func:`langevin_from_sgd`."""

    learning_rate: float
    momentum: float


def langevin_from_sgd(learning_rate: float, momentum: float, n: float) -> tuple[float, float]:
    """(h, γ) of SGD(ℓ, β) on the mean loss: h = √(ℓ/n), γ = (1 − β)√(n/ℓ)."""
    n = float(n)
    return math.sqrt(learning_rate / n), (1.0 - momentum) * math.sqrt(n / learning_rate)


def learning_rate_or_step(name: str, step_size: Any, learning_rate: Any, momentum: Any) -> Any:
    """``step_size``, or :class:`LearningRate` when (ℓ, β) is given; ``ValueError`` naming the
    argument when both or an invalid pair is given (ℓ > 0, β ∈ [0, 1))."""
    if learning_rate is None:
        if momentum is not None:
            raise ValueError(f"{name}: momentum goes with learning_rate; give both or neither.")
        return step_size
    if step_size is not None:
        raise ValueError(
            f"{name}: give either step_size or learning_rate (with momentum), not both."
        )
    learning_rate = arguments.number(learning_rate, f"{name}: learning_rate", above=0.0)
    if momentum is None:
        raise ValueError(f"{name}: momentum must be in [0, 1) with learning_rate; got None.")
    momentum = arguments.number(momentum, f"{name}: momentum", at_least=0.0, below=1.0)
    return LearningRate(learning_rate, momentum)


def step_and_friction(
    owner: str, step_size: Any, friction: Any, learning_rate: Any, momentum: Any
) -> tuple[Any, float]:
    """(h or :class:`LearningRate`, C) of a friction kernel given (h, C) or (ℓ, β): the friction
    defaults to 1, must be > 0, and is absent when (ℓ, β) is given (it is derived at bind)."""
    step = learning_rate_or_step(owner, step_size, learning_rate, momentum)
    if step is None:
        raise ValueError(f"{owner}: step_size is required (or learning_rate with momentum).")
    if learning_rate is not None and friction is not None:
        raise ValueError(f"{owner}: friction is derived from learning_rate and momentum; not both.")
    friction = 1.0 if friction is None else friction
    return step, arguments.number(friction, f"{owner}: friction", above=0.0)

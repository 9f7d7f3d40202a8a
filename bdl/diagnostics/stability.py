"""How stable a network's Bayesian model average is: the BMA of the first half of the kept draws
against that of the second half, on held-out inputs.

The metrics are those the NeurIPS 2021 competition "Approximate inference in Bayesian deep
learning" (Wilson, Izmailov, Hoffman, Gal, Li, Pan, Kirichenko, Wilson 2021) scored approximate
predictive distributions with against HMC's: the top-1 agreement, the fraction of inputs on
which the two predictive distributions have the same most probable class, and the total
variation (1/n) Σ_i ½ Σ_k |p_ik − q_ik|. Between the two halves of one run they say how much the
answer a user reads off the draws would change with twice as many: a BMA that still moves
between halves is not yet an estimate of the posterior predictive, whatever its accuracy.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

__all__ = ["Stability", "bma_stability"]


@dataclasses.dataclass(frozen=True)
class Stability:
    """The BMA of the first half of the draws against the second's.

    Attributes:
        agreement: the fraction of inputs with the same most probable class (1: every one).
        total_variation: the mean over inputs of ½ Σ_k |p_k − q_k| (0: the same predictive).
        inputs: the held-out inputs compared; draws: the draws per chain split in two.
    """

    agreement: float
    total_variation: float
    inputs: int
    draws: int

    def summary(self) -> str:
        """One line: the agreement and total variation, and what was compared.

        Returns:
            The line.
        """
        return (
            f"BMA stability (first vs second half of the draws, {self.inputs} held-out inputs): "
            f"top-1 agreement {self.agreement:.3f}, total variation {self.total_variation:.4f}"
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON values.

        Returns:
            A dict that :meth:`from_dict` reads back.
        """
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Stability:
        """The inverse of :meth:`as_dict`.

        Args:
            data: what :meth:`as_dict` returned.

        Returns:
            The stability.
        """
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls)})


def bma_stability(probabilities: Any) -> Stability | None:
    """The BMA of the first half of every chain's draws against that of the second half.

    Args:
        probabilities: class probabilities ``(chain, draw, inputs, classes)``.

    Returns:
        The :class:`Stability`, or ``None`` with fewer than 2 draws per chain or no input whose
            probabilities are finite.
    """
    p = np.asarray(probabilities, np.float64)
    if p.ndim != 4 or p.shape[1] < 2 or p.shape[2] == 0:
        return None
    half = p.shape[1] // 2
    first = p[:, :half].mean(axis=(0, 1))
    second = p[:, p.shape[1] - half :].mean(axis=(0, 1))
    finite = np.isfinite(first).all(axis=-1) & np.isfinite(second).all(axis=-1)
    if not finite.any():
        return None
    first, second = first[finite], second[finite]
    agreement = float(np.mean(first.argmax(axis=-1) == second.argmax(axis=-1)))
    total_variation = float(np.mean(0.5 * np.abs(first - second).sum(axis=-1)))
    return Stability(agreement, total_variation, int(finite.sum()), int(p.shape[1]))

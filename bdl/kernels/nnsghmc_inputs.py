"""NNSGHMC's input normalisation (Gong, Li & Hernández-Lobato 2019, Sec. 3.2 and App. E): the one
map from (Ũ, r, ∇Ũ) to the networks' inputs, used alike in meta-training and in the kernel.

App. E rescales the energy by the ratio of dimensions and standardises the momentum and the
energy gradient with statistics of a pilot run of the randomly initialised sampler. bdl writes
this as raw features, then constant standardisation:

    u = (Ũ(θ)/d − m_U)/s_U,      pᵢ = (rᵢ − m_r)/s_r,      gᵢ = (∂ᵢŨ(θ) − m_g)/s_g,

with d the number of coordinates of θ. Ũ/d is Eq. 26's D_train/D_test rescaling up to the
constant factor D_train, which (m_U, s_U) absorb; r is the momentum (N(0, T·I) at equilibrium
whatever the task); ∂ᵢŨ is the full-data-scale gradient estimate, as the training tasks present
it. The six numbers (m, s) are :class:`InputStatistics`, measured by the trainer's pilot run on
the training tasks (:func:`bdl.meta.nnsghmc_training.pilot_statistics`), stored in the
meta-parameter file's header and read back by the kernel.

**Exactness.** The statistics are constants — not functions of the chain's state — so u is an
affine function of Ũ and p of r, and Γ follows by the chain rule: ∂u/∂U = 1/(d·s_U) and
∂p/∂r = 1/s_r (:meth:`InputStatistics.energy_slope`, :meth:`InputStatistics.momentum_slope`).
Statistics recomputed from the current state would change the recipe at every step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

PyTree = Any

#: the header key of a meta-parameter file that holds the statistics
HEADER_KEY = "input_statistics"
FIELDS = ("energy_mean", "energy_sd", "momentum_mean", "momentum_sd", "grad_mean", "grad_sd")


class InputStatistics(NamedTuple):
    """Means and standard deviations of the raw features Ũ/d, r and ∂Ũ (module docstring).

    :data:`IDENTITY` (means 0, sds 1) leaves the raw features as they are."""

    energy_mean: Any = 0.0
    energy_sd: Any = 1.0
    momentum_mean: Any = 0.0
    momentum_sd: Any = 1.0
    grad_mean: Any = 0.0
    grad_sd: Any = 1.0

    def energy_slope(self, dim: int) -> Any:
        """∂u/∂Ũ = 1/(d·s_U)."""
        return 1.0 / (dim * self.energy_sd)

    def momentum_slope(self) -> Any:
        """∂pᵢ/∂rᵢ = 1/s_r."""
        return 1.0 / self.momentum_sd

    def as_dict(self) -> dict[str, float]:
        """Plain floats, for a file header."""
        return {name: float(value) for name, value in zip(FIELDS, self, strict=True)}


IDENTITY = InputStatistics()


def input_statistics(value: Any, what: str = "nnsghmc: input_stats") -> InputStatistics:
    """``value`` (an :class:`InputStatistics` or a mapping with its six keys) checked: finite
    means, positive finite sds; a ``ValueError`` naming ``what`` otherwise."""
    if isinstance(value, InputStatistics):
        items = value.as_dict()
    elif isinstance(value, Mapping):
        missing = sorted(set(FIELDS) - set(value))
        extra = sorted(set(value) - set(FIELDS))
        if missing or extra:
            raise ValueError(
                f"{what} must have exactly the keys {list(FIELDS)}; missing {missing}, "
                f"unknown {extra}."
            )
        items = dict(value)
    else:
        raise TypeError(
            f"{what} must be an InputStatistics or a mapping with keys {list(FIELDS)}; got "
            f"{type(value).__name__}."
        )
    out = {}
    for name in FIELDS:
        v = items[name]
        try:
            if isinstance(v, bool | str):
                raise TypeError
            v = float(v)
        except (TypeError, ValueError):
            raise TypeError(f"{what}[{name!r}] must be a number; got {v!r}.") from None
        if not math.isfinite(v) or (name.endswith("_sd") and v <= 0):
            need = "a finite number > 0" if name.endswith("_sd") else "a finite number"
            raise ValueError(f"{what}[{name!r}] must be {need}; got {v}.")
        out[name] = v
    return InputStatistics(**out)


def num_coordinates(position: PyTree) -> int:
    """d, the number of coordinates of θ (static: from the leaves' shapes)."""
    return sum(int(math.prod(jnp.shape(x))) for x in jax.tree.leaves(position))


def raw_features(energy: Any, r: PyTree, grad: PyTree, dim: int) -> tuple[Any, PyTree, PyTree]:
    """(Ũ/d, r, ∂Ũ): what the statistics are measured on."""
    return energy / dim, r, grad


def normalised_inputs(
    energy: Any, r: PyTree, grad: PyTree, dim: int, stats: InputStatistics
) -> tuple[Any, PyTree, PyTree]:
    """The networks' inputs (u, p, g) = standardised (Ũ/d, r, ∂Ũ) (module docstring)."""
    e, r, grad = raw_features(energy, r, grad, dim)
    u = (e - stats.energy_mean) / stats.energy_sd
    p = jax.tree.map(lambda x: (x - stats.momentum_mean) / stats.momentum_sd, r)
    g = jax.tree.map(lambda x: (x - stats.grad_mean) / stats.grad_sd, grad)
    return u, p, g

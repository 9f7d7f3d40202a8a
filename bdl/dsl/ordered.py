"""``bdl.Ordered``: an ordered vector with an iid base density (Stan's ``ordered[K] mu ~ base``).

The K order statistics x_(1) < … < x_(K) of K iid draws from a univariate density p have the
density (David & Nagaraja 2003, Eq. 2.2.3)

    p(x_1, …, x_K) = K! · Π_k p(x_k)      on x_1 < … < x_K,   0 elsewhere.

It is the prior Stan writes ``ordered[K] mu; mu ~ normal(0, 2);`` (the product of iid densities
on the ordered cone; K! normalises it), the usual prior of mixture locations once the ordering
has removed label switching. It is *not* the cut-points pattern
``TransformedDistribution(Normal(0, s).to_event(1), OrderedTransform())``, which puts the Normal
density on the unconstrained coordinates (x_1, log(x_2 − x_1), …) and so a log-normal prior on
each gap. Both are sampled through the same bijector ``biject_to(ordered_vector)``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from jax.scipy.special import gammaln
from numpyro.distributions import constraints

from bdl.utils.arguments import shown


def _ordered_support(base: dist.Distribution) -> constraints.Constraint:
    """ordered_vector for a base on ℝ, positive_ordered_vector for a base on (0, ∞)."""
    support = base.support
    if support is constraints.real:
        return constraints.ordered_vector
    lower = getattr(support, "lower_bound", None)
    upper = getattr(support, "upper_bound", None)
    positive = support is constraints.positive or (
        isinstance(support, constraints.greater_than) and upper is None and _is_zero(lower)
    )
    if positive:
        return constraints.positive_ordered_vector
    raise ValueError(
        f"bdl.Ordered(base=...) needs a base density on ℝ or on (0, ∞) (NumPyro has a bijector "
        f"onto ordered vectors of those only); got {type(base).__name__} with support {support}. "
        "Use e.g. dist.Normal, dist.StudentT, dist.HalfNormal, dist.Gamma."
    )


def _is_zero(value: Any) -> bool:
    try:
        return float(jnp.max(jnp.abs(jnp.asarray(value)))) == 0.0
    except (TypeError, ValueError):
        return False


class Ordered(dist.Distribution):
    """The order statistics of ``size`` iid draws from ``base``: log p(x) = log K! + Σ_k log
    p_base(x_k) on x_1 < … < x_K.

    Args:
        base: a univariate NumPyro distribution (event shape ``()``) on ℝ or on (0, ∞); a batched
            base (batch shape ``b``) gives a batch ``b`` of ordered vectors.
        size: K ≥ 1, the length of the vector.

    The support is ``constraints.ordered_vector`` (``positive_ordered_vector`` for a positive
    base), so NumPyro and bdl sample it through ``biject_to(support)`` with its log-Jacobian.
    Example: ``bdl.Ordered(dist.Normal(0.0, 2.0), 2)`` is Stan's ``ordered[2] mu ~ normal(0, 2)``.
    """

    arg_constraints: ClassVar[dict] = {}
    pytree_data_fields = ("base",)
    pytree_aux_fields = ("size", "_support")

    def __init__(self, base: dist.Distribution, size: int, *, validate_args: bool | None = None):
        if not isinstance(base, dist.Distribution):
            raise TypeError(
                f"bdl.Ordered(base=...) must be a NumPyro distribution such as "
                f"dist.Normal(0.0, 2.0); got {shown(base)}."
            )
        if base.event_shape != ():
            raise ValueError(
                f"bdl.Ordered(base=...) must be univariate (event shape ()); got "
                f"{type(base).__name__} with event shape {base.event_shape}."
            )
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"bdl.Ordered(size=...) must be an integer K ≥ 1; got {shown(size)}.")
        self.base = base
        self.size = size
        self._support = _ordered_support(base)
        super().__init__(base.batch_shape, (size,), validate_args=validate_args)

    @property
    def support(self) -> constraints.Constraint:  # type: ignore[override]
        return self._support

    def sample(self, key: jax.Array, sample_shape: tuple[int, ...] = ()) -> jax.Array:
        """K iid draws of the base distribution, sorted.

        Args:
            key: a JAX random key.
            sample_shape: the shape of independent draws.

        Returns:
            An array of shape ``sample_shape + batch_shape + (K,)``, increasing along its last
                axis.
        """
        draws = self.base.sample(key, (self.size, *sample_shape))  # (K, *sample, *batch)
        return jnp.sort(jnp.moveaxis(draws, 0, -1), axis=-1)

    def log_prob(self, value: jax.Array) -> jax.Array:
        """log K! + Σ_k log p_base(x_k); the entries are assumed ordered (NumPyro's
        ``validate_args`` checks the support).

        Args:
            value: ordered vectors, the last axis of size K.

        Returns:
            The log-density of each vector.
        """
        lp = self.base.log_prob(jnp.moveaxis(jnp.asarray(value), -1, 0))
        return jnp.sum(lp, axis=0) + gammaln(self.size + 1.0)

    def __repr__(self) -> str:
        base = type(self.base).__name__
        args = ", ".join(
            f"{k}={jnp.asarray(getattr(self.base, k)).tolist()}"
            for k in self.base.arg_constraints
            if hasattr(self.base, k)
        )
        return f"Ordered({base}({args}), size={self.size})"

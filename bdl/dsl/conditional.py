"""Leaf priors whose transform and density depend on other values of the model.

A :class:`ConditionalLeafPrior` cannot say its density from the leaf alone: a hierarchical
leaf's needs its group's hyper-parameters (μ, σ), a :class:`~bdl.dsl.Bounded` leaf's needs the
other parameters its bounds read. The compiled model gives it those values through the four
``*_given`` methods; the plain :meth:`~bdl.dsl.LeafPrior.distribution` and
:meth:`~bdl.dsl.LeafPrior.transform` refuse.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

import jax
import numpyro.distributions as dist

from bdl.dsl.priors import LeafInfo, LeafPrior


class ConditionalLeafPrior(LeafPrior):
    """A leaf prior p(x | v) given values v of the model other than the leaf x.

    The leaf is sampled in an unconstrained u with x = c(u; v); its log-density in u is
    log p(c(u; v) | v) + log |∂c/∂u|.
    """

    def distribution(self, info: LeafInfo) -> dist.Distribution:
        """Refused: the density depends on other values (:meth:`log_prob_given`).

        Args:
            info: the parameter's path, shape, fan-in and input axis.

        Returns:
            Nothing: it raises.

        Raises:
            TypeError: always.
        """
        raise TypeError(f"{self!r} depends on other values: its density needs them.")

    def transform(self, info: LeafInfo) -> None:
        """Refused: the transform depends on other values (:meth:`constrain_given`).

        Args:
            info: the parameter's path, shape, fan-in and input axis.

        Raises:
            TypeError: always.
        """
        raise TypeError(f"{self!r} depends on other values: its transform needs them.")

    @abc.abstractmethod
    def constrain_given(self, u: jax.Array, values: Mapping[str, Any], info: LeafInfo) -> jax.Array:
        """x = c(u; v), the leaf from its sampled coordinate.

        Args:
            u: the unconstrained coordinate.
            values: v, the values the prior depends on: a hierarchical leaf's group of
                hyper-parameters, or the other parameters' constrained values for a bound.
            info: the parameter's path, shape, fan-in and input axis.

        Returns:
            The constrained value x.
        """

    @abc.abstractmethod
    def unconstrain_given(
        self, x: jax.Array, values: Mapping[str, Any], info: LeafInfo
    ) -> jax.Array:
        """u = c⁻¹(x; v), the inverse of :meth:`constrain_given`.

        Args:
            x: the constrained value.
            values: v, as for :meth:`constrain_given`.
            info: the parameter's path, shape, fan-in and input axis.

        Returns:
            The unconstrained coordinate (not finite where x is outside the support).
        """

    @abc.abstractmethod
    def log_prob_given(self, u: jax.Array, values: Mapping[str, Any], info: LeafInfo) -> jax.Array:
        """Σ [log p(c(u; v) | v) + log |∂c/∂u|] over the leaf's entries.

        Args:
            u: the unconstrained coordinate.
            values: v, as for :meth:`constrain_given`.
            info: the parameter's path, shape, fan-in and input axis.

        Returns:
            The scalar log-density of u.
        """

    @abc.abstractmethod
    def sample_given(self, key: jax.Array, values: Mapping[str, Any], info: LeafInfo) -> jax.Array:
        """A draw of the leaf x ~ p(· | v), in the constrained space.

        Args:
            key: a JAX random key.
            values: v, as for :meth:`constrain_given`.
            info: the parameter's path, shape, fan-in and input axis.

        Returns:
            An array of shape ``info.shape``.
        """

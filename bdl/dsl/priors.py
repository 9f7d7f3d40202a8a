"""Priors over parameter pytrees.

A prior assigns each parameter leaf a distribution. Leaf priors (:class:`Normal`,
:class:`Laplace`, :class:`HeNormal`, any NumPyro distribution via :class:`Distribution`) apply
elementwise; :class:`ByPath` picks a leaf prior by matching a regular expression against the leaf's
path (``"net/Dense_0/bias"``). Leaves whose prior has a constrained support (e.g. ``σ > 0``) are
sampled unconstrained: the sampler sees u, the network sees t(u) with t = ``biject_to(support)``,
and log p(u) = log p(t(u)) + log |dt/du| (the change-of-variables Jacobian).
"""

from __future__ import annotations

import abc
import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.distributions.transforms import (
    IdentityTransform,
    IndependentTransform,
    Transform,
    biject_to,
)

from bdl.utils import arguments
from bdl.utils.arguments import shown


@dataclasses.dataclass(frozen=True)
class LeafInfo:
    """What a leaf prior may know about the parameter it scores."""

    path: str
    shape: tuple[int, ...]
    fan_in: int
    #: the axis of a 2-axis weight that indexes its inputs: 0 for Flax's (in, out), 1 for
    #: Equinox's (out, in)
    input_axis: int = 0


class Prior(abc.ABC):
    """Base class of every prior accepted by ``Model(prior=...)``."""

    @abc.abstractmethod
    def resolve(self, info: LeafInfo) -> LeafPrior:
        """The leaf prior that scores the parameter described by ``info``.

        Args:
            info: the parameter's path, shape, fan-in and input axis.

        Returns:
            The elementwise prior of that parameter.
        """


class LeafPrior(Prior):
    """An elementwise prior on one parameter array."""

    def resolve(self, info: LeafInfo) -> LeafPrior:
        """The leaf prior itself: a leaf prior scores every parameter it is given.

        Args:
            info: the parameter's path, shape, fan-in and input axis (unused).

        Returns:
            ``self``.
        """
        return self

    @abc.abstractmethod
    def distribution(self, info: LeafInfo) -> dist.Distribution:
        """The NumPyro distribution of each entry (broadcast against the leaf's shape).

        Args:
            info: the parameter's path, shape, fan-in and input axis.

        Returns:
            A NumPyro distribution whose batch shape broadcasts against ``info.shape``.
        """

    def transform(self, info: LeafInfo) -> Transform | None:
        """Bijection from ℝ to the support, or ``None`` for real-valued parameters.

        Args:
            info: the parameter's path, shape, fan-in and input axis.

        Returns:
            The NumPyro transform from the unconstrained space, or ``None``.
        """
        t = biject_to(self.distribution(info).support)
        while isinstance(t, IndependentTransform):
            t = t.base_transform
        return (
            None if isinstance(t, IdentityTransform) else biject_to(self.distribution(info).support)
        )

    def log_prob(self, value: jax.Array, info: LeafInfo) -> jax.Array:
        """Σ log p(value) over the leaf's entries, or over its events for a multivariate
        distribution (value in the constrained space).

        Args:
            value: the parameter array, in the constrained space.
            info: the parameter's path, shape, fan-in and input axis.

        Returns:
            The scalar log-density of the whole leaf.
        """
        d = self.distribution(info)
        lp = d.log_prob(value)
        batch = jnp.shape(value)[: jnp.ndim(value) - len(d.event_shape)]
        return jnp.sum(jnp.broadcast_to(lp, batch))

    def sample(self, key: jax.Array, info: LeafInfo) -> jax.Array:
        """A draw of the whole leaf (constrained space).

        Args:
            key: a JAX random key.
            info: the parameter's path, shape, fan-in and input axis.

        Returns:
            An array of shape ``info.shape``.
        """
        d = self.distribution(info)
        batch = info.shape[: len(info.shape) - len(d.event_shape)]
        return d.expand(jnp.broadcast_shapes(d.batch_shape, batch)).sample(key)


class _LocationScale(LeafPrior):
    """θ_i ~ ``_family(loc, scale)`` iid, for a NumPyro location-scale family."""

    _family: type[dist.Distribution]

    def __init__(self, scale: float = 1.0, loc: float = 0.0):
        name = self._family.__name__
        self.scale = arguments.number(scale, f"{name}(scale=...)", above=0.0)
        self.loc = arguments.number(loc, f"{name}(loc=...)")

    def distribution(self, info: LeafInfo) -> dist.Distribution:
        return self._family(self.loc, self.scale)

    def __repr__(self) -> str:
        return f"{self._family.__name__}(scale={self.scale})"


class Normal(_LocationScale):
    """θ_i ~ N(loc, scale²) iid.

    Args:
        scale: the standard deviation, > 0.
        loc: the mean.

    Raises:
        ValueError: ``scale`` is not > 0.
        TypeError: ``scale`` or ``loc`` is not a number.
    """

    _family = dist.Normal


class Laplace(_LocationScale):
    """θ_i ~ Laplace(loc, scale) iid, with density ∝ exp(−|θ − loc|/scale): an L1,
    sparsity-favouring prior. Its arguments are checked as :class:`Normal`'s are.

    Args:
        scale: the scale b > 0.
        loc: the location.
    """

    _family = dist.Laplace


class HeNormal(LeafPrior):
    """Layerwise He-scaled Gaussian: W ~ N(0, gain²/fan_in) for weights (He et al. 2015).

    Vectors (biases) have no fan-in and get N(0, bias_scale²). With the default gain √2 this is
    the prior of Wenzel et al. (2020, App. N) for ReLU networks.

    Args:
        gain: the gain; a weight's standard deviation is ``gain / sqrt(fan_in)``.
        bias_scale: the standard deviation of vectors (biases).

    Raises:
        ValueError: ``gain`` or ``bias_scale`` is not > 0.
        TypeError: ``gain`` or ``bias_scale`` is not a number.
    """

    def __init__(self, gain: float = math.sqrt(2.0), bias_scale: float = 1.0):
        self.gain = arguments.number(gain, "HeNormal(gain=..., bias_scale=...): gain", above=0.0)
        self.bias_scale = arguments.number(
            bias_scale, "HeNormal(gain=..., bias_scale=...): bias_scale", above=0.0
        )

    def distribution(self, info: LeafInfo) -> dist.Distribution:
        if len(info.shape) < 2:
            return dist.Normal(0.0, self.bias_scale)
        return dist.Normal(0.0, self.gain / math.sqrt(info.fan_in))

    def __repr__(self) -> str:
        return f"HeNormal(gain={self.gain:.3g}, bias_scale={self.bias_scale})"


class Distribution(LeafPrior):
    """Any NumPyro distribution used as a prior (e.g. ``dist.StudentT(3.0)``).

    A univariate distribution (event shape ``()``) applies to every entry of the leaf. A
    multivariate one (``dist.Dirichlet``, ``bdl.Ordered``, ``dist.LKJCholesky``, a
    ``.to_event`` form…) applies to the leaf's trailing axes, its batch shape broadcast against
    the leading ones: a leaf of shape ``(m, K)`` under ``dist.Dirichlet(jnp.ones(K))`` holds m
    points of the simplex. Distributions with a constrained support (``dist.HalfNormal``,
    ``dist.Beta``, a simplex, an ordered vector, a correlation Cholesky factor…) are sampled in
    the unconstrained space of ``biject_to(support)``, whose shape may differ from the leaf's
    (K − 1 coordinates for a simplex of K, K(K − 1)/2 for a K × K correlation factor), with the
    log-Jacobian included.

    Args:
        distribution: a NumPyro distribution.

    Raises:
        TypeError: ``distribution`` is not a NumPyro distribution.
        ValueError: ``distribution`` is discrete.
    """

    def __init__(self, distribution: dist.Distribution):
        if not isinstance(distribution, dist.Distribution):
            raise TypeError(
                f"prior must be a numpyro.distributions.Distribution; got {type(distribution)}."
            )
        if distribution.support.is_discrete:
            raise ValueError(
                f"prior {type(distribution).__name__} is discrete (support "
                f"{distribution.support}); gradient-based samplers need a continuous prior."
            )
        self.d = distribution

    def resolve(self, info: LeafInfo) -> LeafPrior:
        event = self.d.event_shape
        shape = info.shape
        if event and tuple(shape[len(shape) - len(event) :]) != tuple(event):
            raise ValueError(
                f"prior {type(self.d).__name__} has event shape {event} but parameter "
                f"{info.path!r} has shape {shape}; a multivariate prior scores the leaf's trailing "
                f"axes, so the leaf must end in {event} (or give it another prior with ByPath)."
            )
        batch = shape[: len(shape) - len(event)]
        try:
            fits = jnp.broadcast_shapes(self.d.batch_shape, batch) == batch
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(
                f"prior {type(self.d).__name__} with batch_shape {self.d.batch_shape} does not "
                f"broadcast to parameter {info.path!r} of shape {shape}; give scalar "
                "parameters, or ByPath rules per leaf."
            )
        return self

    def distribution(self, info: LeafInfo) -> dist.Distribution:
        return self.d

    def __repr__(self) -> str:
        return f"Distribution({type(self.d).__name__})"


class ByPath(Prior):
    """Different priors for parameter groups, chosen by regular expressions on leaf paths.

    ``ByPath({"bias": Normal(10.0), "kernel|weight": HeNormal()}, default=Normal(1.0))``: the first
    pattern that ``re.search``-matches the path ``"net/Dense_0/bias"`` wins; unmatched leaves get
    ``default`` (an error if there is none).

    Args:
        rules: patterns and their priors, a mapping or a sequence of ``(pattern, prior)`` pairs,
            tried in order.
        default: the prior of the leaves no pattern matches (``None``: such a leaf is an error).

    Raises:
        TypeError: ``rules`` is neither a mapping nor a list of pairs, or a prior is neither a bdl
            prior nor a NumPyro distribution.
        ValueError: a pattern that is not a valid regular expression.
    """

    def __init__(
        self,
        rules: Mapping[str, Any] | Sequence[tuple[str, Any]],
        default: Any | None = None,
    ):
        if isinstance(rules, Mapping):
            items = list(rules.items())
        elif isinstance(rules, Sequence) and not isinstance(rules, str):
            items = list(rules)
        else:
            items = None
        if items is None or not all(isinstance(i, tuple | list) and len(i) == 2 for i in items):
            raise TypeError(
                "ByPath(rules=...) must map regular expressions to priors, e.g. "
                f"{{'bias': bdl.Normal(0.1)}}, or be a list of (pattern, prior) pairs; got "
                f"{shown(rules)}."
            )
        self.rules = [(_pattern(pattern), as_prior(p)) for pattern, p in items]
        self.default = None if default is None else as_prior(default)

    def resolve(self, info: LeafInfo) -> LeafPrior:
        for pattern, prior in self.rules:
            if pattern.search(info.path):
                return prior.resolve(info)
        if self.default is None:
            raise ValueError(
                f"ByPath prior: no pattern matches parameter {info.path!r} and no default was "
                "given; add a rule for it or pass ByPath(..., default=Normal(1.0))."
            )
        return self.default.resolve(info)

    def __repr__(self) -> str:
        rules = ", ".join(f"{p.pattern!r}: {q!r}" for p, q in self.rules)
        return f"ByPath({{{rules}}}, default={self.default!r})"


def _pattern(pattern: Any) -> re.Pattern:
    if not isinstance(pattern, str):
        raise TypeError(f"ByPath: a pattern must be a string; got {shown(pattern)}.")
    try:
        return re.compile(pattern)
    except re.error as err:
        raise ValueError(f"ByPath: {pattern!r} is not a regular expression: {err}.") from None


def as_prior(prior: Any) -> Prior:
    """Accept a bdl prior or any NumPyro distribution."""
    if isinstance(prior, Prior):
        return prior
    if isinstance(prior, dist.Distribution):
        return Distribution(prior)
    raise TypeError(
        "prior must be a bdl prior (Normal, HeNormal, Laplace, ByPath, …) or a "
        f"numpyro.distributions.Distribution; got {type(prior).__name__}."
    )

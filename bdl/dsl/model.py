"""``bdl.Model``: the declaration of a Bayesian model (network, likelihood, prior, temperature).

Declaring is cheap and pure: arguments are checked for type and range, nothing is traced or
compiled before :func:`bdl.compile`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax

from bdl.augment.base import Augmentation, as_augmentation
from bdl.dsl.likelihoods import Likelihood
from bdl.dsl.network import check_normalisation, describe_network
from bdl.dsl.no_network import check_without_network
from bdl.dsl.priors import Normal, Prior, as_prior
from bdl.dsl.temperature import (
    TemperatureLike,
    check_effective_size,
    check_temperature,
    check_tempering,
)
from bdl.utils.arguments import shown

PyTree = Any


@dataclasses.dataclass(frozen=True, eq=False)
class Model:
    """A Bayesian model p(θ) Π_i p(y_i | f(x_i; θ)) tempered at T.

    Args:
        network: a Flax linen module, a Flax nnx module, an Equinox module, a plain function
            ``f(params, x)`` (then ``params`` is required), or ``None``: a model without a
            network, whose likelihood reads only its own learned parameters (a mixture's
            weights, locations and scales; any parametric model of iid observations).
        likelihood: a :class:`bdl.Likelihood` (Categorical, Bernoulli, Gaussian, Poisson,
            StudentT, or any NumPyro distribution through ``bdl.Likelihood.from_numpyro``).
        prior: a bdl prior or any NumPyro distribution (elementwise on every weight); default
            ``Normal(1.0)``.
        temperature: T ≥ 0, or a schedule ``step -> T``; the target is ∝ exp(−U/T).
        params: initial parameters of a plain-function network, or ``key -> params``; without
            a network, the starting (constrained) values of some of the likelihood's learned
            parameters, ``{name: value}`` (the rest start at their bijector's image of 0).
        batched: whether ``network`` maps a batch (default: ``False`` for Equinox modules, which
            act on single examples and are ``vmap``-ed, ``True`` otherwise).
        name: label used in reports and caches.
        augment: data augmentation, a function ``augment(key, x) -> x`` on one example
            (e.g. ``bdl.augment.random_crop(4)``), drawn afresh for every example of every
            minibatch; the minibatch energy then estimates the Jensen-posterior energy
            −Σ_i E_z[log p(y_i | a_z(x_i), θ)] − log p(θ) (Wenzel et al. 2020, App. K).
            The full-data energy and the predictive are not augmented.
        tempering: what T tempers: ``"posterior"`` (default; prior and likelihood, π ∝
            exp(−U/T)) or ``"likelihood"`` (the likelihood only, the prior stays at T = 1:
            π ∝ p(θ) Π_i p(y_i | x_i, θ)^(N/(nT)); needs a constant T). See
            [Tempering](../dsl.md#tempering-the-whole-posterior-or-the-likelihood-only).
        effective_size: N, the number of examples the likelihood counts as (e.g. the size of
            the original data set when the training set holds n augmented copies); the
            likelihood term is scaled by N/n. ``None``: N = n.

    Raises:
        ValueError: an argument out of its range (a negative temperature, an unknown
            ``tempering``), a plain-function network without ``params``, or a network with
            batch normalisation (its output for one example depends on the others).
        TypeError: an argument of the wrong kind (a likelihood that is not a
            :class:`bdl.Likelihood`, a ``batched`` or ``name`` of the wrong type).

    Examples:
        Bayesian linear regression, y ~ N(xᵀw, 0.5²) with w ~ N(0, I), declared with a plain
        function as its network (nothing is traced until :func:`bdl.compile`):

        >>> import jax.numpy as jnp
        >>> import bdl
        >>> from bdl.data import linear_regression
        >>> model = bdl.Model(
        ...     network=lambda params, x: x @ params["w"],
        ...     params={"w": jnp.zeros(2)},
        ...     likelihood=bdl.Gaussian(scale=0.5),
        ...     prior=bdl.Normal(1.0),
        ... )
        >>> model.temperature, model.tempering
        (1.0, 'posterior')
    """

    network: Any = None
    likelihood: Likelihood | None = None
    prior: Prior | Any = dataclasses.field(default_factory=lambda: Normal(1.0))
    temperature: TemperatureLike = 1.0
    params: PyTree | Callable[[jax.Array], PyTree] | None = None
    batched: bool | None = None
    name: str = "model"
    augment: Augmentation | Callable[[jax.Array, jax.Array], jax.Array] | None = None
    tempering: str = "posterior"
    effective_size: float | None = None

    def __post_init__(self) -> None:
        flavour = describe_network(self.network)
        check_normalisation(self.network)
        if flavour == "function" and self.params is None:
            raise ValueError(
                "Model(params=...) is required when network is a plain function f(params, x): "
                "pass the initial parameter pytree, or a function key -> parameters."
            )
        if not isinstance(self.likelihood, Likelihood):
            raise TypeError(
                "Model(likelihood=...) must be a bdl likelihood such as bdl.Categorical(), "
                f"bdl.Gaussian(scale=0.1); got {type(self.likelihood).__name__}."
            )
        if flavour == "none":
            check_without_network(self.likelihood, self.params)
        elif not self.likelihood.reads_output:
            raise ValueError(
                f"Model(likelihood={self.likelihood!r}) reads no network output (its first "
                "parameter is given by keyword), so the network would be ignored: leave "
                "network=None for a model without a network, or name the parameter the "
                "network feeds with Likelihood.from_numpyro(..., parameter=...)."
            )
        object.__setattr__(self, "prior", as_prior(self.prior))
        check_temperature(self.temperature)
        check_tempering(self.tempering, self.temperature)
        if self.effective_size is not None:
            object.__setattr__(self, "effective_size", check_effective_size(self.effective_size))
        if self.batched is not None and not isinstance(self.batched, bool):
            raise TypeError(
                f"Model(batched=...) must be True, False or None (the flavour's default); got "
                f"{shown(self.batched)}."
            )
        object.__setattr__(self, "augment", as_augmentation(self.augment, "Model(augment=...)"))
        if not isinstance(self.name, str):
            raise TypeError(f"Model(name=...) must be a string; got {shown(self.name)}.")

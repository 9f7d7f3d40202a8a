"""The likelihood interface, and a likelihood from any NumPyro distribution.

Every likelihood is a NumPyro distribution of ``y`` given the network output: :class:`Likelihood`
is their base class (the families of :mod:`bdl.dsl.likelihoods` derive from it), and
:class:`FromNumPyro` is ``bdl.Likelihood.from_numpyro``, which makes one of any distribution.
Both live here because the base class builds the latter.

The network output, through a link, is the distribution's first parameter (or the one named by
``parameter=``); further network output columns can feed further parameters, each through its own
link; every other parameter is fixed (a number or an array), read per example from the data set (a
field name), or learned (a NumPyro prior, sampled jointly with the weights in its unconstrained
space, log-Jacobian included).
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from numpyro.distributions.transforms import biject_to

from bdl.dsl.mixture import mixture


def _match_output(output: jax.Array, y: jax.Array) -> jax.Array:
    """Drop a trailing singleton output axis when the targets have none: (n, 1) vs (n,)."""
    if output.ndim == y.ndim + 1 and output.shape[-1] == 1:
        return output[..., 0]
    return output


def _sum_event(lp: jax.Array) -> jax.Array:
    return lp.reshape(lp.shape[0], -1).sum(-1) if lp.ndim > 1 else lp


class Likelihood(abc.ABC):
    """Base class: ``distribution(output, params)`` defines p(y | output, params).

    Subclasses set ``task`` (``"classification"`` or ``"regression"``) and implement
    :meth:`distribution` and :meth:`check`. ``param_priors`` maps the name of each learned
    likelihood parameter to its NumPyro prior; ``param_init`` gives its initial constrained value.
    """

    task: ClassVar[str]

    @property
    def param_priors(self) -> dict[str, dist.Distribution]:
        return {}

    @property
    def param_init(self) -> dict[str, float]:
        return {}

    @property
    def fields(self) -> tuple[str, ...]:
        """Names of the per-example data fields this likelihood reads (e.g. ``("sigma",)``)."""
        return ()

    @property
    def field_parameters(self) -> dict[str, str]:
        """``{parameter: field}``: the distribution parameter each data field feeds, so that the
        compiler checks the field's values against that parameter's constraint (e.g. Binomial's
        ``total_count``: integers ≥ 0); ``{}`` when no field feeds a parameter directly."""
        return {}

    @property
    def reads_output(self) -> bool:
        """Whether p(y | ·) reads a network output. ``False`` for a likelihood whose every
        parameter is fixed, a data field or learned (``Likelihood.from_numpyro`` with the first
        parameter given by keyword): it declares a model without a network."""
        return True

    @abc.abstractmethod
    def distribution(self, output: jax.Array, params: dict[str, jax.Array]) -> dist.Distribution:
        """p(y | output, params) for a batch; ``output`` already matched to ``y``'s shape.

        Args:
            output: the network's output on a batch of inputs.
            params: the likelihood's own parameters by name (constrained values, e.g. a learned
                ``"scale"``) and the batch's data fields; empty when it has none.

        Returns:
            A NumPyro distribution whose batch shape is the targets'.
        """

    @abc.abstractmethod
    def check(self, output_shape: tuple[int, ...], y: np.ndarray) -> None:
        """Raise ``ValueError`` naming the argument when outputs/targets cannot fit together.

        Args:
            output_shape: the shape of the network's output on the training inputs ``(n, ...)``.
            y: the training targets.

        Raises:
            ValueError: the targets do not fit the likelihood (wrong shape, labels out of range,
                values outside its support) or the output's shape does not match them.
        """

    def matched_distribution(
        self, output: jax.Array, y: Any, params: dict[str, jax.Array] | None = None
    ) -> dist.Distribution:
        """The distribution :meth:`log_prob` scores ``y`` with: :meth:`distribution` of the
        output matched to ``y``'s shape (an output ``(n, 1)`` for targets ``(n,)`` loses its
        last axis). The compiler reads its ``support`` to check the observed values.

        Args:
            output: the network's output on a batch.
            y: the batch's targets (only their shape is read).
            params: the likelihood's own parameters and data fields, as :meth:`distribution`.

        Returns:
            The NumPyro distribution of the targets.
        """
        return self.distribution(_match_output(output, y), params or {})

    def log_prob(
        self, output: jax.Array, y: jax.Array, params: dict[str, jax.Array] | None = None
    ) -> jax.Array:
        """Per-example log-likelihood log p(y_i | f(x_i), φ), shape ``(batch,)``.

        Args:
            output: the network's output on a batch ``(batch, ...)``.
            y: the batch's targets.
            params: the likelihood's own parameters and the batch's data fields (as
                :meth:`distribution`); ``None`` when it has none.

        Returns:
            log p(y_i | f(x_i), φ) for each example, summed over the event's axes.
        """
        return _sum_event(self.matched_distribution(output, y, params).log_prob(y))

    def mean(self, output: jax.Array, params: dict[str, jax.Array] | None = None) -> jax.Array:
        """Predictive mean E[y | f(x), φ] (class probabilities for classifiers).

        Args:
            output: the network's output on a batch.
            params: the likelihood's own parameters and data fields, as :meth:`distribution`.

        Returns:
            E[y | f(x), φ] for each example: class probabilities ``(batch, K)`` for a classifier,
                the mean ``(batch, ...)`` for a regression.
        """
        return self.distribution(output, params or {}).mean

    @classmethod
    def from_numpyro(
        cls,
        distribution: Any,
        link: Any = None,
        *,
        outputs: dict[str, Any] | None = None,
        parameter: str | None = None,
        task: str | None = None,
        **fixed: Any,
    ) -> Likelihood:
        """Any NumPyro distribution as a likelihood (the network output feeds its first
        parameter through ``link``); see :class:`bdl.dsl.numpyro_likelihood.FromNumPyro`.

        Args:
            distribution: a NumPyro distribution class or constructor, e.g.
                ``numpyro.distributions.NegativeBinomial2``.
            link: maps the network output to the parameter it feeds (identity by default),
                e.g. ``jnp.exp`` for a positive mean.
            outputs: further parameters fed by further output columns, ``{name: link}``
                (``None`` as link: identity); column 0 feeds the first parameter.
            parameter: the parameter the network feeds, when it is not the first one.
            task: ``"regression"`` or ``"classification"`` (default: classification for the
                Categorical and Bernoulli families, regression otherwise).
            **fixed: every other parameter: a number or array (fixed), a string (a data
                field), or a NumPyro distribution (a learned parameter with that prior).

        Returns:
            The likelihood, for ``bdl.Model(likelihood=...)``.

        Raises:
            TypeError: a distribution with no parameter to feed, or an argument of the
                wrong kind.
            ValueError: a parameter the distribution does not have, or one given twice.
        """
        return FromNumPyro(
            distribution, link, outputs=outputs, parameter=parameter, task=task, **fixed
        )

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


def per_example(value: jax.Array, output: jax.Array) -> jax.Array:
    """A per-example field of shape (batch,) broadcast against an output (batch, d, ...)."""
    value = jnp.asarray(value)
    return value.reshape(value.shape + (1,) * (output.ndim - value.ndim))


def check_batch(output_shape: tuple[int, ...], y: np.ndarray) -> None:
    """Raise ``ValueError`` unless the network gives one output row per target example."""
    if len(output_shape) == 0 or output_shape[0] != y.shape[0]:
        raise ValueError(
            f"network output has shape {output_shape} but the targets y have {y.shape[0]} "
            "examples: the network must map a batch of inputs to one output row per example."
        )


_CLASSIFIERS = (
    dist.CategoricalProbs,
    dist.CategoricalLogits,
    dist.BernoulliProbs,
    dist.BernoulliLogits,
)
_BERNOULLI = (dist.BernoulliProbs, dist.BernoulliLogits)


def _identity(f: jax.Array) -> jax.Array:
    return f


def _parameter_names(distribution: Any) -> tuple[list[str], bool]:
    """The distribution's parameter names in order, and whether it takes ``**kwargs``."""
    try:
        signature = inspect.signature(distribution)
    except (TypeError, ValueError):
        raise TypeError(
            f"Likelihood.from_numpyro(distribution=...) must be a NumPyro distribution class or "
            f"constructor such as numpyro.distributions.NegativeBinomial2; got {distribution!r}."
        ) from None
    names, var_kw = [], False
    for p in signature.parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            var_kw = True
        elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "validate_args":
            names.append(p.name)
    return names, var_kw


def _default_task(distribution: Any) -> str:
    if distribution in (dist.Categorical, dist.Bernoulli):
        return "classification"
    if inspect.isclass(distribution) and issubclass(distribution, _CLASSIFIERS):
        return "classification"
    return "regression"


def unconstrained_zero(prior: dist.Distribution) -> jax.Array:
    """The image of 0 (in the unconstrained space, whose shape may differ from the
    parameter's: K − 1 coordinates for a simplex of K) under ``biject_to(prior.support)``."""
    t = biject_to(prior.support)
    return t(jnp.zeros(t.inverse_shape(prior.batch_shape + prior.event_shape)))


def _describe_prior(prior: dist.Distribution) -> str:
    if isinstance(prior, dist.ExpandedDistribution):
        return f"{_describe_prior(prior.base_dist)}.expand({list(prior.batch_shape)})"
    if isinstance(prior, dist.Independent):
        return f"{_describe_prior(prior.base_dist)}.to_event({prior.reinterpreted_batch_ndims})"
    if not prior.arg_constraints and type(prior).__repr__ is not object.__repr__:
        return repr(prior)
    args = ", ".join(
        f"{k}={np.asarray(getattr(prior, k)).tolist()}"
        for k in prior.arg_constraints
        if hasattr(prior, k)
    )
    return f"{type(prior).__name__}({args})"


class FromNumPyro(Likelihood):
    """p(y | f) = D(y; θ₀ = link(f₀), θ_j = link_j(f_j), fixed, fields, learned).

    When the first parameter is given by keyword (and neither ``parameter`` nor ``link`` is),
    no network output is read: the likelihood declares a model without a network,
    ``bdl.Model(likelihood=…)``, and its parameters are repeated over the examples.

    Args:
        distribution: a NumPyro distribution class or constructor, e.g.
            ``numpyro.distributions.NegativeBinomial2``; ``dist.MixtureSameFamily`` with
            ``component=`` a NumPyro family (``dist.Normal``) is the mixture of that family, with
            parameters ``weights`` and the family's (:func:`bdl.dsl.mixture.mixture`).
        link: maps the network output to the first parameter (identity by default), e.g.
            ``jnp.exp`` for a positive mean.
        outputs: further parameters fed by further network output columns, ``{name: link}``
            (``None`` as link: identity). The network then outputs ``(n, 1 + len(outputs))``:
            column 0 feeds the first parameter, column j the j-th name.
        parameter: the parameter the network feeds, when it is not the first one (e.g.
            ``"logits"`` for ``numpyro.distributions.Categorical``).
        task: ``"regression"`` or ``"classification"``; by default classification for the
            Categorical and Bernoulli families (their predictive is the class probabilities),
            regression otherwise.
        **fixed: every other parameter: a number or array (fixed), a string (a per-example field
            of the data set, e.g. ``total_count="trials"``), or a NumPyro distribution (a learned
            parameter with that prior, e.g. ``concentration=dist.Exponential(0.1)``).
    """

    def __init__(
        self,
        distribution: Any,
        link: Callable[[jax.Array], jax.Array] | None = None,
        *,
        outputs: dict[str, Callable[[jax.Array], jax.Array] | None] | None = None,
        parameter: str | None = None,
        task: str | None = None,
        **fixed: Any,
    ):
        if distribution is dist.MixtureSameFamily:
            distribution = mixture(fixed.pop("component", None))
        names, var_kw = _parameter_names(distribution)
        where = f"Likelihood.from_numpyro({getattr(distribution, '__name__', distribution)}"
        if not names and parameter is None:
            raise TypeError(f"{where}): the distribution takes no parameter to feed.")
        # the first parameter given by keyword: no network output is read (a model without a
        # network, whose likelihood reads its learned parameters directly)
        no_output = parameter is None and names[0] in fixed and link is None
        if no_output and outputs:
            raise ValueError(
                f"{where}, outputs=...): the first parameter {names[0]!r} is given by keyword, "
                "so no network output is read; name the parameter the network feeds with "
                "parameter=..."
            )
        if parameter is None and not no_output:
            parameter = names[0]
        elif parameter is not None and parameter not in names and not var_kw:
            raise ValueError(
                f"{where}, parameter={parameter!r}): not a parameter of the distribution; its "
                f"parameters are {names}."
            )
        if link is not None and not callable(link):
            raise TypeError(f"{where}, link=...) must be a function of the output, e.g. jnp.exp.")
        outputs = dict(outputs or {})
        for name, out_link in outputs.items():
            if out_link is not None and not callable(out_link):
                raise TypeError(f"{where}, outputs={{{name!r}: ...}}) must map names to functions.")
        for name in [*outputs, *fixed]:
            if name not in names and not var_kw:
                raise ValueError(
                    f"{where}, {name}=...): not a parameter of the distribution; its parameters "
                    f"are {names}."
                )
        taken = {parameter} - {None} & ({*outputs} | {*fixed}) | ({*outputs} & {*fixed})
        if taken:
            raise ValueError(
                f"{where}): parameter(s) {sorted(taken)} are given twice (network output, "
                "outputs= and a keyword); give each once."
            )
        if task is None:
            task = _default_task(distribution)
        if task not in ("regression", "classification"):
            raise ValueError(f"{where}, task=...) must be 'regression' or 'classification'.")
        priors, given, field_names = {}, {}, {}
        for name, value in fixed.items():
            if isinstance(value, dist.Distribution):
                priors[name] = value
            elif isinstance(value, str):
                field_names[name] = value
            else:
                try:
                    given[name] = np.asarray(value, np.float32)
                except (TypeError, ValueError):
                    raise TypeError(
                        f"{where}, {name}=...) must be a number or array (fixed), a data field "
                        f"name (per example) or a NumPyro distribution (learned); got "
                        f"{type(value).__name__}."
                    ) from None
        self.distribution_fn = distribution
        self.link = link
        self.parameter = parameter
        self.outputs = outputs
        self.fixed = given
        self.field_names = field_names
        self.priors = priors
        self.task = task

    # the learned parameters, declared as for Gaussian(scale=None)
    @property
    def param_priors(self) -> dict[str, dist.Distribution]:
        return dict(self.priors)

    @property
    def param_init(self) -> dict[str, Any]:
        """Each learned parameter starts at the image of 0 under its support's bijector (1 for a
        positive parameter, 0.5 on (0, 1), an evenly spaced ordered vector, the simplex's
        centre, the identity correlation factor)."""
        return {name: unconstrained_zero(prior) for name, prior in self.priors.items()}

    @property
    def reads_output(self) -> bool:
        return self.parameter is not None

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(self.field_names.values())

    @property
    def field_parameters(self) -> dict[str, str]:
        return dict(self.field_names)

    def _main(self, output: jax.Array) -> jax.Array:
        return output[..., 0] if self.outputs else output

    def distribution(self, output: jax.Array, params: dict[str, jax.Array]) -> dist.Distribution:
        if self.parameter is None:  # no network output: fields broadcast against the examples
            main = jnp.zeros(jnp.shape(output)[:1])
            kwargs: dict[str, Any] = {}
        else:
            main = self._main(output)
            kwargs = {self.parameter: (self.link or _identity)(main)}
        for j, (name, out_link) in enumerate(self.outputs.items(), start=1):
            kwargs[name] = (out_link or _identity)(output[..., j])
        for name, value in self.fixed.items():
            kwargs[name] = jnp.asarray(value)
        for name, field in self.field_names.items():
            kwargs[name] = per_example(params[field], main)
        for name in self.priors:
            kwargs[name] = params[name]
        if self.parameter is None and not self.field_names:
            # nothing per example: repeat the parameters over the examples, so that the
            # distribution has one batch entry per example as a network's output gives it
            n = jnp.shape(output)[0]
            kwargs = {k: jnp.broadcast_to(v, (n, *jnp.shape(v))) for k, v in kwargs.items()}
        return self.distribution_fn(**kwargs)

    def matched_distribution(
        self, output: jax.Array, y: Any, params: dict[str, jax.Array] | None = None
    ) -> dist.Distribution:
        # with outputs=, the last axis holds the parameters' columns and is never dropped
        if not self.outputs and output.ndim == len(y.shape) + 1 and output.shape[-1] == 1:
            output = output[..., 0]
        return self.distribution(output, params or {})

    def mean(self, output: jax.Array, params: dict[str, jax.Array] | None = None) -> jax.Array:
        """E[y | f]; for classifiers the class probabilities ``(n, K)`` (Bernoulli: [1 − p, p])."""
        if not self.outputs and output.ndim > 1 and output.shape[-1] == 1:
            output = output[..., 0]
        # without params (the compiler reading the class count off shapes) learned parameters
        # take their starting values
        d = self.distribution(output, self.param_init if params is None else params)
        if self.task == "classification":
            if isinstance(d, _BERNOULLI):
                p = d.probs.reshape(output.shape[0])
                return jnp.stack([1.0 - p, p], axis=-1)
            return d.probs
        return d.mean

    def check(self, output_shape: tuple[int, ...], y: np.ndarray) -> None:
        check_batch(output_shape, y)
        if self.outputs and (len(output_shape) != 2 or output_shape[1] != 1 + len(self.outputs)):
            raise ValueError(
                f"Likelihood.from_numpyro(outputs={list(self.outputs)}) needs network outputs of "
                f"shape (n, {1 + len(self.outputs)}): column 0 for {self.parameter!r}, then one "
                f"column per name in outputs; got {output_shape}."
            )

    def __repr__(self) -> str:
        name = getattr(self.distribution_fn, "__name__", repr(self.distribution_fn))
        parts = [name]
        if self.parameter is not None:
            parts.append(f"link={getattr(self.link, '__name__', self.link)}")
        if self.parameter:
            parts.append(f"parameter={self.parameter!r}")
        if self.outputs:
            parts.append(
                f"outputs={ {k: getattr(v, '__name__', v) for k, v in self.outputs.items()} }"
            )
        parts += [f"{k}={v.tolist()!r}" for k, v in self.fixed.items()]
        parts += [f"{k}={v!r}" for k, v in self.field_names.items()]
        parts += [f"{k}={_describe_prior(v)}" for k, v in self.priors.items()]
        return f"Likelihood.from_numpyro({', '.join(parts)})"

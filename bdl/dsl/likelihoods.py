"""Observation models p(y | f(x; θ), φ) for the DSL.

A likelihood turns the network output ``f`` into a NumPyro distribution over ``y``. Likelihoods with
parameters of their own (a learned Gaussian noise scale) declare them with a prior; they are
sampled jointly with the network weights, unconstrained through NumPyro's transforms. A
likelihood may also read known per-example quantities from the data set (a measurement error σ_i
per target): it names them in :attr:`Likelihood.fields`, and they reach :meth:`distribution` in
``params`` under those names, minibatched with x and y.

The base class :class:`Likelihood` is defined in :mod:`bdl.dsl.numpyro_likelihood` (with
``Likelihood.from_numpyro``) and importable from here too.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from numpyro.distributions import constraints

from bdl.dsl.numpyro_likelihood import Likelihood, check_batch, per_example
from bdl.utils import arguments


def _check_scale_prior(name: str, prior: dist.Distribution) -> dist.Distribution:
    if not isinstance(prior, dist.Distribution):
        raise TypeError(
            f"{name}(scale_prior=...) must be a numpyro distribution; got {type(prior).__name__}."
        )
    if not positive_support(prior.support) or prior.shape() != ():
        raise ValueError(
            f"{name}(scale_prior=...) must be a scalar distribution on a subset of (0, ∞) (e.g. "
            f"dist.HalfNormal(1.0), dist.Uniform(0, 100), dist.TruncatedNormal(1, 1, low=0)); "
            f"got {type(prior).__name__} with support {prior.support}."
        )
    return prior


def positive_support(support: constraints.Constraint) -> bool:
    """Whether a support lies in (0, ∞), judged by its bounds rather than its identity: positive,
    an interval or half-line with a lower bound ≥ 0 (an improper or independent wrapper of one)."""
    while isinstance(support, constraints.independent):
        support = support.base_constraint
    lower = getattr(support, "lower_bound", None)
    try:
        return lower is not None and float(np.min(lower)) >= 0
    except (TypeError, ValueError):
        return False


def scale_init(prior: dist.Distribution) -> float:
    """A starting value for a learned scale inside the prior's support: 1 when it lies there,
    else the middle of a bounded support or its lower bound + 1."""
    support = prior.support
    while isinstance(support, constraints.independent):
        support = support.base_constraint
    lower = float(np.min(getattr(support, "lower_bound", 0.0)))
    upper = getattr(support, "upper_bound", None)
    upper = float("inf") if upper is None else float(np.max(upper))
    if lower < 1.0 < upper:
        return 1.0
    return 0.5 * (lower + upper) if np.isfinite(upper) else lower + 1.0


def _scale(name: str, scale: Any) -> float | str | None:
    """A fixed scale σ > 0, a data field name (per-example σ_i), or ``None`` (learned)."""
    if scale is None:
        return None
    if isinstance(scale, str):
        try:
            float(scale)
        except ValueError:
            pass
        else:
            raise TypeError(
                f"{name}(scale=...) must be a number > 0, a data field name or None; got the "
                f"string {scale!r}. Write the number without quotes."
            )
        if not scale.isidentifier():
            raise ValueError(
                f"{name}(scale={scale!r}): a per-example scale names a field of the data set, a "
                "Python identifier such as 'sigma'."
            )
        return scale
    try:
        return arguments.number(scale, f"{name}(scale=...)", above=0.0)
    except (TypeError, ValueError) as err:
        raise type(err)(
            f"{err} Give σ > 0, the name of a data field holding σ_i per example, or None to "
            "learn it."
        ) from None


def _resolve_scale(scale: float | str | None, output: jax.Array, params: dict) -> Any:
    if scale is None:
        return params["scale"]
    if isinstance(scale, str):
        return per_example(params[scale], output)
    return scale


class Categorical(Likelihood):
    """y ∈ {0, …, K−1} with p(y = k | f) = softmax(f)_k; the network outputs K logits."""

    task = "classification"

    def distribution(self, output: jax.Array, params: dict[str, jax.Array]) -> dist.Distribution:
        return dist.Categorical(logits=output)

    def mean(self, output: jax.Array, params: dict[str, jax.Array] | None = None) -> jax.Array:
        return jax.nn.softmax(output, axis=-1)

    def check(self, output_shape: tuple[int, ...], y: np.ndarray) -> None:
        check_batch(output_shape, y)
        if len(output_shape) != 2:
            raise ValueError(
                f"Categorical likelihood needs network outputs of shape (batch, num_classes); got "
                f"{output_shape}. End the network with a Dense(num_classes) layer."
            )
        if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
            raise ValueError(
                f"Categorical likelihood needs integer class labels y of shape (n,); got dtype "
                f"{y.dtype} and shape {y.shape}. Convert one-hot labels with y.argmax(-1)."
            )
        # labels outside [0, K): bdl.compile checks y_train and y_test against the support


class Bernoulli(Likelihood):
    """y ∈ {0, 1} with p(y = 1 | f) = sigmoid(f); the network outputs one logit per example."""

    task = "classification"

    def distribution(self, output: jax.Array, params: dict[str, jax.Array]) -> dist.Distribution:
        return dist.Bernoulli(logits=output)

    def mean(self, output: jax.Array, params: dict[str, jax.Array] | None = None) -> jax.Array:
        """Two-class probabilities ``[1 − p, p]`` so classifiers share one predictive shape.

        Args:
            output: the logits ``(batch,)`` or ``(batch, 1)``.
            params: unused.

        Returns:
            ``(batch, 2)`` probabilities.
        """
        p = jax.nn.sigmoid(output.reshape(output.shape[0]))
        return jnp.stack([1.0 - p, p], axis=-1)

    def check(self, output_shape: tuple[int, ...], y: np.ndarray) -> None:
        check_batch(output_shape, y)
        if not (len(output_shape) == 1 or (len(output_shape) == 2 and output_shape[1] == 1)):
            raise ValueError(
                f"Bernoulli likelihood needs one logit per example, output shape (batch,) or "
                f"(batch, 1); got {output_shape}. End the network with a Dense(1) layer."
            )
        if y.ndim != 1:
            raise ValueError(
                f"Bernoulli likelihood needs labels y in {{0, 1}} of shape (n,); got shape "
                f"{y.shape}."
            )
        # labels other than 0 and 1: bdl.compile checks y_train and y_test against the support


def _check_regression(name: str, output_shape: tuple[int, ...], y: np.ndarray) -> None:
    check_batch(output_shape, y)
    matched = (
        output_shape[:-1]
        if len(output_shape) == y.ndim + 1 and output_shape[-1] == 1
        else output_shape
    )
    if tuple(matched) != tuple(y.shape):
        raise ValueError(
            f"{name} likelihood: network output shape {output_shape} does not match the target "
            f"shape {y.shape}; the network must output one value per target entry "
            f"(e.g. a final Dense({y.shape[1] if y.ndim > 1 else 1}) layer)."
        )


class _Scaled(Likelihood):
    """A regression likelihood with a scale σ: fixed, known per example (a data field) or
    learned with its own prior."""

    task = "regression"

    def _set_scale(self, name: str, scale: Any, scale_prior: dist.Distribution | None) -> None:
        self.scale = _scale(name, scale)
        self.scale_prior = _check_scale_prior(
            type(self).__name__, scale_prior if scale_prior is not None else dist.HalfNormal(1.0)
        )

    @property
    def param_priors(self) -> dict[str, dist.Distribution]:
        return {} if self.scale is not None else {"scale": self.scale_prior}

    @property
    def fields(self) -> tuple[str, ...]:
        return (self.scale,) if isinstance(self.scale, str) else ()

    @property
    def field_parameters(self) -> dict[str, str]:
        return {"scale": self.scale} if isinstance(self.scale, str) else {}

    @property
    def param_init(self) -> dict[str, float]:
        return {} if self.scale is not None else {"scale": scale_init(self.scale_prior)}


class Gaussian(_Scaled):
    """y ~ N(f, σ²). σ is fixed (``scale=0.1``), known per example (``scale="sigma"``: y_i ~
    N(f(x_i), σ_i²) with σ_i read from the data field ``sigma``), or learned with its own prior
    (``scale=None``).

    A learned σ is sampled as log σ through NumPyro's positive transform, its log-Jacobian added
    to the prior.

    Args:
        scale: σ > 0, a float; the name of a data field holding σ_i per example; or ``None`` to
            learn σ.
        scale_prior: the prior of a learned σ, a NumPyro distribution on (0, ∞) (default
            ``HalfNormal(1)``); only with ``scale=None``.

    Raises:
        ValueError: a scale that is not > 0, or a data field name that is not an identifier.
        TypeError: a scale that is neither a number, a field name nor ``None``.
    """

    def __init__(self, scale: float | None = 1.0, scale_prior: dist.Distribution | None = None):
        self._set_scale("Gaussian", scale, scale_prior)

    def distribution(self, output: jax.Array, params: dict[str, jax.Array]) -> dist.Distribution:
        return dist.Normal(output, _resolve_scale(self.scale, output, params))

    def mean(self, output: jax.Array, params: dict[str, jax.Array] | None = None) -> jax.Array:
        """E[y | f] = f, whatever σ (so predictions need no per-example scale).

        Args:
            output: the network's output.
            params: unused.

        Returns:
            ``output``.
        """
        return output

    def check(self, output_shape: tuple[int, ...], y: np.ndarray) -> None:
        _check_regression("Gaussian", output_shape, y)


class StudentT(_Scaled):
    """y ~ StudentT(ν, f, σ), a heavy-tailed regression likelihood; σ fixed, known per example
    (a data field name, as for :class:`Gaussian`) or learned.

    Args:
        df: ν > 0, the degrees of freedom.
        scale: σ > 0, a float; the name of a data field holding σ_i per example; or ``None`` to
            learn σ.
        scale_prior: the prior of a learned σ, a NumPyro distribution on (0, ∞); only with
            ``scale=None``.

    Raises:
        ValueError: ``df`` or ``scale`` not > 0.
        TypeError: a scale that is neither a number, a field name nor ``None``.
    """

    def __init__(
        self,
        df: float = 4.0,
        scale: float | None = 1.0,
        scale_prior: dist.Distribution | None = None,
    ):
        self.df = arguments.number(df, "StudentT(df=...)", above=0.0)
        self._set_scale("StudentT", scale, scale_prior)

    def distribution(self, output: jax.Array, params: dict[str, jax.Array]) -> dist.Distribution:
        return dist.StudentT(self.df, output, _resolve_scale(self.scale, output, params))

    def mean(self, output: jax.Array, params: dict[str, jax.Array] | None = None) -> jax.Array:
        """E[y | f] = f for ν > 1 (undefined, NaN, for ν ≤ 1), whatever σ.

        Args:
            output: the network's output.
            params: unused.

        Returns:
            ``output`` (NaN where ν ≤ 1).
        """
        return output if self.df > 1 else jnp.full_like(output, jnp.nan)

    def check(self, output_shape: tuple[int, ...], y: np.ndarray) -> None:
        _check_regression("StudentT", output_shape, y)


class Poisson(Likelihood):
    """Counts y ~ Poisson(exp(f)); the network outputs the log-rate."""

    task = "regression"

    def distribution(self, output: jax.Array, params: dict[str, jax.Array]) -> dist.Distribution:
        return dist.Poisson(jnp.exp(output))

    def check(self, output_shape: tuple[int, ...], y: np.ndarray) -> None:
        _check_regression("Poisson", output_shape, y)
        # counts that are negative or fractional: bdl.compile checks them against the support

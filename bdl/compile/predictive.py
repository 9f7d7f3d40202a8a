"""The posterior predictive distribution of a compiled model from posterior draws θ_1..θ_K.

The Bayesian model average (BMA) is the mixture p(y | x, D) ≈ (1/K) Σ_k p(y | x, θ_k).

Regression (law of total variance):

    E[y | x, D]   = (1/K) Σ_k μ_k(x),                      μ_k = E[y | x, θ_k]
    aleatoric(x)  = (1/K) Σ_k σ_k²(x),                     σ_k² = Var[y | x, θ_k]
    epistemic(x)  = (1/K) Σ_k (μ_k(x) − E[y | x, D])²
    Var[y | x, D] = aleatoric(x) + epistemic(x),

and the α-quantile q solves F(q) = (1/K) Σ_k F_k(q) = α (bisection on the mixture CDF;
for counts, the smallest integer with F(q) ≥ α).

Classification (Depeweg et al. 2018; Smith & Gal 2018), with p̄ = (1/K) Σ_k p(· | x, θ_k) and
H[p] = −Σ_c p_c log p_c:

    total(x)     = H[p̄]                                  predictive entropy
    aleatoric(x) = (1/K) Σ_k H[p(· | x, θ_k)]           expected entropy
    epistemic(x) = H[p̄] − (1/K) Σ_k H[p(· | x, θ_k)]    mutual information I(y; θ | x, D) ≥ 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import xlogy

from bdl.compile.data_fields import check_fields_given
from bdl.compile.prediction_inputs import flatten_draws
from bdl.utils.owner_jit import owner_jit

PyTree = Any
#: a :class:`bdl.compile.compiled_model.CompiledModel`, whose ``predictive`` method calls this
#: module (so this module does not import it)
Compiled = Any

#: bisection steps of the mixture quantile: the bracket shrinks by 2⁻⁶⁰, below float32's ulp
BISECTION_STEPS = 60
#: doublings allowed to widen the initial bracket [min_k μ_k − 1, max_k μ_k + 1]
BRACKET_DOUBLINGS = 60


class RegressionPredictive(NamedTuple):
    """BMA predictive of a regression model at m inputs (shapes ``(m, ...)`` like the targets).

    Attributes:
        mean: E[y | x, D].
        sd: sqrt(Var[y | x, D]) = sqrt(aleatoric + epistemic).
        aleatoric: E_θ Var[y | x, θ], the noise the model expects (a variance).
        epistemic: Var_θ E[y | x, θ], the spread of the draws' means (a variance).
        quantiles: ``(len(levels), m, ...)``: the mixture's α-quantiles.
        levels: the quantile levels α.
    """

    mean: jax.Array
    sd: jax.Array
    aleatoric: jax.Array
    epistemic: jax.Array
    quantiles: jax.Array
    levels: tuple[float, ...]


class ClassificationPredictive(NamedTuple):
    """BMA predictive of a classifier at m inputs.

    Attributes:
        probs: ``(m, K)`` averaged class probabilities p̄.
        entropy: ``(m,)`` predictive entropy H[p̄] (total uncertainty, nats).
        expected_entropy: ``(m,)`` E_θ H[p(· | x, θ)] (aleatoric part).
        mutual_information: ``(m,)`` H[p̄] − E_θ H[p(· | x, θ)] (epistemic part).
    """

    probs: jax.Array
    entropy: jax.Array
    expected_entropy: jax.Array
    mutual_information: jax.Array


def _distribution(compiled: Compiled, position: PyTree, x: jax.Array, fields: dict) -> Any:
    net, lik = compiled.constrain(position)
    out = compiled.adapter.apply(net, x)
    if out.ndim == compiled.y_train.ndim + 1 and out.shape[-1] == 1:
        out = out[..., 0]  # (m, 1) outputs for (m,) targets, as log_prob does
    return compiled.likelihood.distribution(out, {**lik, **fields})


def predictive(
    compiled: Compiled,
    positions: Any,
    x: Any,
    *,
    fields: dict[str, Any] | None = None,
    quantiles: Sequence[float] = (0.025, 0.5, 0.975),
) -> RegressionPredictive | ClassificationPredictive:
    """The BMA predictive at inputs ``x`` from draws ``positions`` (module docstring).

    Args:
        compiled: a compiled model.
        positions: draws with leading axes ``(draws, …)`` or ``(chains, draws, …)``, or a
            :class:`bdl.Samples` (its valid draws).
        x: inputs ``(m, …)``.
        fields: the inputs' per-example data fields, when the likelihood reads any.
        quantiles: levels α ∈ (0, 1) of the regression quantiles (``()``: none).

    The draws are mapped one at a time (memory grows with K·m, not with the network's
    activations), the statistics are vectorised over inputs and draws.
    """
    flat = flatten_draws(compiled, positions, "positions", x)
    given = check_fields(compiled, fields, x)
    levels = tuple(float(q) for q in quantiles)
    if compiled.likelihood.task != "classification" and not all(0.0 < q < 1.0 for q in levels):
        raise ValueError(f"quantiles must lie in (0, 1); got {list(quantiles)}.")
    x = jnp.asarray(x, compiled.x_train.dtype)
    given = {k: jnp.asarray(v, jnp.float32) for k, v in given.items()}
    if compiled.likelihood.task == "classification":
        return _classification_jit(compiled, flat, x, given)
    return _regression_jit(compiled, flat, x, given, levels)


def check_fields(compiled: Compiled, fields: dict[str, Any] | None, x: Any) -> dict[str, Any]:
    """The per-example data fields the likelihood reads, one entry per row of ``x``."""
    given = check_fields_given(compiled.likelihood, fields)
    for name, value in given.items():
        if np.shape(value)[:1] != np.shape(x)[:1]:
            raise ValueError(
                f"fields[{name!r}] has shape {np.shape(value)}; it needs one entry per input "
                f"({np.shape(x)[0]})."
            )
    return given


def _entropy(p: jax.Array) -> jax.Array:
    return -jnp.sum(xlogy(p, p), axis=-1)


def _classification(
    compiled: Compiled, flat: PyTree, x: jax.Array, fields: dict
) -> ClassificationPredictive:
    probs = jax.lax.map(lambda p: _one_probs(compiled, p, x, fields), flat)  # (K, m, C)
    mean = jnp.mean(probs, axis=0)
    total = _entropy(mean)
    expected = jnp.mean(_entropy(probs), axis=0)
    return ClassificationPredictive(mean, total, expected, total - expected)


def _one_probs(compiled: Compiled, position: PyTree, x: jax.Array, fields: dict) -> jax.Array:
    net, lik = compiled.constrain(position)
    return compiled.likelihood.mean(compiled.adapter.apply(net, x), {**lik, **fields})


def _regression(
    compiled: Compiled,
    flat: PyTree,
    x: jax.Array,
    fields: dict,
    levels: tuple[float, ...],
) -> RegressionPredictive:
    def moments(position: PyTree) -> tuple[jax.Array, jax.Array]:
        d = _distribution(compiled, position, x, fields)
        return jnp.broadcast_to(d.mean, d.batch_shape), jnp.broadcast_to(d.variance, d.batch_shape)

    means, variances = jax.lax.map(moments, flat)  # (K, m, ...)
    mean = jnp.mean(means, axis=0)
    aleatoric = jnp.mean(variances, axis=0)
    epistemic = jnp.mean(jnp.square(means - mean), axis=0)
    sd = jnp.sqrt(aleatoric + epistemic)
    if levels:
        q = _mixture_quantiles(compiled, flat, x, fields, means, jnp.asarray(levels, mean.dtype))
    else:
        q = jnp.zeros((0, *mean.shape), mean.dtype)
    return RegressionPredictive(mean, sd, aleatoric, epistemic, q, levels)


_classification_jit = owner_jit(_classification)
_regression_jit = owner_jit(_regression)


def _mixture_quantiles(
    compiled: Compiled,
    flat: PyTree,
    x: jax.Array,
    fields: dict,
    means: jax.Array,
    levels: jax.Array,
) -> jax.Array:
    """Per input and level, the root of (1/K) Σ_k F_k(q) = α by bracketing and bisection."""
    probe = _distribution(compiled, jax.tree.map(lambda a: a[0], flat), x, fields)
    discrete = bool(getattr(probe, "is_discrete", False))
    lower, upper = _support_bounds(probe)
    try:
        jax.eval_shape(probe.cdf, jnp.zeros(probe.batch_shape))
    except NotImplementedError:
        raise ValueError(
            f"quantiles need the likelihood's CDF, and {type(probe).__name__} has none in "
            "NumPyro: pass quantiles=() (mean, sd and the variance split need no CDF)."
        ) from None

    def mixture_cdf(y: jax.Array) -> jax.Array:  # y: (Q, m, ...) -> (Q, m, ...)
        inside = jnp.clip(jnp.floor(y) if discrete else y, lower, upper)

        def add(total: jax.Array, position: PyTree) -> tuple[jax.Array, None]:
            return total + _distribution(compiled, position, x, fields).cdf(inside), None

        total, _ = jax.lax.scan(add, jnp.zeros_like(y), flat)
        # outside the support the CDF is 0 or 1 (NumPyro's may be NaN there)
        return jnp.where(y < lower, 0.0, jnp.where(y >= upper, 1.0, total / means.shape[0]))

    shape = (levels.shape[0], *means.shape[1:])
    alpha = jnp.broadcast_to(levels.reshape((-1,) + (1,) * (means.ndim - 1)), shape)
    centre = jnp.broadcast_to(jnp.mean(means, axis=0), shape)
    lo = jnp.broadcast_to(jnp.min(means, axis=0) - 1.0, shape)
    hi = jnp.broadcast_to(jnp.max(means, axis=0) + 1.0, shape)

    def widen(_: int, bracket: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        lo, hi = bracket
        lo = jnp.where(mixture_cdf(lo) >= alpha, centre - 2.0 * (centre - lo), lo)
        hi = jnp.where(mixture_cdf(hi) < alpha, centre + 2.0 * (hi - centre), hi)
        return jnp.maximum(lo, lower - 1.0), jnp.minimum(hi, upper + 1.0)

    lo, hi = jax.lax.fori_loop(0, BRACKET_DOUBLINGS, widen, (lo, hi))

    def bisect(_: int, bracket: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        below = mixture_cdf(mid) < alpha
        return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

    lo, hi = jax.lax.fori_loop(0, BISECTION_STEPS, bisect, (lo, hi))
    if discrete:
        return jnp.floor(hi)
    return jnp.clip(0.5 * (lo + hi), lower, upper)


def _support_bounds(d: Any) -> tuple[float, float]:
    support = d.support
    while hasattr(support, "base_constraint"):
        support = support.base_constraint
    lower = getattr(support, "lower_bound", -jnp.inf)
    upper = getattr(support, "upper_bound", jnp.inf)
    return jnp.asarray(lower, jnp.float32), jnp.asarray(upper, jnp.float32)

"""Classification metrics of a predictive distribution: accuracy, NLL, ECE and Brier score.

Every function takes predictive class probabilities ``probs`` shaped ``(..., K)`` (typically
``(n, K)``: the BMA predictive p(y | x_i, D) ≈ (1/S) Σ_s p(y | x_i, θ_s), one row per input) and
integer ``labels`` shaped ``(...)``, and averages over all inputs (every leading axis). All are
pure ``jax.numpy`` and jittable (``num_bins`` and ``eps`` are static).

The labels are checked first, on the host, by the rules ``bdl.compile`` applies to ``y_train``
(:mod:`bdl.utils.labels`): one label per row of ``probs``, finite, integral (``1.0`` is read as
1, ``1.5`` refused) and within 0, …, K−1. A bad label is a ``ValueError`` (a non-numeric one a
``TypeError``) naming ``labels``, raised before anything is compiled: JAX would otherwise read
−1 as the last class and score the NLL of a label ≥ K as NaN beside a finite accuracy. Under
``jax.jit`` the values cannot be read, so traced labels must have an integer dtype.

* :func:`accuracy` — (1/n) Σ_i 1[argmax_k p_ik = y_i].
* :func:`nll` — (1/n) Σ_i −log max(p_{i,y_i}, eps), eps = 1e-12 (the clip keeps a zero
  probability finite: at most −log(1e-12) ≈ 27.63 nats per input).
* :func:`expected_calibration_error` — 15 equal-width confidence bins (Guo et al. 2017).
* :func:`brier_score` — (1/n) Σ_i Σ_k (p_ik − 1[y_i = k])², summed over classes, **not** divided
  by K (range [0, 2]; Brier 1950's original multi-category score).
* :func:`calibration_bins` — per-bin counts, accuracies and confidences (reliability diagram).

References:
    Guo, Pleiss, Sun & Weinberger (2017), "On Calibration of Modern Neural Networks", ICML, §2.
    Brier (1950), "Verification of forecasts expressed in terms of probability", Monthly
    Weather Review 78(1).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bdl.metrics._utils import PROB_EPS, as_float, checked_labels, safe_log

__all__ = [
    "accuracy",
    "brier_score",
    "calibration_bins",
    "expected_calibration_error",
    "nll",
]

#: Number of equal-width confidence bins of :func:`expected_calibration_error` (Guo et al. 2017).
ECE_BINS: int = 15


def accuracy(probs: jax.typing.ArrayLike, labels: jax.typing.ArrayLike) -> jax.Array:
    """Top-1 accuracy (1/n) Σ_i 1[argmax_k p_ik = y_i].

    Ties in the arg max go to the lowest class index (``jnp.argmax``).

    Args:
        probs: predictive probabilities ``(..., K)``.
        labels: integer labels ``(...)``, checked (module docstring).

    Returns:
        Scalar accuracy in [0, 1].
    """
    return _accuracy(probs, checked_labels(probs, labels, "accuracy"))


@jax.jit
def _accuracy(probs: jax.typing.ArrayLike, labels: jax.Array) -> jax.Array:
    probs = as_float(probs)
    return jnp.mean((jnp.argmax(probs, axis=-1) == labels).astype(probs.dtype))


def nll(
    probs: jax.typing.ArrayLike, labels: jax.typing.ArrayLike, eps: float = PROB_EPS
) -> jax.Array:
    """Mean negative log-likelihood (1/n) Σ_i −log max(p_{i,y_i}, eps).

    The probability of the true class is clipped below at ``eps`` (default 1e-12) so that a zero
    probability costs −log(eps) ≈ 27.63 nats instead of ∞. To score log-probabilities computed
    stably elsewhere (e.g. a log-sum-exp over samples), average them directly instead.

    Args:
        probs: predictive probabilities ``(..., K)``.
        labels: integer labels ``(...)``, checked (module docstring).
        eps: lower clip of p_{i,y_i}.

    Returns:
        Scalar mean NLL in nats.
    """
    return _nll(probs, checked_labels(probs, labels, "nll"), eps)


@partial(jax.jit, static_argnames=("eps",))
def _nll(probs: jax.typing.ArrayLike, labels: jax.Array, eps: float) -> jax.Array:
    probs = as_float(probs)
    p_true = jnp.take_along_axis(probs, labels[..., None], axis=-1)[..., 0]
    return -jnp.mean(safe_log(p_true, eps))


def calibration_bins(
    probs: jax.typing.ArrayLike, labels: jax.typing.ArrayLike, num_bins: int = ECE_BINS
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Equal-width confidence binning of Guo et al. (2017), §2 (a reliability diagram).

    Confidence c_i = max_k p_ik, prediction ŷ_i = argmax_k p_ik. Bin b = 1..B is the half-open
    interval I_b = ((b−1)/B, b/B] (a confidence exactly on an edge goes to the lower bin, as in
    the reference implementation; edges are ``jnp.linspace(0, 1, B + 1)``).

    Args:
        probs: predictive probabilities ``(..., K)``.
        labels: integer labels ``(...)``, checked (module docstring).
        num_bins: B.

    Returns:
        ``(counts, accuracies, confidences)``, each ``(B,)``: |I_b| (as float), acc(I_b) =
            mean of 1[ŷ_i = y_i] over the bin and conf(I_b) = mean c_i over the bin (0 for empty
            bins).
    """
    _check_bins(num_bins)
    return _calibration_bins(probs, checked_labels(probs, labels, "calibration_bins"), num_bins)


def _check_bins(num_bins: int) -> None:
    if not isinstance(num_bins, int | np.integer) or isinstance(num_bins, bool) or num_bins < 1:
        raise ValueError(f"num_bins must be a positive integer, got {num_bins!r}.")


@partial(jax.jit, static_argnames=("num_bins",))
def _calibration_bins(
    probs: jax.typing.ArrayLike, labels: jax.Array, num_bins: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    probs = as_float(probs)
    probs, labels = probs.reshape(-1, probs.shape[-1]), labels.reshape(-1)
    confidence = jnp.max(probs, axis=-1)
    correct = (jnp.argmax(probs, axis=-1) == labels).astype(probs.dtype)
    inner_edges = jnp.linspace(0.0, 1.0, num_bins + 1, dtype=probs.dtype)[1:-1]
    # side="left": edges[b-1] < c <= edges[b]  ->  bin b (right-closed bins).
    bins = jnp.searchsorted(inner_edges, confidence, side="left")
    counts = jax.ops.segment_sum(jnp.ones_like(confidence), bins, num_segments=num_bins)
    sum_correct = jax.ops.segment_sum(correct, bins, num_segments=num_bins)
    sum_conf = jax.ops.segment_sum(confidence, bins, num_segments=num_bins)
    denom = jnp.maximum(counts, 1.0)
    return counts, sum_correct / denom, sum_conf / denom


def expected_calibration_error(
    probs: jax.typing.ArrayLike, labels: jax.typing.ArrayLike, num_bins: int = ECE_BINS
) -> jax.Array:
    """Expected calibration error with B equal-width confidence bins (Guo et al. 2017, Eq. 3).

        ECE = Σ_b (|I_b| / n) · |acc(I_b) − conf(I_b)|

    with the bins, confidences and accuracies of :func:`calibration_bins` (weights = fraction
    of inputs in the bin; empty bins contribute 0). Default B = 15, as in Guo et al.

    Args:
        probs: predictive probabilities ``(..., K)``.
        labels: integer labels ``(...)``, checked (module docstring).
        num_bins: B.

    Returns:
        Scalar ECE in [0, 1].
    """
    _check_bins(num_bins)
    labels = checked_labels(probs, labels, "expected_calibration_error")
    return _expected_calibration_error(probs, labels, num_bins)


@partial(jax.jit, static_argnames=("num_bins",))
def _expected_calibration_error(
    probs: jax.typing.ArrayLike, labels: jax.Array, num_bins: int
) -> jax.Array:
    counts, acc, conf = _calibration_bins(probs, labels, num_bins)
    return jnp.sum(counts / jnp.sum(counts) * jnp.abs(acc - conf))


def brier_score(probs: jax.typing.ArrayLike, labels: jax.typing.ArrayLike) -> jax.Array:
    """Multi-class Brier score (1/n) Σ_i Σ_k (p_ik − 1[y_i = k])² (Brier 1950).

    Summed over the K classes and **not** divided by K, so it lies in [0, 2]: 0 for a confident
    correct prediction, 2 for a confident wrong one. (Some libraries divide by K; multiply
    their value by K to compare.)

    Args:
        probs: predictive probabilities ``(..., K)``.
        labels: integer labels ``(...)``, checked (module docstring).

    Returns:
        Scalar Brier score.
    """
    return _brier_score(probs, checked_labels(probs, labels, "brier_score"))


@jax.jit
def _brier_score(probs: jax.typing.ArrayLike, labels: jax.Array) -> jax.Array:
    probs = as_float(probs)
    onehot = jax.nn.one_hot(labels, probs.shape[-1], dtype=probs.dtype)
    return jnp.mean(jnp.sum((probs - onehot) ** 2, axis=-1))

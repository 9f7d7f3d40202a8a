"""Out-of-distribution detection: exact AUROC from predictive probabilities.

A detector scores every input; the AUROC is the probability that a random OOD input is scored
as *more* OOD than a random in-distribution (ID) input, ties counting ½:

    AUROC = 1/(m·n) Σ_{i ∈ OOD} Σ_{j ∈ ID} [1(s_i > s_j) + ½·1(s_i = s_j)] = U / (m·n),

the Mann–Whitney U statistic of the OOD scores against the ID scores, normalised (Bamber 1975;
Hanley & McNeil 1982). It equals the area under the empirical ROC curve with linear
interpolation across tied scores, i.e. ``sklearn.metrics.roc_auc_score``. 0.5 is chance, 1 is
perfect separation.

Two scores of the predictive p(y | x) (Hendrycks & Gimpel 2017):

* ``"max_prob"`` — maximum softmax probability c(x) = max_k p_k(x); higher means ID, so the
  OOD score is −c(x) and AUROC = P(c(x_ID) > c(x_OOD)) + ½ P(=).
* ``"entropy"`` — predictive entropy H(x) = −Σ_k p_k log p_k; higher means OOD, so
  AUROC = P(H(x_OOD) > H(x_ID)) + ½ P(=).

References:
    Mann & Whitney (1947), Ann. Math. Statist. 18(1); Bamber (1975), J. Math. Psychol. 12(4);
    Hanley & McNeil (1982), Radiology 143(1).
    Hendrycks & Gimpel (2017), "A Baseline for Detecting Misclassified and Out-of-Distribution
    Examples in Neural Networks", ICLR.
"""

from __future__ import annotations

from functools import partial
from typing import Literal

import jax
import jax.numpy as jnp

from bdl.metrics._utils import as_float, check_probs
from bdl.metrics.divergence import entropy

__all__ = ["OODScore", "auroc", "max_probability", "ood_auroc", "predictive_entropy"]

OODScore = Literal["max_prob", "entropy"]


@jax.jit
def auroc(
    positive_scores: jax.typing.ArrayLike, negative_scores: jax.typing.ArrayLike
) -> jax.Array:
    """Exact AUROC = P(s⁺ > s⁻) + ½ P(s⁺ = s⁻) via ranks (Mann–Whitney U, ties counted ½).

    Each positive score is ranked among the sorted negatives: with L_i = #{j: s⁻_j < s⁺_i}
    and E_i = #{j: s⁻_j ≤ s⁺_i} (two ``searchsorted`` calls), positive i beats L_i negatives
    and ties with E_i − L_i, so

        U = Σ_i (L_i + E_i) / 2,      AUROC = U / (m·n).

    This is the rank-sum form U = R⁺ − m(m+1)/2 (R⁺ the sum of the positives' mid-ranks in the
    pooled sample) with the positive–positive comparisons removed; O((m + n) log n), exact for
    any ties. Each term is normalised by n before averaging over i so that no integer sum
    can overflow for large m·n. NaN scores give undefined results.

    Args:
        positive_scores: scores of the positive class, any shape (flattened), m ≥ 1 entries.
        negative_scores: scores of the negative class, any shape (flattened), n ≥ 1 entries.

    Returns:
        Scalar AUROC in [0, 1].
    """
    pos = as_float(positive_scores).reshape(-1)
    neg = as_float(negative_scores).reshape(-1)
    if pos.size == 0 or neg.size == 0:
        raise ValueError("auroc needs at least one positive and one negative score.")
    dtype = jnp.promote_types(pos.dtype, neg.dtype)
    pos, neg = pos.astype(dtype), neg.astype(dtype)
    neg_sorted = jnp.sort(neg)
    below = jnp.searchsorted(neg_sorted, pos, side="left")
    below_or_tied = jnp.searchsorted(neg_sorted, pos, side="right")
    wins = (below.astype(dtype) + below_or_tied.astype(dtype)) / (2.0 * neg.size)
    return jnp.mean(wins)


@jax.jit
def max_probability(probs: jax.typing.ArrayLike) -> jax.Array:
    """Confidence c(x) = max_k p_k(x) per input: ``(..., K) -> (...)`` (higher = more ID)."""
    probs = as_float(probs)
    check_probs(probs)
    return jnp.max(probs, axis=-1)


@jax.jit
def predictive_entropy(probs: jax.typing.ArrayLike) -> jax.Array:
    """Predictive entropy H(x) = −Σ_k p_k log p_k per input, nats (higher = more OOD).

    :func:`bdl.metrics.entropy` with 0·log 0 = 0; ``(..., K) -> (...)``.
    """
    return entropy(probs)


@partial(jax.jit, static_argnames=("score",))
def ood_auroc(
    probs_in: jax.typing.ArrayLike,
    probs_out: jax.typing.ArrayLike,
    score: OODScore = "max_prob",
) -> jax.Array:
    """AUROC for separating OOD from ID inputs by a score of the predictive (module docstring).

    Args:
        probs_in: predictive probabilities on in-distribution inputs ``(m, K)``.
        probs_out: predictive probabilities on out-of-distribution inputs ``(n, K)`` (same K).
        score: ``"max_prob"`` (max probability, higher = ID) or ``"entropy"`` (predictive
            entropy, higher = OOD).

    Returns:
        Scalar AUROC in [0, 1]: the probability that the score ranks a random OOD input as more
            OOD than a random ID input (ties ½). Both scores give the same orientation, so 1 is
            always perfect detection.
    """
    probs_in, probs_out = as_float(probs_in), as_float(probs_out)
    check_probs(probs_in, "probs_in")
    check_probs(probs_out, "probs_out")
    if probs_in.shape[-1] != probs_out.shape[-1]:
        raise ValueError(
            f"probs_in and probs_out have different numbers of classes: "
            f"{probs_in.shape[-1]} and {probs_out.shape[-1]}."
        )
    if score == "max_prob":
        return auroc(max_probability(probs_in), max_probability(probs_out))
    if score == "entropy":
        return auroc(predictive_entropy(probs_out), predictive_entropy(probs_in))
    raise ValueError(f"score must be 'max_prob' or 'entropy', got {score!r}.")

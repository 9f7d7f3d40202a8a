"""Evaluation metrics for predictive distributions and samples, in pure ``jax.numpy``.

* :mod:`~bdl.metrics.classification` — accuracy, NLL, ECE (15 bins), Brier score.
* :mod:`~bdl.metrics.regression` — RMSE.
* :mod:`~bdl.metrics.divergence` — per-input KL divergence and entropy.
* :mod:`~bdl.metrics.agreement` — top-1 agreement, total variation and symmetrised KL against
  a reference predictive (Izmailov et al. 2021; Wenzel et al. 2020, App. O).
* :mod:`~bdl.metrics.diversity` — mean pairwise KL between per-sample predictives.
* :mod:`~bdl.metrics.ood` — exact (Mann–Whitney) AUROC; OOD AUROC by max-probability or entropy.
* :mod:`~bdl.metrics.energy` — energy distance between two samples (Székely & Rizzo).

Every metric is jittable; probabilities are ``(..., K)`` with the class axis last.
"""

from bdl.metrics.agreement import symmetrised_kl, top1_agreement, total_variation
from bdl.metrics.classification import (
    ECE_BINS,
    accuracy,
    brier_score,
    calibration_bins,
    expected_calibration_error,
    nll,
)
from bdl.metrics.divergence import entropy, kl_divergence
from bdl.metrics.diversity import mean_pairwise_kl
from bdl.metrics.energy import energy_distance
from bdl.metrics.ood import OODScore, auroc, max_probability, ood_auroc, predictive_entropy
from bdl.metrics.regression import rmse

__all__ = [
    "ECE_BINS",
    "OODScore",
    "accuracy",
    "auroc",
    "brier_score",
    "calibration_bins",
    "energy_distance",
    "entropy",
    "expected_calibration_error",
    "kl_divergence",
    "max_probability",
    "mean_pairwise_kl",
    "nll",
    "ood_auroc",
    "predictive_entropy",
    "rmse",
    "symmetrised_kl",
    "top1_agreement",
    "total_variation",
]

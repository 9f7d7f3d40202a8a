"""Summaries of draws whose R̂ and ESS mean something, as printable lines: what ``bdl sample``
prints (:mod:`bdl.cli.summary`) and :meth:`bdl.validation.reference_draws.ReferenceSamples.summary`.

* Identifiable models (parameter space, :func:`parameter_space_lines`): each parameter by name
  (:func:`bdl.utils.trees.parameter_names`, with the model file's feature labels), its mean, sd,
  bulk ESS and rank-normalised R̂, for the first :data:`SHOWN` parameters, and the worst ESS and
  R̂ over all of them.
* Networks (function space, :func:`function_space_lines`): R̂ of the weights is meaningless —
  permuting hidden units maps a posterior mode onto another, so chains in different modes
  disagree in every weight while agreeing on every prediction. The summary is instead that of
  ``bdl validate`` in function space (:func:`bdl.validation.reference.function_summaries`): the
  predictive mean and the log-likelihood on held-out inputs, with their ESS and R̂ across chains.

Both use bdl's diagnostics (ArviZ's bulk ESS, Vehtari et al.'s rank R̂), as the validation does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bdl.diagnostics import ess_bulk, rank_rhat
from bdl.utils.trees import parameter_names
from bdl.validation.reference import evaluation_inputs, function_summaries, parameter_summaries

#: parameters shown one by one in a parameter-space summary
SHOWN = 12
#: fewest draws per chain for ESS and R̂
MIN_DRAWS = 4


def parameter_space_lines(positions: Any, labels: dict[str, Any] | None = None) -> list[str]:
    """Mean, sd, bulk ESS and R̂ per named parameter of ``(chain, draw, ...)`` draws."""
    x = parameter_summaries(positions).astype(np.float64)  # (chain, draw, k)
    names = parameter_names(positions, batch_dims=2, labels=labels)
    flat = x.reshape(-1, x.shape[-1])
    mean, sd = flat.mean(0), flat.std(0)
    ess, rhat = diagnostics(x)
    shown = min(SHOWN, len(names))
    width = max(12, *(len(n) + 2 for n in names[:shown]))
    lines = [f"{'parameter':<{width}}{'mean':>10}{'sd':>10}{'ESS':>9}{'R-hat':>8}"]
    for j in range(shown):
        lines.append(
            f"{names[j]:<{width}}{mean[j]:>10.4g}{sd[j]:>10.4g}"
            f"{_fmt(ess[j], '.0f'):>9}{_fmt(rhat[j], '.3f'):>8}"
        )
    if len(names) > shown:
        lines.append(
            f"... {len(names) - shown} more; over all {len(names)} parameters: "
            + _worst(ess, rhat, names)
        )
    elif len(names) > 1:
        lines.append(f"over all {len(names)} parameters: " + _worst(ess, rhat, names))
    return lines


def function_space_lines(target: Any, positions: Any) -> list[str]:
    """Predictive means and log-likelihoods on held-out inputs, as ``bdl validate`` monitors them
    for networks: the mean log-likelihood per input with its ESS and R̂, and the worst ESS and R̂
    over the inputs' predictive means and log-likelihoods."""
    x, _ = evaluation_inputs(target)
    n = int(x.shape[0])
    where = "held-out" if target.x_test is not None else "training (no test split)"
    monitored = function_summaries(target, positions).astype(np.float64)  # (chain, draw, k)
    means, lls = monitored[..., :-n], monitored[..., -n:]
    mean_ll = lls.mean(-1)  # (chain, draw)
    lines = [
        f"function space, on {n} {where} inputs (a network's weights have no meaningful R-hat: "
        "hidden units can be permuted)",
        f"{'quantity':<42}{'mean':>10}{'sd':>10}{'ESS':>9}{'R-hat':>8}",
    ]
    ess, rhat = (float(v[0]) for v in diagnostics(mean_ll[..., None]))
    lines.append(
        f"{'log-likelihood per input (mean over inputs)':<42}{mean_ll.mean():>10.4g}"
        f"{mean_ll.std():>10.4g}{_fmt(ess, '.0f'):>9}{_fmt(rhat, '.3f'):>8}"
    )
    for label, values in (
        (f"predictive mean, worst of {means.shape[-1]} values", means),
        (f"log-likelihood, worst of {n} inputs", lls),
    ):
        column_ess, column_rhat = diagnostics(values)
        worst_ess, worst_rhat = _nanmin(column_ess), _nanmax(column_rhat)
        lines.append(f"{label:<62}{_fmt(worst_ess, '.0f'):>9}{_fmt(worst_rhat, '.3f'):>8}")
    return lines


def diagnostics(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column bulk ESS and rank R̂ of ``(chain, draw, k)`` values, as the validation's gate
    computes them; NaN where they are undefined: fewer than :data:`MIN_DRAWS` draws, a constant
    column, or (R̂) a single chain."""
    k = x.shape[-1]
    ess, rhat = np.full(k, np.nan), np.full(k, np.nan)
    if x.shape[1] < MIN_DRAWS:
        return ess, rhat
    varying = x.reshape(-1, k).std(0) > 0
    if varying.any():
        ess[varying] = ess_bulk(x[..., varying])
        if x.shape[0] >= 2:
            rhat[varying] = rank_rhat(x[..., varying])
    return ess, rhat


def _nanmin(values: np.ndarray) -> float:
    return float(np.nanmin(values)) if np.any(np.isfinite(values)) else float("nan")


def _nanmax(values: np.ndarray) -> float:
    return float(np.nanmax(values)) if np.any(np.isfinite(values)) else float("nan")


def _worst(ess: np.ndarray, rhat: np.ndarray, names: list[str]) -> str:
    parts = []
    if np.any(np.isfinite(ess)):
        i = int(np.nanargmin(ess))
        parts.append(f"min bulk ESS {ess[i]:.0f} ({names[i]})")
    if np.any(np.isfinite(rhat)):
        j = int(np.nanargmax(rhat))
        parts.append(f"max R-hat {rhat[j]:.3f} ({names[j]})")
    if not parts:
        return f"no ESS or R-hat (they need {MIN_DRAWS} draws per chain)"
    return ", ".join(parts)


def _fmt(value: float, spec: str) -> str:
    return "-" if not np.isfinite(value) else format(value, spec)

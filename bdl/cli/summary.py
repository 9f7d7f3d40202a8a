"""What ``bdl sample`` prints about the draws: quantities whose R̂ and ESS mean something.

The summary is that of :mod:`bdl.validation.summary`: in parameter space (the model's own,
constrained parameters by name) for identifiable models, in function space (predictive means and
log-likelihoods on held-out inputs) for networks, whose weights have no meaningful R̂; then the
convergence verdict ``bdl.sample`` reached (``samples.convergence``, read, not recomputed); then
the test-set BMA when the model has a test split.
"""

from __future__ import annotations

import sys
from typing import Any

import jax
import numpy as np

from bdl.compile.compiled_model import CompiledModel
from bdl.evaluation import test_metrics
from bdl.validation.reference import default_space
from bdl.validation.reference_draws import named_parameters
from bdl.validation.summary import (
    MIN_DRAWS,
    SHOWN,
    diagnostics,
    function_space_lines,
    parameter_space_lines,
)

#: the exit status of a run whose draws failed the convergence check (docs/cli.md):
#: bdl.cli.main's EXIT_NOT_CONVERGED, repeated here because main stays light and imports no
#: module that imports JAX
NOT_CONVERGED = 4
#: the exit status of a run whose draws mixed but failed the bias check (bdl.cli.main's
#: EXIT_BIASED)
BIASED = 5

__all__ = [
    "BIASED",
    "MIN_DRAWS",
    "NOT_CONVERGED",
    "SHOWN",
    "convergence_lines",
    "diagnostics",
    "exit_status",
    "function_space_lines",
    "parameter_space_lines",
    "summary_lines",
]


def summary_lines(target: Any, samples: Any, labels: dict[str, Any] | None = None) -> list[str]:
    """The summary of ``samples`` (healthy chains only) as printable lines."""
    positions = jax.tree.map(lambda a: np.asarray(a)[samples.healthy_chains], samples.positions)
    if default_space(target) == "function":
        lines = function_space_lines(target, positions)
    else:  # in the model's own, constrained parameters (a scale as σ, not log σ)
        lines = parameter_space_lines(named_parameters(target, positions), labels)
    lines += convergence_lines(samples)
    if isinstance(target, CompiledModel) and target.x_test is not None:
        metrics = test_metrics(target, samples.flat(healthy=True))
        lines.append("test BMA: " + "  ".join(f"{k} {v:.4f}" for k, v in metrics.items()))
    return lines


def convergence_lines(samples: Any) -> list[str]:
    """The convergence verdict of ``samples`` (:class:`bdl.diagnostics.convergence.Convergence`):
    the worst R̂ and ESS on one line, then the stuck chains, one line each, then the bias check's
    line; nothing when there is no verdict. What failed, and what to do, :func:`exit_status`
    reports."""
    verdict = getattr(samples, "convergence", None)
    if verdict is None:
        return []
    bias = [] if verdict.bias is None else [verdict.bias.summary()]
    return [verdict.summary(), *(f"  {stuck}" for stuck in verdict.stuck), *bias]


def exit_status(samples: Any) -> int:
    """``bdl sample``'s exit status: 130 interrupted, else 3 when a chain diverged, ran away or
    ran hot (``samples.runaway``), else :data:`NOT_CONVERGED` (4) when the draws failed the
    convergence check's mixing criteria, else :data:`BIASED` (5) when they mixed but failed its
    bias check, else 0; what failed is reported on stderr first."""
    if samples.interrupted:
        return 130
    verdict = samples.convergence
    unconverged = verdict is not None and not verdict.mixing_ok
    biased = verdict is not None and verdict.biased
    if unconverged:
        print(f"bdl sample: warning: {verdict.report()}", file=sys.stderr)
    if biased:
        print(f"bdl sample: warning: {verdict.bias.report()}", file=sys.stderr)
    if np.any(samples.diverged):
        print(f"bdl sample: warning: {samples.divergence_report()}", file=sys.stderr)
    if np.any(samples.runaway):
        print(f"bdl sample: warning: {samples.runaway_report()}", file=sys.stderr)
    if np.any(samples.diverged) or np.any(samples.runaway):
        return 3
    if unconverged:
        return NOT_CONVERGED
    return BIASED if biased else 0

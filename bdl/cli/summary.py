"""What ``bdl sample`` prints about the draws: quantities whose R̂ and ESS mean something.

The summary is that of :mod:`bdl.validation.summary`: in parameter space (the model's own,
constrained parameters by name) for identifiable models, in function space (predictive means and
log-likelihoods on held-out inputs) for networks, whose weights have no meaningful R̂; then the
test-set BMA when the model has a test split.
"""

from __future__ import annotations

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

__all__ = [
    "MIN_DRAWS",
    "SHOWN",
    "diagnostics",
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
    if isinstance(target, CompiledModel) and target.x_test is not None:
        metrics = test_metrics(target, samples.flat(healthy=True))
        lines.append("test BMA: " + "  ".join(f"{k} {v:.4f}" for k, v in metrics.items()))
    return lines

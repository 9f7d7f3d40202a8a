"""The convergence check after every run: :func:`check_convergence` gives a :class:`Samples` its
verdict (:class:`bdl.diagnostics.convergence.Convergence`), which :func:`bdl.sample` stores in
``samples.convergence`` and turns into a :class:`ConvergenceWarning` when it fails.

What is monitored (:mod:`bdl.sampling.verdict.monitored`): a network
(:func:`~bdl.sampling.verdict.monitored.default_space` says ``"function"``) in function space
(:func:`~bdl.sampling.verdict.monitored.verdict_quantities`: a classifier's per-example log
predictive densities of held-out points, saturated ones left out; a regressor's predictive means
and log-likelihoods), each chain by its normal scores within itself
(:func:`bdl.diagnostics.rank_normalised.within_chains`) — a network's chains sit in different
modes, whose predictions differ in location and in shape however long they run, so the check asks
that each chain be stationary and mixed within its mode (split R̂ catches a chain that still drifts
or changes its spread, the ESS one that barely moves); any other model in parameter space, its
sampled coordinates by name (:func:`bdl.utils.trees.parameter_names`). The sampled coordinates are
a model's parameters through monotone maps (log σ for σ), under which ranks, and so the bulk R̂ and
the bulk and tail ESS, do not change; using them needs no target, so that :func:`bdl.merge_samples`
recomputes the verdict from the draws alone, and names what the sampler moves.

Only chains that never diverged are checked (a diverged chain is reported by its own warning).
A classifier's verdict also reports the BMA's stability between the halves of the draws
(:mod:`bdl.diagnostics.stability`), and every verdict gets its bias part
(:mod:`bdl.sampling.verdict.bias_check`) when the model is at hand.

**Cost.** The diagnostics cost about half a microsecond per value (quantity × draw) on a CPU
core, so the check monitors at most :func:`quantity_budget` quantities: 2¹⁸ values' worth
(:data:`MAX_VALUES`), between :data:`MIN_QUANTITIES` and :data:`MAX_QUANTITIES`. Function space
adds one forward pass per draw on as many held-out inputs as the budget allows (64 draws per
call of one program, compiled once per model). The stuck-chain rules read every coordinate once
(a min and a max). docs/troubleshooting.md, "What it costs", has the measured cost.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from typing import Any

import jax
import numpy as np

from bdl.compile.target import Target
from bdl.diagnostics.convergence import Convergence, assess
from bdl.diagnostics.rank_normalised import within_chains
from bdl.diagnostics.stability import bma_stability
from bdl.diagnostics.stuck import small_steps, unmoved_chains
from bdl.sampling.samples import ConvergenceWarning, Samples
from bdl.sampling.verdict.bias_check import check_bias, warn_bias
from bdl.sampling.verdict.monitored import (
    default_space,
    draw_monitor,
    parameter_quantities,
    verdict_inputs,
    verdict_quantities,
)
from bdl.utils.trees import leaf_paths

__all__ = [
    "MAX_QUANTITIES",
    "MAX_VALUES",
    "MIN_QUANTITIES",
    "check_convergence",
    "checked",
    "quantity_budget",
    "run_monitor",
]

#: most quantities monitored
MAX_QUANTITIES = 256
#: fewest quantities monitored (when a model has that many), whatever the number of draws
MIN_QUANTITIES = 16
#: quantities × chains × draws the diagnostics are computed on, at most (above MIN_QUANTITIES)
MAX_VALUES = 2**18


def quantity_budget(chains: int, draws: int) -> int:
    """How many quantities to monitor for ``chains × draws`` draws."""
    fit = MAX_VALUES // max(chains * draws, 1)
    return int(min(MAX_QUANTITIES, max(MIN_QUANTITIES, fit)))


def run_monitor(target: Target, chains: int, draws: int) -> tuple[int, Any] | None:
    """What a run computes for its check while it goes on: ``(num, monitor)`` for a network
    sampled at a temperature above 0 (``monitor``:
    :func:`bdl.sampling.verdict.monitored.draw_monitor` on the ``num`` held-out inputs the check of
    ``chains × draws`` draws reads), else ``None``. Evaluated on the device as each chunk's draws
    leave it, the predictions cost no copy of the draws back to the device after the run."""
    if draws == 0 or default_space(target) != "function" or target.constant_temperature() == 0:
        return None
    num = verdict_inputs(target, quantity_budget(chains, draws))
    return num, draw_monitor(target, num)


def check_convergence(
    samples: Any, target: Any = None, *, space: str | None = None, monitored: Any = None
) -> Convergence | None:
    """The convergence verdict of ``samples`` ([Troubleshooting](../troubleshooting.md)).

    Args:
        samples: a :class:`bdl.Samples`.
        target: the compiled model or potential it was drawn from; needed for a network,
            whose predictions are checked, and to decide the space.
        space: ``"parameter"`` or ``"function"`` (default: :func:`default_space` of ``target``;
            without a target, that of ``samples.convergence``, else ``"parameter"``).
        monitored: ``(num, values)``, the function-space values of every chain's draws on
            ``num`` held-out inputs, ``(chain, draw, k)``, computed during the run
            (:func:`run_monitor`); used when the budget gives the same ``num``.

    Returns:
        the verdict, or ``None`` when there is nothing to check: no draws kept, none taken, every
            chain diverged, or a target at temperature 0 (optimisation, not sampling).
    """
    if not isinstance(samples, Samples):
        raise TypeError(
            f"check_convergence needs a bdl.Samples (what bdl.sample returns); got "
            f"{type(samples).__name__}."
        )
    if target is not None and not isinstance(target, Target):
        raise TypeError(
            "check_convergence(target=...) must be the compiled model or potential the draws "
            f"came from (bdl.compile(...)); got {type(target).__name__}."
        )
    if space is None:
        if target is not None:
            space = default_space(target)
        elif getattr(samples, "convergence", None) is not None:
            space = samples.convergence.space
        else:
            space = "parameter"
    if space not in ("parameter", "function"):
        raise ValueError(
            f"check_convergence: space must be 'parameter' or 'function'; got {space!r}."
        )
    if space == "function" and target is None:
        raise ValueError(
            "check_convergence: a network is checked in function space, on its predictions; "
            "pass target=, the compiled model the draws came from."
        )
    temperature = None if target is None else target.constant_temperature()
    healthy = np.asarray(samples.healthy_chains)
    if not samples.kept_draws or samples.num_draws == 0 or healthy.size == 0 or temperature == 0:
        return None
    every = healthy.size == samples.num_chains  # no copy of the draws when every chain counts
    positions = jax.tree.map(
        lambda a: np.asarray(a) if every else np.asarray(a)[healthy], samples.positions
    )
    budget = quantity_budget(int(healthy.size), samples.num_draws)
    saturated, stability = 0, None
    if space == "function":
        computed = None
        if monitored is not None and np.shape(monitored[1])[:2] == (
            samples.num_chains,
            samples.num_draws,
        ):
            computed = (monitored[0], np.asarray(monitored[1])[healthy])
        judged = verdict_quantities(target, positions, budget, computed)
        values, names, total = judged.values, judged.names, judged.total
        saturated = judged.saturated
        if judged.probabilities is not None:
            stability = bma_stability(judged.probabilities)
        # within each chain: a network's chains sit in different modes, whose predictions
        # differ (on digits, R̂ 2 across chains after any length of run); what can be checked
        # is that each chain is stationary and has mixed within its own mode
        values = within_chains(values)
    else:
        values, names, total = parameter_quantities(positions, budget)
    paths = [p or "theta" for p in leaf_paths(positions)]
    compare = [space == "parameter" or not (p == "net" or p.startswith("net/")) for p in paths]
    stuck = unmoved_chains(jax.tree.leaves(positions), paths, healthy.tolist(), compare)
    if samples.adapted is not None and "step_size" in samples.adapted:
        step_sizes = np.asarray(samples.adapted["step_size"])[healthy]
        stuck += small_steps(step_sizes, healthy.tolist())
    stuck.sort(key=lambda s: s.chain)
    return assess(
        values, names, space=space, of=total, stuck=stuck, saturated=saturated,
        stability=stability,
    )  # fmt: skip


def checked(samples: Any, target: Any, monitored: Any = None) -> Any:
    """``samples`` with its verdict (:func:`check_convergence`, given the run's ``monitored``
    values, and :func:`bdl.sampling.verdict.bias_check.check_bias` for its bias part), a
    :class:`~bdl.sampling.samples.ConvergenceWarning` naming what failed to mix and a
    :class:`~bdl.sampling.samples.BiasWarning` naming what is biased, as :func:`bdl.sample`
    returns them. A check that raises is reported (``RuntimeWarning``) instead of losing the
    run's draws: the verdict (or its bias part) is then ``None``."""
    try:
        verdict = check_convergence(samples, target, monitored=monitored)
    except Exception as err:  # the draws matter more than their check
        _warn_failed("convergence", err, "samples.convergence", "check_convergence")
        return samples
    if verdict is not None and target is not None:
        try:
            verdict = verdict.with_bias(check_bias(samples, target))
        except Exception as err:  # the draws matter more than their check
            _warn_failed("bias", err, "samples.convergence.bias", "check_bias")
    if verdict is not None and not verdict.mixing_ok:
        warnings.warn(verdict.report(), ConvergenceWarning, stacklevel=_caller())
    if verdict is not None:
        warn_bias(verdict.bias, _caller())
    return dataclasses.replace(samples, convergence=verdict)


def _warn_failed(check: str, err: Exception, field: str, function: str) -> None:
    """A ``RuntimeWarning`` that ``check`` raised ``err``, so that ``field`` is ``None``."""
    warnings.warn(
        f"the {check} check of the draws failed ({type(err).__name__}: {err}); "
        f"{field} is None. Check them with bdl.sampling.{function}.",
        RuntimeWarning,
        stacklevel=_caller(),
    )


def _caller() -> int:
    """The ``stacklevel`` of the first frame outside bdl/sampling/, from the caller's: the line
    that called :func:`bdl.sample`, whatever wraps it inside the package."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # bdl/sampling
    level, frame = 0, sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        package + os.sep
    ):
        frame, level = frame.f_back, level + 1
    return level + 1

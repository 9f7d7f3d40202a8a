"""MCMC diagnostics: effective sample size, R̂, kinetic and configurational temperatures.

* :mod:`bdl.diagnostics.chains` — plain, bulk and tail ESS and split and rank-normalised R̂,
  one function per method, as ArviZ computes them (Geyer 1992; Vehtari et al. 2021).
* :mod:`bdl.diagnostics.rank_normalised` — the arithmetic behind them, over all entries at once
  in NumPy, and the rank R̂, bulk and tail ESS of many quantities in one call.
* :mod:`bdl.diagnostics.convergence` — the verdict every ``bdl.sample`` run gets (R̂ < 1.01, bulk
  and tail ESS ≥ 100 per chain), with :mod:`bdl.diagnostics.stuck`, the chains that stopped
  moving, and its bias part.
* :mod:`bdl.diagnostics.stein` — Stein identities of π_T estimated from the draws with full-data
  gradients at some of them: each coordinate's mean error and spread ratio, with standard errors.
* :mod:`bdl.diagnostics.bias` — the bias verdict on them (:func:`assess_bias`): tolerances,
  multiple-testing control, the findings a ``BiasWarning`` names.
* :mod:`bdl.diagnostics.temperatures` — kinetic temperature with its χ² band and configurational
  temperature per parameter group (Wenzel et al. 2020, App. I).

Draws are arrays shaped ``(chains, draws, *event)``; apply the chain diagnostics to every leaf of
``samples.positions`` with ``jax.tree.map(ess_bulk, samples.positions)``.
"""

from bdl.diagnostics.bias import Bias, assess_bias
from bdl.diagnostics.chains import (
    RHat,
    bulk_rhat,
    effective_sample_size,
    ess_bulk,
    ess_tail,
    rank_rhat,
    split_rhat,
    tail_rhat,
)
from bdl.diagnostics.stein import SteinEstimates, stein_estimates
from bdl.diagnostics.temperatures import (
    GroupTemperature,
    TemperatureReport,
    configurational_temperature,
    group_sizes,
    kinetic_temperature,
    kinetic_temperature_band,
    kinetic_temperature_from_energy,
    parameter_groups,
    temperature_report,
)

__all__ = [
    "Bias",
    "GroupTemperature",
    "RHat",
    "SteinEstimates",
    "TemperatureReport",
    "assess_bias",
    "bulk_rhat",
    "configurational_temperature",
    "effective_sample_size",
    "ess_bulk",
    "ess_tail",
    "group_sizes",
    "kinetic_temperature",
    "kinetic_temperature_band",
    "kinetic_temperature_from_energy",
    "parameter_groups",
    "rank_rhat",
    "split_rhat",
    "stein_estimates",
    "tail_rhat",
    "temperature_report",
]

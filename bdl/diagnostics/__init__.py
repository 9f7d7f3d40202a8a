"""MCMC diagnostics: effective sample size, R̂, kinetic and configurational temperatures.

* :mod:`bdl.diagnostics.ess` — plain, bulk and tail ESS (Geyer 1992; Vehtari et al. 2021).
* :mod:`bdl.diagnostics.rhat` — split R̂ and rank-normalised split R̂ (Vehtari et al. 2021).
* :mod:`bdl.diagnostics.temperatures` — kinetic temperature with its χ² band and configurational
  temperature per parameter group (Wenzel et al. 2020, App. I).
* :mod:`bdl.diagnostics.autocorrelation`, :mod:`bdl.diagnostics.transforms` — FFT
  autocovariances; splitting, rank normalisation and folding of ``(chains, draws, ...)`` draws.

Draws are arrays shaped ``(chains, draws, *event)``; apply the chain diagnostics to every leaf of
``samples.positions`` with ``jax.tree.map(ess_bulk, samples.positions)``.
"""

from bdl.diagnostics.autocorrelation import autocorrelation, autocovariance
from bdl.diagnostics.ess import effective_sample_size, ess_bulk, ess_tail
from bdl.diagnostics.rhat import bulk_rhat, rank_rhat, split_rhat, tail_rhat
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
from bdl.diagnostics.transforms import fold, rank_normalize, split_chains

__all__ = [
    "GroupTemperature",
    "TemperatureReport",
    "autocorrelation",
    "autocovariance",
    "bulk_rhat",
    "configurational_temperature",
    "effective_sample_size",
    "ess_bulk",
    "ess_tail",
    "fold",
    "group_sizes",
    "kinetic_temperature",
    "kinetic_temperature_band",
    "kinetic_temperature_from_energy",
    "parameter_groups",
    "rank_normalize",
    "rank_rhat",
    "split_chains",
    "split_rhat",
    "tail_rhat",
    "temperature_report",
]

"""The bias check after every run: :func:`check_bias` computes full-data gradients at a subset
of the kept draws and asks the Stein identities of π_T whether the draws follow it
(:mod:`bdl.diagnostics.stein`, :mod:`bdl.diagnostics.bias`); :func:`bdl.sample` stores the verdict
in ``samples.convergence.bias`` and warns (:class:`~bdl.sampling.samples.BiasWarning`) when it
fails. The draws are kept whatever it says.

**What is read.** The chains that never diverged, at their draws taken at a temperature above
zero. At most :func:`coordinate_budget` coordinates (all of them for smaller models; otherwise
the choice of :func:`bdl.sampling.verdict.monitored.chosen_coordinates`), at every kept draw; the
gradient at :func:`gradient_draws` draws per chain, evenly spaced. A network's configurational
temperature is summed over every coordinate.

**Cost.** The full-data gradients cost at most :data:`COST_SHARE` of the run's own gradient
work (each full-data gradient counts n/B minibatch gradients), never fewer than
:data:`MIN_GRADIENT_DRAWS` nor more than :data:`MAX_GRADIENT_DRAWS` per chain; they are computed
by the program the run-away check shares (:mod:`bdl.sampling.verdict.full_data`). The statistics
are NumPy on the host, linear in draws × coordinates. ``benchmarks/bias_check.py`` measures the
whole.
"""

from __future__ import annotations

import warnings
from typing import Any

import jax
import numpy as np

from bdl.compile.target import Target
from bdl.diagnostics.bias import Bias, assess_bias
from bdl.diagnostics.stein import stein_estimates
from bdl.sampling.samples import BiasWarning, Samples
from bdl.sampling.verdict.full_data import afforded_draws, at_draws, check_arguments, temperatures
from bdl.sampling.verdict.monitored import chosen_coordinates, coordinate_columns, default_space

__all__ = [
    "COST_SHARE",
    "MAX_COORDINATES",
    "MAX_GRADIENT_DRAWS",
    "MAX_VALUES",
    "MIN_COORDINATES",
    "MIN_GRADIENT_DRAWS",
    "check_bias",
    "coordinate_budget",
    "gradient_draws",
    "warn_bias",
]

#: the share of the run's gradient work the check may spend (above MIN_GRADIENT_DRAWS)
COST_SHARE = 0.05
#: fewest draws per chain given a full-data gradient (when the chain has that many)
MIN_GRADIENT_DRAWS = 16
#: most draws per chain given a full-data gradient
MAX_GRADIENT_DRAWS = 512
#: most coordinates checked one by one
MAX_COORDINATES = 1024
#: fewest coordinates checked one by one (when the model has that many)
MIN_COORDINATES = 16
#: coordinates × draws read, at most (above MIN_COORDINATES): the statistics' host cost
MAX_VALUES = 2**19


def gradient_draws(target: Target, steps: int, draws: int) -> int:
    """How many draws per chain get a full-data gradient: worth at most :data:`COST_SHARE` of
    ``steps`` minibatch gradients, within [:data:`MIN_GRADIENT_DRAWS`,
    :data:`MAX_GRADIENT_DRAWS`], and at most ``draws``."""
    return afforded_draws(target, steps, draws, COST_SHARE, MIN_GRADIENT_DRAWS, MAX_GRADIENT_DRAWS)


def coordinate_budget(chains: int, draws: int) -> int:
    """How many coordinates to check one by one for ``chains × draws`` draws: within
    [:data:`MIN_COORDINATES`, :data:`MAX_COORDINATES`], at most :data:`MAX_VALUES` values."""
    fit = MAX_VALUES // max(chains * draws, 1)
    return int(min(MAX_COORDINATES, max(MIN_COORDINATES, fit)))


def check_bias(samples: Samples, target: Target) -> Bias | None:
    """The bias verdict of ``samples`` (module docstring).

    Args:
        samples: the draws of a run (:class:`bdl.Samples`).
        target: the compiled model or potential they came from.

    Returns:
        The verdict, or ``None`` when nothing can be checked: no draws kept, fewer than 4 draws
            per chain at a temperature above zero, or every chain diverged.

    Raises:
        TypeError: ``samples`` is not a :class:`bdl.Samples` or ``target`` not a compiled target.
    """
    check_arguments(samples, target, "check_bias")
    healthy = np.asarray(samples.healthy_chains)
    if not samples.kept_draws or samples.num_draws == 0 or healthy.size == 0:
        return None
    temperature = temperatures(samples, target)[healthy]
    hot = np.flatnonzero(np.all(temperature > 0, axis=0))  # draws at T > 0 in every chain
    if hot.size < 4:
        return None
    count = gradient_draws(target, samples.steps_done, hot.size)
    subset = hot[np.unique(np.linspace(0, hot.size - 1, count).round().astype(int))]
    positions = samples.positions  # a view when every chain and draw is read (no copy)
    if healthy.size < samples.num_chains or hot.size < samples.num_draws:
        positions = jax.tree.map(lambda a: np.asarray(a)[healthy][:, hot], positions)
    chosen, names, total = chosen_coordinates(positions, coordinate_budget(healthy.size, hot.size))
    draws = coordinate_columns(positions, chosen).astype(np.float64)
    where = np.searchsorted(hot, subset)  # the subset's rows among the draws read
    # Wenzel et al.'s configurational temperature ⟨θ, ∇U⟩/(d·T), about the origin: it rises
    # while a chain started near zero spreads into π_T's typical set
    centre = [np.zeros(np.shape(a)[:1] + np.shape(a)[2:]) for a in jax.tree.leaves(positions)]
    grads, dots = _gradients(target, positions, where, chosen, centre)
    scale = temperature[:, subset]
    estimates = stein_estimates(draws, grads / scale[..., None], where, names)
    network = default_space(target) == "function"
    return assess_bias(
        estimates,
        of=total,
        temperatures=dots / (scale * total),
        test_temperatures=network,
        kinetic=_kinetic(samples, healthy, hot, temperature, total),
    )


def _kinetic(
    samples: Samples, healthy: np.ndarray, hot: np.ndarray, temperature: np.ndarray, d: int
) -> np.ndarray | None:
    """Per chain, the mean of 2K/(d·T) over the draws read, from the kinetic energy recorded
    with every draw; ``None`` for a kernel without momentum (K = 0)."""
    energy = samples.info.get("kinetic_energy")
    if energy is None or np.shape(energy) != (samples.num_chains, samples.num_draws):
        return None
    k = np.asarray(energy, np.float64)[healthy][:, hot]
    if not np.any(k > 0) or not np.all(np.isfinite(k)):
        return None
    return (2.0 * k / (d * temperature[:, hot])).mean(axis=1)


def warn_bias(verdict: Bias | None, stacklevel: int) -> None:
    """A :class:`BiasWarning` with the verdict's report when it failed."""
    if verdict is not None and not verdict.ok:
        warnings.warn(verdict.report(), BiasWarning, stacklevel=stacklevel + 1)


def _gradients(
    target: Target, positions: Any, draws: np.ndarray, chosen: np.ndarray, centre: list[Any]
) -> tuple[np.ndarray, np.ndarray]:
    """At draw ``draws`` of every chain of ``positions``: ∇U's coordinates ``chosen``
    ``(chains, len(draws), len(chosen))`` and (θ − θ̄_c)·∇U over every coordinate
    ``(chains, len(draws))``, θ̄_c the chain's mean (``centre``, one array per leaf), float64
    (the program the run-away check shares, :func:`bdl.sampling.verdict.full_data.at_draws`)."""
    chains = np.shape(jax.tree.leaves(positions)[0])[0]
    rows = [(c, int(i)) for c in range(chains) for i in draws]
    centres = [[m[c] for m in centre] for c, _ in rows]
    values = at_draws(target, positions, rows, centres, chosen)
    shape = (chains, len(draws))
    return values.grad.reshape(*shape, len(chosen)), values.dot.reshape(shape)

"""The quantities a report plots, and their per-chain traces and rank plots.

What is monitored is what the convergence check monitors (:mod:`bdl.sampling.convergence`): a
network's predictions on held-out inputs (:func:`bdl.sampling.monitored.verdict_quantities`),
each chain centred at its own mean (weights in function space: hidden units permute between
chains), any other model's sampled coordinates. Of those, the
report plots the few with the largest R̂, so that a report of a network stays small and fast.
The plots are ArviZ's (``plot_trace``, ``plot_rank``); divergences and run-away chains are
marked on the traces at the draw where they happened.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from bdl.diagnostics.rank_normalised import rank_diagnostics
from bdl.sampling.monitored import default_space, parameter_quantities, verdict_quantities

#: quantities whose R̂ and ESS the report computes (the worst of them are plotted)
BUDGET = 256


@dataclasses.dataclass(frozen=True)
class Quantities:
    """The monitored quantities of a run's healthy chains, worst R̂ first.

    Attributes:
        space: ``"parameter"`` or ``"function"``.
        chains: the chains they are of (those that never diverged).
        values: ``(chains, draws, k)``; names: one per quantity.
        rhat, ess_bulk, ess_tail: per quantity (NaN where undefined).
        total: how many quantities there were to choose from.
    """

    space: str
    chains: np.ndarray
    values: np.ndarray
    names: list[str]
    rhat: np.ndarray
    ess_bulk: np.ndarray
    ess_tail: np.ndarray
    total: int

    def worst(self, count: int) -> list[int]:
        """The indices of the ``count`` quantities with the largest R̂ (undefined R̂ last)."""
        key = np.where(np.isnan(self.rhat), -np.inf, self.rhat)
        return [int(i) for i in np.argsort(-key, kind="stable")[:count]]


def monitored(samples: Any, target: Any = None) -> tuple[Quantities | None, str]:
    """The quantities of ``samples`` to plot, or ``None`` and why not.

    Args:
        samples: a :class:`bdl.Samples` holding draws.
        target: the compiled model the draws came from (needed for a network's predictions).

    Returns:
        the quantities and a note on what they are.
    """
    healthy = np.asarray(samples.healthy_chains)
    if not samples.kept_draws or samples.num_draws == 0:
        return None, "the run kept no draws (keep_draws=False): nothing to plot."
    if healthy.size == 0:
        return None, "every chain diverged: no healthy chain to plot."
    positions = jax.tree.map(lambda a: np.asarray(a)[healthy], samples.positions)
    verdict = getattr(samples, "convergence", None)
    if target is not None:
        space = default_space(target)
    else:
        space = "parameter" if verdict is None else verdict.space
    if space == "function" and target is None:
        return None, (
            "a network is monitored in function space, on its predictions, which need the "
            "compiled model: pass target= (Samples.report(path, target=compiled))."
        )
    if space == "function":
        judged = verdict_quantities(target, positions, BUDGET)
        values, names, total = judged.values, judged.names, judged.total
        values = values - np.nanmean(values, axis=1, keepdims=True)  # within each chain's mode
        what = (
            "what the convergence verdict judges on held-out inputs — a classifier's "
            "per-example log predictive densities (test points whose log-likelihood "
            "hardly moves left out), a regressor's predictive means and log-likelihoods — "
            "each chain centred at its own mean (function space: a network's weights permute "
            "between chains)"
        )
    else:
        values, names, total = parameter_quantities(positions, BUDGET)
        what = "the sampled coordinates (parameter space)"
    rhat, bulk, tail = rank_diagnostics(values, single_chain=True)
    found = Quantities(space, healthy, values, names, rhat, bulk, tail, total)
    return found, f"{len(names)} of {total} quantities: {what}."


def events(samples: Any) -> list[tuple[int, int, str]]:
    """(chain, draw index, what) for every divergence and run-away of the run's chains."""
    steps = np.asarray(samples.steps)
    out = []
    marks = [("diverged", samples.diverged, samples.divergence_step)]
    runaway = getattr(samples, "runaway", None)
    if runaway is not None:
        marks.append(("run-away", runaway, getattr(samples, "runaway_step", None)))
    for label, flags, at in marks:
        flags = np.asarray(flags, bool)
        at = np.full(flags.shape, -1) if at is None else np.asarray(at)
        for chain in np.flatnonzero(flags):
            step = int(at[chain])
            draw = int(np.searchsorted(steps, step)) if step >= 0 else 0
            out.append((int(chain), min(draw, max(len(steps) - 1, 0)), label))
    return out


def trace_figures(samples: Any, found: Quantities, count: int) -> tuple[Any, Any]:
    """ArviZ trace and rank figures of the ``count`` worst quantities, events marked.

    Returns:
        (trace figure, rank figure).
    """
    import arviz as az
    import matplotlib.pyplot as plt

    chosen = found.worst(count)
    labels = _unique([_label(found.names[i]) for i in chosen])
    posterior = {label: found.values[:, :, i] for label, i in zip(labels, chosen, strict=True)}
    data = az.from_dict(posterior=posterior)
    axes = az.plot_trace(
        data, var_names=labels, compact=False, figsize=(11, 1.9 * len(labels)), show=False
    )
    axes = np.atleast_2d(axes)
    trace = axes[0, 0].figure
    chain_index = {int(c): k for k, c in enumerate(found.chains)}
    for chain, draw, label in events(samples):
        colour = f"C{chain_index[chain]}" if chain in chain_index else "k"
        style = "--" if label == "diverged" else ":"
        for row in axes:
            row[1].axvline(draw, color=colour, ls=style, lw=1.5)
        axes[0, 1].annotate(
            f"chain {chain} {label}", (draw, 1.0), xycoords=("data", "axes fraction"),
            fontsize=7, color="#c0392b", rotation=90, va="top",
        )  # fmt: skip
    for row, i in zip(axes, chosen, strict=True):
        row[1].set_title(f"{found.names[i]}   R̂ {found.rhat[i]:.3f}", fontsize=9)
    trace.tight_layout()
    columns = min(3, len(labels))
    rows = -(-len(labels) // columns)
    rank_fig, rank_axes = plt.subplots(
        rows, columns, figsize=(3.8 * columns, 2.6 * rows), squeeze=False
    )
    az.plot_rank(data, var_names=labels, ax=rank_axes.ravel()[: len(labels)], show=False)
    for ax in rank_axes.ravel()[len(labels) :]:
        ax.set_visible(False)
    rank_fig.tight_layout()
    return trace, rank_fig


def _label(name: str) -> str:
    """A quantity's name as a plot label (ArviZ splits variable names on nothing; keep short)."""
    return name if len(name) <= 40 else name[:37] + "…"


def _unique(labels: list[str]) -> list[str]:
    """``labels`` with a repeated one numbered (ArviZ needs distinct variable names)."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out

"""The quantities a report plots, and their per-chain traces and rank plots.

What is monitored is what the convergence check monitors
(:mod:`bdl.sampling.verdict.convergence_check`): a network's predictions on held-out inputs
(:func:`bdl.sampling.verdict.monitored.verdict_quantities`), any other model's sampled coordinates.
Of those, the report plots the few with the largest R̂, so that a report of a network stays small
and fast.

The traces and the per-chain distributions are drawn in each quantity's own units (a log predictive
density in nats, at most 0). A network's R̂ and ESS are those of the verdict: of each chain's
normal scores within itself (:func:`bdl.diagnostics.rank_normalised.within_chains`; its weights sit
in a mode of their own, whose predictions differ from another chain's however long they run), so
its rank plots, which show what R̂ reads, are of those scores too. Each distribution panel puts
every chain in a band of its own, a histogram on bins shared by all chains and scaled to its own
peak, so that a chain that barely moves shows as a narrow bar beside the others instead of a spike
that flattens them. The rank plots are ArviZ's (``plot_rank``); divergences and run-away chains are
marked on the traces at the draw where they happened.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from bdl.diagnostics.rank_normalised import rank_diagnostics, within_chains
from bdl.sampling.verdict.monitored import default_space, parameter_quantities, verdict_quantities

#: quantities whose R̂ and ESS the report computes (the worst of them are plotted)
BUDGET = 256


@dataclasses.dataclass(frozen=True)
class Quantities:
    """The monitored quantities of a run's healthy chains, worst R̂ first.

    Attributes:
        space: ``"parameter"`` or ``"function"``.
        chains: the chains they are of (those that never diverged).
        values: ``(chains, draws, k)`` in the quantities' own units (what the traces show);
            names: one per quantity.
        rhat, ess_bulk, ess_tail: per quantity (NaN where undefined), computed on ``diagnosed``.
        total: how many quantities there were to choose from.
        diagnosed: what R̂ and ESS were computed on (and the rank plots show): ``values`` with
            each chain's normal scores within itself in function space, as the verdict reads;
            ``values`` itself in parameter space.
    """

    space: str
    chains: np.ndarray
    values: np.ndarray
    names: list[str]
    rhat: np.ndarray
    ess_bulk: np.ndarray
    ess_tail: np.ndarray
    total: int
    diagnosed: np.ndarray

    @property
    def scored_within_chains(self) -> bool:
        """Whether R̂, ESS and the rank plots are of each chain's normal scores within itself."""
        return self.space == "function"

    def worst(self, count: int) -> list[int]:
        """The indices of the ``count`` quantities with the largest R̂ (undefined R̂ last).

        Args:
            count: how many.

        Returns:
            their indices, worst first.
        """
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
        diagnosed = within_chains(values)  # each chain judged within its own mode
        what = (
            "what the convergence verdict judges on held-out inputs — a classifier's "
            "per-example log predictive densities (test points whose log-likelihood "
            "hardly moves left out), a regressor's predictive means and log-likelihoods — "
            "traced in their own units; R̂ and ESS, as in the verdict, are of each chain's "
            "normal scores within itself (function space: a network's weights permute between "
            "chains, so each chain is judged within its own mode)"
        )
    else:
        values, names, total = parameter_quantities(positions, BUDGET)
        diagnosed = values
        what = "the sampled coordinates (parameter space)"
    rhat, bulk, tail = rank_diagnostics(diagnosed, single_chain=True)
    found = Quantities(space, healthy, values, names, rhat, bulk, tail, total, diagnosed)
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
    """Trace and rank figures of the ``count`` worst quantities, events marked.

    The trace figure has one row per quantity: on the left each chain's distribution, in a
    band of its own (a histogram on shared bins over the quantity's range, scaled to its own
    peak); on the right the traces, in the quantity's own units. The rank figure is ArviZ's
    ``plot_rank`` of what R̂ was computed on (:attr:`Quantities.diagnosed`).

    Args:
        samples: the draws (for the divergences and run-aways to mark).
        found: what :func:`monitored` returned.
        count: how many quantities to plot, the worst by R̂.

    Returns:
        (trace figure, rank figure).
    """
    import arviz as az
    import matplotlib.pyplot as plt

    chosen = found.worst(count)
    chains, draws = found.values.shape[:2]
    trace, axes = plt.subplots(
        len(chosen), 2, figsize=(11, 0.5 + 1.8 * len(chosen)), squeeze=False,
        gridspec_kw={"width_ratios": [1, 2.6]}, layout="constrained",
    )  # fmt: skip
    steps = np.arange(draws)
    for row, i in zip(axes, chosen, strict=True):
        values = found.values[:, :, i]
        distributions(row[0], values, found.chains)
        for k in range(chains):
            row[1].plot(steps, values[k], color=_colour(k), lw=0.8, alpha=0.85)
        row[1].set_xlim(0, max(draws - 1, 1))
        row[0].set_title(_label(found.names[i]), fontsize=9)
        row[1].set_title(
            f"R̂ {found.rhat[i]:.3f}, bulk ESS {found.ess_bulk[i]:.0f}"
            + (" (of each chain's scores within itself)" if found.scored_within_chains else ""),
            fontsize=8,
        )
        row[1].tick_params(labelsize=7)
    axes[-1, 0].set_xlabel("value (its own units)", fontsize=8)
    axes[-1, 1].set_xlabel("draw", fontsize=8)
    chain_index = {int(c): k for k, c in enumerate(found.chains)}
    for chain, draw, label in events(samples):
        colour = _colour(chain_index[chain]) if chain in chain_index else "k"
        style = "--" if label == "diverged" else ":"
        for row in axes:
            row[1].axvline(draw, color=colour, ls=style, lw=1.5)
        axes[0, 1].annotate(
            f"chain {chain} {label}", (draw, 1.0), xycoords=("data", "axes fraction"),
            fontsize=7, color="#c0392b", rotation=90, va="top",
        )  # fmt: skip
    labels = _unique([_label(found.names[i]) for i in chosen])
    posterior = {label: found.diagnosed[:, :, i] for label, i in zip(labels, chosen, strict=True)}
    data = az.from_dict(posterior=posterior)
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


def distributions(
    ax: Any, values: np.ndarray, chains: Sequence[int] | None = None, bins: int = 30
) -> None:
    """Each chain's draws of one quantity as a histogram in a band of its own.

    The bins are shared, over the range of every chain's finite draws, so the x-axis is the
    quantity's own scale; each histogram is scaled to its own peak, so that a chain that hardly
    moves (one narrow bar) does not flatten the others, as a density would.

    Args:
        ax: the matplotlib axes to draw in.
        values: ``(chains, draws)`` of one quantity.
        chains: the run's number of each chain (default 0, 1, …), for the labels.
        bins: the number of bins.
    """
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        ax.text(0.5, 0.5, "no finite draw", ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks([])
        return
    low, high = float(finite.min()), float(finite.max())
    if high <= low:
        pad = max(abs(low) * 1e-3, 1e-9)
        low, high = low - pad, high + pad
    edges = np.linspace(low, high, bins + 1)
    count = values.shape[0]
    number = list(range(count)) if chains is None else [int(c) for c in chains]
    for k in range(count):
        row = values[k][np.isfinite(values[k])]
        counts, _ = np.histogram(row, edges)
        height = counts / counts.max() * 0.85 if counts.max() > 0 else counts
        base = count - 1 - k  # the first chain on top
        ax.stairs(base + height, edges, baseline=base, fill=True, color=_colour(k), alpha=0.6)
    ax.set_xlim(low, high)
    ax.set_ylim(0, count)
    shown = range(count) if count <= 8 else range(0, count, -(-count // 8))
    ax.set_yticks([count - 1 - k + 0.4 for k in shown], [f"chain {number[k]}" for k in shown])
    ax.tick_params(labelsize=7)


def _colour(k: int) -> str:
    return f"C{k % 10}"


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

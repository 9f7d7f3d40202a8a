"""The report's temperature section: kinetic and configurational temperature against T.

* **Kinetic** (Wenzel et al. 2020, eq. 40): T̂_K = 2K/d from the kinetic energy K recorded with
  every draw (``samples.info["kinetic_energy"]``) over the d sampled coordinates, per chain and
  draw, with the central 99 % χ² band of eq. 42 at the draw's T
  (:func:`bdl.diagnostics.kinetic_temperature_band`). A kernel without momentum (SGLD) has none.
* **Configurational** (eq. 43): T̂_C = ⟨θ, ∇U(θ)⟩/d at draws of every healthy chain, with the
  full-data gradient of the compiled model (so it needs ``target``), on at most
  :data:`CONFIGURATIONAL_DRAWS` draws per chain spread over the run. Its law depends on U, so its
  band is the 99 % interval of its mean over the draws, ±z·sd/√ESS with the bulk ESS of the
  per-draw values (:func:`bdl.diagnostics.rank_normalised.rank_diagnostics`): T should lie in it.

Each figure is followed by one sentence that reads it (:func:`kinetic_reading`,
:func:`configurational_reading`): what the estimator says about the run, and what to change when
it is off. The figures use matplotlib's constrained layout, with their legends beside the axes.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from scipy import stats

from bdl.diagnostics.bias import SCALE_TOLERANCE
from bdl.diagnostics.rank_normalised import rank_diagnostics
from bdl.diagnostics.temperatures import kinetic_temperature_band
from bdl.report.page import figure, note, paragraph, table

#: draws per chain at which the configurational temperature is evaluated, at most
CONFIGURATIONAL_DRAWS = 32
#: the bands' coverage
LEVEL = 0.99
#: the share of draws in the kinetic band below which the momenta are read as off T (about
#: LEVEL of them lie in it at equilibrium)
IN_BAND = 0.95
#: the reading of a run at T = 0
UNTEMPERED = "T is 0 (optimisation, not sampling): there is no temperature to compare with."
#: chains named in a figure's legend, at most
LEGEND_CHAINS = 8


def temperature_parts(samples: Any, target: Any = None) -> list[str]:
    """The HTML of the temperature section (figures, table and notes).

    Args:
        samples: a :class:`bdl.Samples` holding draws.
        target: the compiled model or potential (for the configurational temperature).
    """
    if not samples.kept_draws or samples.num_draws == 0:
        return [note("the run kept no draws: no temperatures.")]
    import matplotlib.pyplot as plt

    healthy = np.asarray(samples.healthy_chains)
    d = sum(int(np.prod(np.shape(a)[2:])) for a in jax.tree.leaves(samples.positions))
    temperature = np.asarray(samples.info.get("temperature", np.ones(1)), np.float64)
    t_draw = temperature.mean(axis=0) if temperature.ndim == 2 else np.ones(samples.num_draws)
    t_mean = float(np.mean(t_draw))
    parts, rows = [], []
    adapted = "step_size" in (getattr(samples, "adapted", None) or {})
    kinetic = np.asarray(samples.info.get("kinetic_energy", np.zeros(1)), np.float64)
    if kinetic.ndim == 2 and np.any(kinetic > 0) and healthy.size:
        t_kin = 2.0 * kinetic / d
        low, high = kinetic_temperature_band(d, t_draw, LEVEL)
        fig, ax = plt.subplots(figsize=(10, 3.4), layout="constrained")
        draws = np.arange(samples.num_draws)
        ax.fill_between(draws, low, high, color="g", alpha=0.2, label=f"{LEVEL:.0%} χ² band")
        ax.plot(draws, t_draw, "k--", lw=1, label="T")
        for k, c in enumerate(healthy):
            label = f"chain {c}" if k < LEGEND_CHAINS else None
            ax.plot(draws, t_kin[c], lw=0.8, color=f"C{int(c) % 10}", label=label)
        _labels(ax, "kinetic temperature T̂_K", healthy.size)
        parts.append(
            figure(fig, "kinetic-temperature", f"T̂_K = 2K/d over d = {d} coordinates, per chain.")
        )
        inside = (low <= t_kin[healthy]) & (t_kin[healthy] <= high)
        fraction = float(np.mean(inside))
        ratio = float(np.mean(t_kin[healthy])) / t_mean if t_mean > 0 else float("nan")
        reading, good = kinetic_reading(fraction, ratio, adapted)
        parts.append(paragraph(reading, "ok" if good else "fail"))
        rows.append(
            [
                "kinetic T̂_K",
                float(np.mean(t_kin[healthy])),
                f"[{float(np.mean(low)):.4g}, {float(np.mean(high)):.4g}] (χ², {LEVEL:.0%})",
                t_mean,
                f"{fraction:.1%} of draws in band ({LEVEL:.0%} at equilibrium)",
            ]
        )
    else:
        parts.append(
            note(
                "no kinetic temperature: the kernel has no momentum (its kinetic energy is "
                "zero), or no chain ran without diverging."
            )
        )
    if target is None:
        parts.append(note("no configurational temperature: it needs the gradient, pass target=."))
    elif healthy.size:
        conf, at = _configurational(samples, target, healthy, d)
        mean = float(np.mean(conf))
        _, ess, _ = rank_diagnostics(conf[:, :, None], single_chain=True)
        ess = float(ess[0]) if np.isfinite(ess[0]) else float(conf.size)
        half = float(stats.norm.ppf(0.5 + LEVEL / 2) * np.std(conf) / np.sqrt(max(ess, 1.0)))
        fig, ax = plt.subplots(figsize=(10, 3.4), layout="constrained")
        ax.axhspan(mean - half, mean + half, color="C0", alpha=0.2, label=f"{LEVEL:.0%} CI of mean")
        ax.axhline(mean, color="C0", lw=1, label="mean T̂_C")
        ax.plot(at, t_draw[at], "k--", lw=1, label="T")
        for k, c in enumerate(healthy):
            label = f"chain {c}" if k < LEGEND_CHAINS else None
            ax.plot(at, conf[k], "o-", ms=3, lw=0.6, color=f"C{int(c) % 10}", label=label)
        _labels(ax, "configurational temperature T̂_C", healthy.size)
        parts.append(
            figure(
                fig,
                "configurational-temperature",
                f"T̂_C = ⟨θ, ∇U(θ)⟩/d with the full-data gradient at {at.size} draws per chain.",
            )
        )
        ok = mean - half <= t_mean <= mean + half
        ratio = mean / t_mean if t_mean > 0 else float("nan")
        reading, good = configurational_reading(ratio, ok, adapted)
        parts.append(paragraph(reading, "ok" if good else "fail"))
        rows.append(
            [
                "configurational T̂_C",
                mean,
                f"[{mean - half:.4g}, {mean + half:.4g}] (mean, {LEVEL:.0%})",
                t_mean,
                "T inside: on target" if ok else "T outside: off target (see below)",
            ]
        )
    if rows:
        parts.insert(0, table(["estimator", "mean", "band", "target T", "check"], rows))
    return parts


def cooler(adapted: bool) -> str:
    """What to change for draws hotter than π_T.

    Args:
        adapted: whether warm-up chose the step size (``samples.adapted``).

    Returns:
        the advice, as a clause.
    """
    if adapted:
        step = (
            "a step size below the one warm-up chose (samples.adapted['step_size']; "
            "--hyper step_size=...)"
        )
    else:
        step = (
            "a smaller step size (or learning rate), or let warm-up adapt it "
            "(bdl.kernels.get(name) without a step size)"
        )
    return f"{step}; with minibatches, a larger batch_size"


def kinetic_reading(fraction: float, ratio: float, adapted: bool = False) -> tuple[str, bool]:
    """One sentence reading the kinetic temperature, and whether it is on target.

    Args:
        fraction: the share of the healthy chains' draws inside the χ² band.
        ratio: the mean T̂_K over the mean T.
        adapted: whether warm-up chose the step size (for the advice).

    Returns:
        (the sentence, whether the momenta are at T).
    """
    if not np.isfinite(ratio):
        return UNTEMPERED, True
    share = f"{fraction:.0%} of the draws lie in the band ({LEVEL:.0%} would at equilibrium)"
    if fraction >= IN_BAND:
        return (
            f"Kinetic temperature: {share}: the momenta are at temperature T, as the dynamics "
            "require; nothing to do.",
            True,
        )
    if ratio > 1:
        return (
            f"Kinetic temperature: only {share}, and T̂_K runs hot ({ratio:.3g}·T on average): "
            "the momenta are hotter than T, heated by the integration error of a step too "
            "large for its friction and by minibatch gradient noise, and they heat the "
            f"positions too. To do: {cooler(adapted)}; or a larger friction.",
            False,
        )
    return (
        f"Kinetic temperature: only {share}, and T̂_K runs cold ({ratio:.3g}·T on average): "
        "the momenta lose energy faster than the injected noise restores it, so the kernel's "
        "friction, mass or noise do not match (a kernel built by hand: bdl check NAME tests its "
        "recipe). To do: a longer burn-in if the chains started cold, else check the kernel.",
        False,
    )


def configurational_reading(ratio: float, inside: bool, adapted: bool = False) -> tuple[str, bool]:
    """One sentence reading the configurational temperature, and whether it is on target.

    Args:
        ratio: the mean T̂_C over the mean T (1 at equilibrium).
        inside: whether T lies inside the interval of T̂_C's mean.
        adapted: whether warm-up chose the step size (for the advice).

    Returns:
        (the sentence, whether the positions are spread as π_T's).
    """
    if not np.isfinite(ratio):
        return UNTEMPERED, True
    spread = abs(np.sqrt(max(ratio, 0.0)) - 1.0)
    head = f"Configurational temperature: T̂_C averages {ratio:.3g}·T (1 at equilibrium)"
    if inside:
        return (
            f"{head}, within its Monte Carlo error of T: the positions are spread as π_T's; "
            "nothing to do.",
            True,
        )
    if spread <= SCALE_TOLERANCE:
        return (
            f"{head}: T lies outside the interval of its mean, so the gap is not Monte Carlo "
            f"noise, but it amounts to a spread {spread:.1%} off π_T's (√(T̂_C/T)), within the "
            f"{SCALE_TOLERANCE:.0%} the bias check tolerates. To do: nothing; for less, "
            f"{cooler(adapted)}.",
            True,
        )
    if ratio > 1:
        return (
            f"{head}, above T beyond its Monte Carlo error: the positions are spread more widely "
            f"than π_T's, as if sampled at {ratio:.3g}·T (sds about {np.sqrt(ratio):.3g}× too "
            f"wide): the bias of a finite step and noisy gradients. To do: {cooler(adapted)}.",
            False,
        )
    return (
        f"{head}, below T beyond its Monte Carlo error: the positions have not yet spread "
        "over π_T's typical set (chains that started near a mode, e.g. at a network's own "
        "initialisation, read far below T and rise as they spread). To do: a longer run and "
        'burn-in, or start from the prior (init="prior"); if it stays below T over a long run, '
        "the kernel injects too little noise (bdl check NAME).",
        False,
    )


def _labels(ax: Any, ylabel: str, chains: int) -> None:
    """Axis labels and the legend beside the axes, off the data."""
    ax.set_xlabel("draw")
    ax.set_ylabel(ylabel)
    ax.legend(
        fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
        title=None if chains <= LEGEND_CHAINS else f"first {LEGEND_CHAINS} of {chains} chains",
        title_fontsize=7,
    )  # fmt: skip


def _configurational(
    samples: Any, target: Any, healthy: np.ndarray, d: int
) -> tuple[np.ndarray, np.ndarray]:
    """T̂_C per healthy chain at evenly spread draws: (values (chains, k), draw indices (k,))."""
    count = min(CONFIGURATIONAL_DRAWS, samples.num_draws)
    at = np.unique(np.linspace(0, samples.num_draws - 1, count).round().astype(int))
    positions = jax.tree.map(lambda a: np.asarray(a)[healthy][:, at], samples.positions)
    flat = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), positions)

    def one(theta: Any) -> jax.Array:
        _, grad = target.energy_and_grad(theta)
        pairs = zip(jax.tree.leaves(theta), jax.tree.leaves(grad), strict=True)
        dots = [(x * g).sum() for x, g in pairs]
        return sum(dots) / d

    values = np.asarray(jax.jit(jax.vmap(one))(flat), np.float64)
    return values.reshape(healthy.size, at.size), at

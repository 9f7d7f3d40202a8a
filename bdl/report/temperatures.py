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
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from scipy import stats

from bdl.diagnostics.rank_normalised import rank_diagnostics
from bdl.diagnostics.temperatures import kinetic_temperature_band
from bdl.report.page import figure, note, table

#: draws per chain at which the configurational temperature is evaluated, at most
CONFIGURATIONAL_DRAWS = 32
#: the bands' coverage
LEVEL = 0.99


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
    kinetic = np.asarray(samples.info.get("kinetic_energy", np.zeros(1)), np.float64)
    if kinetic.ndim == 2 and np.any(kinetic > 0) and healthy.size:
        t_kin = 2.0 * kinetic / d
        low, high = kinetic_temperature_band(d, t_draw, LEVEL)
        fig, ax = plt.subplots(figsize=(10, 3.2))
        draws = np.arange(samples.num_draws)
        ax.fill_between(draws, low, high, color="g", alpha=0.2, label=f"{LEVEL:.0%} χ² band")
        ax.plot(draws, t_draw, "k--", lw=1, label="T")
        for c in range(t_kin.shape[0]):
            ax.plot(draws, t_kin[c], lw=0.8, label=f"chain {c}" if c < 8 else None)
        ax.set_xlabel("draw")
        ax.set_ylabel("kinetic temperature T̂_K")
        ax.legend(fontsize=7, ncol=5, loc="upper right")
        parts.append(
            figure(fig, "kinetic-temperature", f"T̂_K = 2K/d over d = {d} coordinates, per chain.")
        )
        inside = (low <= t_kin[healthy]) & (t_kin[healthy] <= high)
        rows.append(
            [
                "kinetic T̂_K",
                float(np.mean(t_kin[healthy])),
                f"[{float(np.mean(low)):.4g}, {float(np.mean(high)):.4g}] (χ², {LEVEL:.0%})",
                t_mean,
                f"{float(np.mean(inside)):.1%} of draws in band",
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
        fig, ax = plt.subplots(figsize=(10, 3.2))
        ax.axhspan(mean - half, mean + half, color="C0", alpha=0.2, label=f"{LEVEL:.0%} CI of mean")
        ax.axhline(mean, color="C0", lw=1, label="mean T̂_C")
        ax.plot(at, t_draw[at], "k--", lw=1, label="T")
        for k, c in enumerate(healthy):
            ax.plot(at, conf[k], "o-", ms=3, lw=0.6, color=f"C{int(c) % 10}", label=f"chain {c}")
        ax.set_xlabel("draw")
        ax.set_ylabel("configurational temperature T̂_C")
        ax.legend(fontsize=7, ncol=5, loc="upper right")
        parts.append(
            figure(
                fig,
                "configurational-temperature",
                f"T̂_C = ⟨θ, ∇U(θ)⟩/d with the full-data gradient at {at.size} draws per chain.",
            )
        )
        ok = mean - half <= t_mean <= mean + half
        rows.append(
            [
                "configurational T̂_C",
                mean,
                f"[{mean - half:.4g}, {mean + half:.4g}] (mean, {LEVEL:.0%})",
                t_mean,
                "T inside" if ok else "T outside",
            ]
        )
    if rows:
        parts.insert(0, table(["estimator", "mean", "band", "target T", "check"], rows))
    return parts


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

"""Validation figures: marginals and a pair plot (parameters), predictive agreement or bands
(networks), and the kinetic-temperature trace with its χ² band (momentum kernels)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bdl.compile.compiled_model import CompiledModel
from bdl.compile.named_draws import named_draws
from bdl.diagnostics import kinetic_temperature_band
from bdl.sampling.samples import Samples
from bdl.utils.figures import pyplot, save_figure
from bdl.utils.trees import parameter_names
from bdl.validation.compare import _mixture_moments, predictive_per_sample
from bdl.validation.reference import Reference, evaluation_inputs, parameter_summaries


def plot_validation(
    path: Path,
    target: Any,
    samples: Samples,
    reference: Reference,
    title: str,
    labels: dict[str, Any] | None = None,
) -> Path:
    """The validation figure; parameters are named as everywhere else
    (:func:`bdl.utils.trees.parameter_names`, ``labels``: feature names by path)."""
    plt = pyplot()

    kinetic = np.asarray(samples.info.get("kinetic_energy", np.zeros(1)), np.float64)
    show_kinetic = bool(np.any(kinetic > 0))
    ncols = 3 + int(show_kinetic)
    fig, axes = plt.subplots(1, ncols, figsize=(4.2 * ncols, 3.6))
    if reference.space == "parameter":
        x, r, names = _constrained_columns(target, samples.positions, reference.positions, labels)
        for j, ax in zip(range(min(2, x.shape[1])), axes[:2], strict=False):
            bins = np.linspace(
                min(x[:, j].min(), r[:, j].min()), max(x[:, j].max(), r[:, j].max()), 40
            )
            ax.hist(r[:, j], bins, density=True, alpha=0.5, label="NUTS")
            ax.hist(x[:, j], bins, density=True, histtype="step", lw=2, label=samples.kernel)
            ax.set_title(names[j])
            ax.legend()
        if x.shape[1] > 1:
            axes[2].scatter(r[:, 0], r[:, 1], s=2, alpha=0.3, label="NUTS")
            axes[2].scatter(x[:, 0], x[:, 1], s=2, alpha=0.3, label=samples.kernel)
            axes[2].set_title(f"pair: {names[0]} vs {names[1]}")
            axes[2].legend()
    elif isinstance(target, CompiledModel) and target.likelihood.task == "classification":
        p = np.asarray(predictive_per_sample(target, samples.positions).mean(0))
        q = np.asarray(predictive_per_sample(target, reference.positions).mean(0))
        axes[0].scatter(q.ravel(), p.ravel(), s=3, alpha=0.4)
        axes[0].plot([0, 1], [0, 1], "k--", lw=1)
        axes[0].set_xlabel("NUTS predictive probability")
        axes[0].set_ylabel(f"{samples.kernel} predictive probability")
        axes[1].hist(np.abs(p - q).sum(-1) / 2, 40)
        axes[1].set_title("per-input total variation")
        axes[2].hist(q.max(-1), 30, alpha=0.5, label="NUTS")
        axes[2].hist(p.max(-1), 30, histtype="step", lw=2, label=samples.kernel)
        axes[2].set_title("confidence (max probability)")
        axes[2].legend()
    else:
        x, _ = evaluation_inputs(target, 500)
        km, ks = (np.asarray(a) for a in _mixture_moments(target, samples.positions))
        rm, rs = (np.asarray(a) for a in _mixture_moments(target, reference.positions))
        if x.shape[-1] == 1:
            order = np.argsort(np.asarray(x)[:, 0])
            xs = np.asarray(x)[order, 0]
            axes[0].fill_between(
                xs, (rm - 2 * rs)[order], (rm + 2 * rs)[order], alpha=0.3, label="NUTS ±2sd"
            )
            axes[0].plot(xs, km[order], lw=2, label=f"{samples.kernel} mean")
            axes[0].plot(xs, (km - 2 * ks)[order], "--", lw=1, color="C1")
            axes[0].plot(xs, (km + 2 * ks)[order], "--", lw=1, color="C1")
            xt = np.asarray(target.x_train)[:, 0]
            axes[0].scatter(xt, np.asarray(target.y_train), s=6, color="k", label="train")
            axes[0].legend(fontsize=7)
            axes[0].set_title("predictive bands")
        axes[1].scatter(rm, km, s=3)
        axes[1].set_title("predictive mean: NUTS vs kernel")
        axes[2].scatter(rs, ks, s=3)
        axes[2].set_title("predictive sd: NUTS vs kernel")
    if show_kinetic:
        d = sum(int(np.prod(a.shape[2:])) for a in _leaves(samples.positions))
        t_kin = 2.0 * kinetic / d
        temperature = float(np.asarray(samples.info["temperature"]).mean())
        low, high = kinetic_temperature_band(d, temperature)
        for c in range(t_kin.shape[0]):
            axes[-1].plot(t_kin[c], lw=0.7)
        axes[-1].axhspan(float(low), float(high), alpha=0.2, color="g", label="99% χ² band")
        axes[-1].set_title("kinetic temperature")
        axes[-1].legend()
    return save_figure(fig, path, title, dpi=110)


def _constrained_columns(
    target: Any, draws: Any, reference: Any, labels: dict[str, Any] | None
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(kernel draws, NUTS draws, names) as (draws, columns), in the model's own constrained
    parameters (σ, not log σ; a simplex's K weights) for a compiled model, leaving out
    coordinates NUTS never moves (a correlation factor's fixed entries)."""
    if isinstance(target, CompiledModel):
        draws, reference = named_draws(target, draws), named_draws(target, reference)
    x = parameter_summaries(draws)
    r = parameter_summaries(reference)
    x, r = x.reshape(-1, x.shape[-1]), r.reshape(-1, r.shape[-1])
    names = parameter_names(reference, batch_dims=2, labels=labels)
    moving = np.flatnonzero(np.ptp(r, axis=0) > 0)
    return x[:, moving], r[:, moving], [names[j] for j in moving]


def _leaves(tree: Any) -> list:
    import jax

    return jax.tree.leaves(tree)


def plot_case(
    path: Path,
    target: Any,
    reference: Reference,
    drawn: dict[str, Samples],
    title: str,
    labels: dict[str, Any] | None = None,
) -> Path:
    """One figure per suite case, one panel per kernel, NUTS in every panel.

    Parameter space: the marginal of the parameter the kernel gets most wrong (largest
    standardised mean error), NUTS filled and the kernel as a line. Classifiers: each held-out
    input's BMA class probabilities, NUTS against the kernel (the diagonal is agreement).
    Regression networks: the NUTS predictive mean ± 2 sd as a band, the kernel's as lines, and
    the training data — for 1-D inputs the epistemic band across the gap.
    """
    plt = pyplot()

    names = list(drawn)
    ncols = min(5, len(names))
    nrows = -(-len(names) // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(3.3 * ncols, 2.8 * nrows), squeeze=False, sharex=False
    )
    classification = (
        isinstance(target, CompiledModel) and target.likelihood.task == "classification"
    )
    if reference.space == "parameter":
        r = parameter_summaries(reference.positions)
        r = r.reshape(-1, r.shape[-1])
        r_mean, r_sd = r.mean(0), r.std(0)
        parameters = parameter_names(reference.positions, batch_dims=2, labels=labels)
    elif classification:
        q = np.asarray(predictive_per_sample(target, reference.positions).mean(0))
    else:
        x, _ = evaluation_inputs(target, 500)
        rm, rs = (np.asarray(a) for a in _mixture_moments(target, reference.positions))
    for ax, name in zip(axes.ravel(), names, strict=False):
        samples = drawn[name]
        if reference.space == "parameter":
            k = parameter_summaries(samples.positions)
            k = k.reshape(-1, k.shape[-1])
            j = int(np.nanargmax(np.abs((k.mean(0) - r_mean) / r_sd)))
            lo = min(np.nanmin(k[:, j]), r[:, j].min())
            hi = max(np.nanmax(k[:, j]), r[:, j].max())
            bins = np.linspace(lo, hi, 40) if np.isfinite(lo + hi) else 40
            ax.hist(r[:, j], bins, density=True, alpha=0.4, color="C0", label="NUTS")
            ax.hist(k[:, j], bins, density=True, histtype="step", lw=1.5, color="C1", label=name)
            ax.set_title(f"{name}: {parameters[j]}", fontsize=9)
        elif classification:
            p = np.asarray(predictive_per_sample(target, samples.positions).mean(0))
            ax.scatter(q.ravel(), p.ravel(), s=2, alpha=0.3, color="C1")
            ax.plot([0, 1], [0, 1], "k--", lw=0.8)
            ax.set_title(f"{name} vs NUTS probabilities", fontsize=9)
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
        else:
            km, ks = (np.asarray(a) for a in _mixture_moments(target, samples.positions))
            xs = np.asarray(x)[:, 0]
            order = np.argsort(xs)
            xs = xs[order]
            ax.fill_between(
                xs,
                (rm - 2 * rs)[order],
                (rm + 2 * rs)[order],
                alpha=0.3,
                color="C0",
                label="NUTS ±2 sd",
            )
            ax.plot(xs, km[order], color="C1", lw=1.2, label=f"{name} mean ±2 sd")
            ax.plot(xs, (km - 2 * ks)[order], "--", color="C1", lw=0.8)
            ax.plot(xs, (km + 2 * ks)[order], "--", color="C1", lw=0.8)
            ax.scatter(np.asarray(target.x_train)[:, 0], np.asarray(target.y_train), s=3, color="k")
            ax.set_ylim(float(np.min(rm - 4 * rs)), float(np.max(rm + 4 * rs)))
            ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
        if not classification:
            ax.legend(fontsize=6)
    for ax in axes.ravel()[len(names) :]:
        ax.axis("off")
    return save_figure(fig, path, title, dpi=90, title_size=11)

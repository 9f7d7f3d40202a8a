"""The report's sections that compare the draws with something else: NUTS (the kernel's marginals
over NUTS's and the pass/fail table of :func:`bdl.validate`) and held-out data (the BMA's
accuracy, NLL and ECE against the number of draws, :mod:`bdl.evaluation`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import numpy as np

from bdl.evaluation.running import RunningBMA
from bdl.evaluation.scoring import score_parts
from bdl.report.page import figure, image, note, paragraph, table
from bdl.sampling.verdict.monitored import function_quantities, parameter_quantities

#: marginals shown, at most: those where the kernel and NUTS differ most
MARGINALS = 6
#: quantities compared when choosing them
_CANDIDATES = 64


def validation_parts(validation: Any, target: Any = None) -> list[str]:
    """The pass/fail table of a :class:`bdl.validation.ValidationReport` and the marginals.

    Args:
        validation: what :func:`bdl.validate` returned.
        target: the compiled model (for a network's predictions; a model is compared in its
            coordinates without it).
    """
    passed = bool(validation.passed)
    reference = validation.reference
    parts = [
        paragraph(
            f"{validation.kernel} vs NUTS in {validation.space} space: "
            + ("PASS" if passed else "FAIL"),
            "ok" if passed else "fail",
        ),
        paragraph(
            f"NUTS reference: max R̂ {reference.max_rhat:.3f}, min bulk ESS {reference.min_ess:.0f}."
        ),
    ]
    rows = [
        [r.name, r.shown() if r.nonnegative and r.value < 0 else float(r.value),
         None if r.reference is None else float(r.reference), r.threshold,
         "reported" if r.passed is None else bool(r.passed)]
        for r in validation.rows
    ]  # fmt: skip
    parts.append(table(["quantity", "kernel", "NUTS", "threshold", "verdict"], rows))
    parts.append(
        note(
            "NUTS: its own value of the quantity, by the same rules (blank where the row compares "
            "the kernel with NUTS). A distance whose unbiased estimate dips below 0 is shown as "
            "≈ 0."
        )
    )
    parts.append(_marginals(validation, target))
    plot = getattr(validation, "plot", None)
    mime = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg"}
    if plot is not None and Path(plot).is_file() and Path(plot).suffix.lower() in mime:
        parts.append(
            image(
                Path(plot).read_bytes(),
                "validation-plot",
                f"the figure bdl.validate wrote ({Path(plot).name})",
                mime[Path(plot).suffix.lower()],
            )
        )
    return parts


def _marginals(validation: Any, target: Any) -> str:
    """Histograms of the kernel's and NUTS's draws of the quantities where they differ most."""
    import matplotlib.pyplot as plt

    samples, reference = validation.samples, validation.reference
    healthy = np.asarray(samples.healthy_chains)
    if healthy.size == 0:
        return note("every chain of the kernel diverged: no marginals to compare.")
    mine = jax.tree.map(lambda a: np.asarray(a)[healthy], samples.positions)
    if reference.space == "function":
        if target is None:
            return note("a network's marginals are of its predictions: pass target=.")
        x, names, _ = function_quantities(target, mine, _CANDIDATES)
        r, _, _ = function_quantities(target, reference.positions, _CANDIDATES)
    else:
        x, names, _ = parameter_quantities(mine, _CANDIDATES)
        r, _, _ = parameter_quantities(reference.positions, _CANDIDATES)
    x, r = x.reshape(-1, x.shape[-1]), r.reshape(-1, r.shape[-1])
    spread = np.where(r.std(axis=0) > 0, r.std(axis=0), 1.0)
    gap = np.abs(x.mean(axis=0) - r.mean(axis=0)) / spread
    chosen = np.argsort(-gap, kind="stable")[:MARGINALS]
    columns = min(3, chosen.size)
    rows = -(-chosen.size // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.8 * columns, 2.8 * rows), squeeze=False)
    for ax, j in zip(axes.ravel(), chosen, strict=False):
        both = np.concatenate([x[:, j], r[:, j]])
        bins = np.linspace(both.min(), both.max(), 40) if np.ptp(both) > 0 else 10
        ax.hist(r[:, j], bins, density=True, alpha=0.45, label="NUTS")
        ax.hist(x[:, j], bins, density=True, histtype="step", lw=2, label=samples.kernel)
        ax.set_title(f"{names[j]}\n|Δmean|/sd {gap[j]:.3f}", fontsize=8)
    for ax in axes.ravel()[chosen.size :]:
        ax.set_visible(False)
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return figure(
        fig,
        "marginals",
        f"the {chosen.size} quantities whose kernel and NUTS means differ most (in NUTS sd).",
    )


def bma_parts(samples: Any, target: Any = None) -> list[str]:
    """The test-set BMA against the draws per chain: ``samples.evaluation`` (scored while
    sampling) or, failing that, the kept draws scored on the target's test split."""
    evaluation = getattr(samples, "evaluation", None)
    source = "scored while sampling"
    if evaluation is None:
        x_test = getattr(target, "x_test", None)
        if target is None or x_test is None or not hasattr(target, "predict"):
            why = "pass target=, " if target is None else "the model has no test split, "
            return [note(f"no held-out BMA: {why}or sample with evaluate=True.")]
        if not samples.kept_draws or samples.num_draws == 0:
            return [note("no held-out BMA: the run kept no draws and did not evaluate.")]
        evaluation = score_parts(target, samples, [samples], RunningBMA())
        source = "scored from the kept draws for this report"
    if not evaluation.draws.size:
        return [note("no held-out BMA: no draw was scored.")]
    import matplotlib.pyplot as plt

    names = [m for m in ("accuracy", "rmse", "nll", "ece") if m in evaluation.curve]
    fig, axes = plt.subplots(1, len(names), figsize=(3.6 * len(names), 3.0), squeeze=False)
    evaluation.plot(metrics=names, ax=axes[0])
    fig.tight_layout()
    rows = [[k, float(v)] for k, v in evaluation.metrics.items()]
    return [
        table(["test metric (BMA of every healthy draw)", "value"], rows),
        figure(
            fig,
            "bma-curve",
            f"the BMA of the first k draws per chain on {evaluation.num_test} test inputs "
            f"({source}).",
        ),
    ]

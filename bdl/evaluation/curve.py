"""The BMA of the first k draws against k (Kim et al. 2024, Fig. 1), and its plot.

``bdl.sample(..., evaluate=True)`` computes the curve while sampling, without keeping the draws
(``samples.evaluation``); :func:`bdl.evaluation.bma_curve` (:mod:`bdl.evaluation.kept_draws`)
computes the same curve from draws already kept. Both end in :func:`evaluation_result`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from bdl.evaluation.running import CLASSIFICATION_METRICS, REGRESSION_METRICS


@dataclasses.dataclass(frozen=True, eq=False)
class BMAEvaluation:
    """A run's Bayesian model average on a test set, and how it grew with the draws.

    Attributes:
        metrics: the BMA over all draws of the chains that never diverged (the draws of
            ``samples.flat(healthy=True)``): accuracy, NLL, ECE and Brier score for a
            classifier, RMSE and NLL for a regressor.
        draws: per curve point, k: the draws per chain in the BMA, ``(points,)``.
        chains: per point, the number of chains averaged (those not diverged by then).
        steps: per point, the step after which the k-th draw was taken.
        curve: metric name → its value at each point, ``(points,)``.
        num_test: the number of test inputs.

    Point k is the BMA that the run would have returned had it stopped after its k-th draw:
    the first k draws of every chain that had not diverged by then. A chain that diverges later
    stays in the earlier points and leaves the later ones and ``metrics``.
    """

    metrics: dict[str, float]
    draws: np.ndarray
    chains: np.ndarray
    steps: np.ndarray
    curve: dict[str, np.ndarray]
    num_test: int

    def as_dict(self) -> dict[str, Any]:
        """The arrays and numbers held here (what ``Samples.save`` writes).

        Returns:
            The fields by name, as arrays and numbers.
        """
        return {
            "metrics": {k: np.asarray(v, np.float64) for k, v in self.metrics.items()},
            "draws": self.draws,
            "chains": self.chains,
            "steps": self.steps,
            "curve": self.curve,
            "num_test": np.asarray(self.num_test, np.int64),
        }

    @classmethod
    def from_dict(cls, tree: dict[str, Any]) -> BMAEvaluation:
        """The inverse of :meth:`as_dict` (metrics in the order the running BMA gives them).

        Args:
            tree: what :meth:`as_dict` returned (or a file's copy of it).

        Returns:
            The evaluation.
        """
        order = list(REGRESSION_METRICS if "rmse" in tree["metrics"] else CLASSIFICATION_METRICS)
        names = sorted(tree["metrics"], key=lambda k: order.index(k) if k in order else len(order))
        return cls(
            metrics={k: float(tree["metrics"][k]) for k in names},
            draws=np.asarray(tree["draws"]),
            chains=np.asarray(tree["chains"]),
            steps=np.asarray(tree["steps"]),
            curve={k: np.asarray(tree["curve"][k]) for k in names},
            num_test=int(tree["num_test"]),
        )

    def plot(self, metrics: Sequence[str] | None = None, ax: Any = None, label: str | None = None):
        """Each metric of the BMA against the draws per chain, one panel per metric (Kim et al.
        2024, Fig. 1). Needs matplotlib.

        Args:
            metrics: the metrics to plot (default accuracy and NLL; RMSE and NLL for a regressor).
            ax: an Axes or a sequence of them, one per metric, to draw into (another run's curve on
                the same axes compares samplers).
            label: the curve's label in the legend.

        Returns:
            The axes drawn into, one per metric.

        Raises:
            ImportError: matplotlib is not installed.
            ValueError: ``ax`` does not hold one Axes per metric.
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError:
            raise ImportError(
                "BMAEvaluation.plot needs matplotlib: pip install matplotlib."
            ) from None
        names = list(metrics or [m for m in ("accuracy", "rmse", "nll") if m in self.curve])
        unknown = [m for m in names if m not in self.curve]
        if unknown:
            raise ValueError(
                f"BMAEvaluation.plot(metrics=...): {unknown} not among {sorted(self.curve)}."
            )
        if ax is None:
            _, ax = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.2), squeeze=False)
            ax = ax[0]
        axes = list(np.atleast_1d(ax))
        if len(axes) != len(names):
            raise ValueError(f"plot: {len(names)} metrics need {len(names)} axes; got {len(axes)}.")
        for a, name in zip(axes, names, strict=True):
            a.plot(self.draws, self.curve[name], label=label)
            a.set_xlabel("draws per chain in the BMA")
            a.set_ylabel(f"test {name.upper() if name in ('nll', 'ece', 'rmse') else name}")
            if label is not None:
                a.legend()
        return axes

    def __repr__(self) -> str:
        shown = "  ".join(f"{k} {v:.4f}" for k, v in self.metrics.items())
        return (
            f"BMAEvaluation({shown}; {int(self.draws[-1]) if self.draws.size else 0} draws per "
            f"chain, {self.num_test} test inputs)"
        )


def curve_rows(rows: np.ndarray, steps: np.ndarray, recorded: np.ndarray) -> np.ndarray:
    """The curve points of one chunk, ``(points, 3 + metrics)``: the device's rows (draws per
    chain, chains, metrics...) with the draw's step put third, for the draws that were
    recorded (a sample step) and averaged at least one chain."""
    rows = np.asarray(rows, np.float64)
    keep = np.asarray(recorded, bool) & (rows[:, 1] > 0)
    return np.column_stack([rows[keep, :2], np.asarray(steps)[keep], rows[keep, 2:]])


def evaluation_result(
    names: Sequence[str], rows: Sequence[np.ndarray], final: np.ndarray, num_test: int
) -> BMAEvaluation:
    """A :class:`BMAEvaluation` from the chunks' curve points and the final metrics."""
    rows = np.concatenate(list(rows)) if len(rows) else np.zeros((0, 3 + len(names)), np.float64)
    return BMAEvaluation(
        metrics={k: float(v) for k, v in zip(names, np.asarray(final), strict=True)},
        draws=rows[:, 0].astype(np.int64),
        chains=rows[:, 1].astype(np.int64),
        steps=rows[:, 2].astype(np.int64),
        curve={k: rows[:, 3 + i] for i, k in enumerate(names)},
        num_test=num_test,
    )

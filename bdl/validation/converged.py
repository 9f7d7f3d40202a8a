"""The kernel run's own convergence as rows of ``bdl validate``'s table.

A kernel run that has not converged (:mod:`bdl.diagnostics.convergence`: rank-normalised
R̂ < 1.01, bulk and tail ESS of at least 100 per chain, no stuck chain) says nothing about the
kernel's target: its draws are not yet draws of any distribution. :func:`convergence_rows` turns
the verdict ``bdl.sample`` reached (``samples.convergence``) into gated rows, and
:func:`bdl.validate` compares against NUTS only when they all pass; otherwise the run fails the
validation with these rows as the reason. The NUTS column holds the same verdict of NUTS's own
draws (:func:`reference_convergence`): what a sampler that mixes reaches on the same quantities.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bdl.diagnostics.convergence import MIN_DRAWS, Convergence
from bdl.validation.row import Row

__all__ = ["convergence_rows", "reference_convergence"]


def convergence_rows(verdict: Convergence | None, nuts: Convergence | None = None) -> list[Row]:
    """Gated rows for ``verdict`` (none when there is no verdict).

    Args:
        verdict: the kernel run's verdict (``samples.convergence``).
        nuts: the same verdict of NUTS's draws, for the NUTS column (:func:`reference_convergence`).

    Returns:
        The rows: R̂, bulk and tail ESS, stuck chains (and non-finite quantities), each failed
        one followed by where it failed.
    """
    if verdict is None:
        return []
    if verdict.draws < MIN_DRAWS:
        return [Row("kernel draws per chain", float(verdict.draws), None, f">= {MIN_DRAWS}", False)]

    def own(field: str) -> float | None:
        return None if nuts is None else float(getattr(nuts, field))

    rows = [
        Row(
            f"kernel max R̂ ({verdict.space} space)",
            verdict.max_rhat,
            own("max_rhat"),
            f"< {verdict.rhat_max}",
            not verdict.max_rhat >= verdict.rhat_max,  # NaN: every quantity was constant
        ),
        Row(
            "kernel min bulk ESS (convergence)",
            verdict.min_ess_bulk,
            own("min_ess_bulk"),
            f">= {verdict.min_ess:.0f}",
            not verdict.min_ess_bulk < verdict.min_ess,
        ),
        Row(
            "kernel min tail ESS (convergence)",
            verdict.min_ess_tail,
            own("min_ess_tail"),
            f">= {verdict.min_ess:.0f}",
            not verdict.min_ess_tail < verdict.min_ess,
        ),
        Row(
            "kernel stuck chains",
            float(len(verdict.stuck)),
            None if nuts is None else float(len(nuts.stuck)),
            "= 0",
            not verdict.stuck,
        ),
    ]
    if verdict.nonfinite:
        rows.append(
            Row("kernel non-finite quantities", float(verdict.nonfinite), None, "= 0", False)
        )
    worst = [verdict.max_rhat_at, verdict.min_ess_bulk_at, verdict.min_ess_tail_at]
    for row, at in zip(list(rows[:3]), worst, strict=True):
        if row.passed is False and at:  # where, as compare's "(worst parameter: ...)" rows
            rows.insert(rows.index(row) + 1, Row(f"  (at {at})", row.value, None, "", None))
    bias = verdict.bias
    if bias is not None and not bias.temperatures_tested:
        # what the run's own bias check said without a reference: reported beside the
        # comparison with NUTS, which measures the same error directly and is what is gated
        rows.append(
            Row(
                "kernel spread / target's (Stein, no reference)",
                bias.spread,
                None,
                f"reported: {'ok' if bias.ok else 'BIASED'} (1 ± {bias.scale_tolerance:g})",
                None,
            )
        )
    return rows


def reference_convergence(target: Any, positions: Any) -> Convergence | None:
    """The convergence verdict of NUTS's draws, by the rules every kernel run is judged by
    (:func:`bdl.sampling.check_convergence`: the same quantities, R̂, ESS and stuck chains),
    for the NUTS column of the table.

    Args:
        target: the compiled model or potential.
        positions: NUTS's draws, ``(chain, draw, ...)`` per leaf.

    Returns:
        The verdict, or ``None`` when there is nothing to judge (no draws).
    """
    import jax

    from bdl.sampling import Samples, check_convergence

    leaves = jax.tree.leaves(positions)
    if not leaves or np.shape(leaves[0])[1] == 0:
        return None
    draws = int(np.shape(leaves[0])[1])
    return check_convergence(Samples(positions, {}, {}, np.arange(draws), "nuts", draws), target)

"""The kernel run's own convergence as rows of ``bdl validate``'s table.

A kernel run that has not converged (:mod:`bdl.diagnostics.convergence`: rank-normalised
R̂ < 1.01, bulk and tail ESS of at least 100 per chain, no stuck chain) says nothing about the
kernel's target: its draws are not yet draws of any distribution. :func:`convergence_rows` turns
the verdict ``bdl.sample`` reached (``samples.convergence``) into gated rows, and
:func:`bdl.validate` compares against NUTS only when they all pass; otherwise the run fails the
validation with these rows as the reason.
"""

from __future__ import annotations

from bdl.diagnostics.convergence import MIN_DRAWS, Convergence
from bdl.validation.compare import Row

__all__ = ["convergence_rows"]


def convergence_rows(verdict: Convergence | None) -> list[Row]:
    """Gated rows for ``verdict`` (none when there is no verdict)."""
    if verdict is None:
        return []
    if verdict.draws < MIN_DRAWS:
        return [Row("kernel draws per chain", float(verdict.draws), None, f">= {MIN_DRAWS}", False)]
    rows = [
        Row(
            f"kernel max R̂ ({verdict.space} space)",
            verdict.max_rhat,
            None,
            f"< {verdict.rhat_max}",
            not verdict.max_rhat >= verdict.rhat_max,  # NaN: every quantity was constant
        ),
        Row(
            "kernel min bulk ESS",
            verdict.min_ess_bulk,
            None,
            f">= {verdict.min_ess:.0f}",
            not verdict.min_ess_bulk < verdict.min_ess,
        ),
        Row(
            "kernel min tail ESS",
            verdict.min_ess_tail,
            None,
            f">= {verdict.min_ess:.0f}",
            not verdict.min_ess_tail < verdict.min_ess,
        ),
        Row("kernel stuck chains", float(len(verdict.stuck)), None, "= 0", not verdict.stuck),
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

"""One row of a validation table: a quantity, the kernel's value, NUTS's own, the threshold and
the verdict (:mod:`bdl.validation.compare`, :mod:`bdl.validation.converged`)."""

from __future__ import annotations

import dataclasses

__all__ = ["Row"]


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the comparison table: a quantity, its value, and the pass rule.

    ``threshold`` is the bound this comparison was judged by (with the Monte Carlo allowance of
    these two runs); ``rule`` how it is formed, the same for every run (empty where the
    threshold is a constant).

    Attributes:
        name: the quantity compared.
        value: the kernel's value.
        reference: NUTS's own value of the same quantity (its R̂, its ESS, its BMA accuracy),
            or the exact value; ``None`` where the row compares the kernel with NUTS and NUTS
            has no value of its own.
        threshold: the bound it was judged by, as printed.
        passed: whether it held; ``None`` for a row reported but not gated.
        rule: how the threshold is formed.
        nonnegative: the quantity cannot be negative (a distance) although its unbiased
            estimate can dip below 0 when the two sets of draws are as close as two draws of
            one law: ``value`` keeps the estimate, and it is shown as ``≈ 0``.
    """

    name: str
    value: float
    reference: float | None
    threshold: str
    passed: bool | None  # None: reported, not gated
    rule: str = ""
    nonnegative: bool = False

    def __post_init__(self) -> None:  # a NumPy bool is not ``False``: verdicts test ``is False``
        if self.passed is not None:
            object.__setattr__(self, "passed", bool(self.passed))

    def shown(self) -> str:
        """The kernel's value as the table shows it: four significant digits, or ``≈ 0`` for a
        nonnegative quantity whose unbiased estimate is below 0.

        Returns:
            The text.
        """
        if self.nonnegative and self.value < 0:
            return "≈ 0"
        return f"{self.value:.4g}"

    def format(self) -> str:
        """The row as one line of the printed table.

        Returns:
            The line.
        """
        ref = "" if self.reference is None else f"{self.reference:.4g}"
        verdict = {True: "ok", False: "FAIL", None: ""}[self.passed]
        return f"{self.name:<34}{self.shown():>12}{ref:>12}  {self.threshold:<16}{verdict}"

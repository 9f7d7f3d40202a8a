"""Validation against the gold standard: NumPyro NUTS on the same compiled model."""

from bdl.validation.compare import (
    Row,
    compare_closed_form,
    compare_functions,
    compare_parameters,
)
from bdl.validation.reference import (
    ESS_MIN,
    RHAT_MAX,
    Reference,
    UntrustedReferenceError,
    nuts_reference,
)
from bdl.validation.validate import ValidationReport, validate

__all__ = [
    "ESS_MIN",
    "RHAT_MAX",
    "Reference",
    "Row",
    "UntrustedReferenceError",
    "ValidationReport",
    "compare_closed_form",
    "compare_functions",
    "compare_parameters",
    "nuts_reference",
    "validate",
]

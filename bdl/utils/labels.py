"""Class labels and regression targets, checked by one set of rules wherever they are given:
:func:`bdl.compile` (``y_train``, ``y_test``), the predictions (``log_predictive``), the
evaluation (``bdl.evaluation.RunningBMA``) and :mod:`bdl.metrics`.

A class label is an index 0, …, K−1. Nothing downstream can tell a bad label from a good one:
JAX reads index −1 as the last class, clamps or fills an index ≥ K, and a cast to an integer
turns 1.5 into 1 and NaN into an arbitrary class, so each would be scored, silently and wrongly.
The rules:

* the values are numeric (or boolean) and finite;
* integral: an integer-valued float such as ``1.0`` is read as the integer, ``1.5`` is refused;
* within 0, …, K−1 where K is known.

A regression target must be numeric and finite. The checks are NumPy on host values: nothing is
traced or compiled, so a bad value is refused before any XLA compilation.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

#: offending values (and rows) listed in a message
SHOWN = 5
#: the remedy for a negative label (the classes are not numbered from 0)
RENUMBER = "map the labels to 0, …, K−1 (e.g. np.unique(y, return_inverse=True)[1])"

_INT32 = np.iinfo(np.int32)


def check_numeric(name: str, values: np.ndarray) -> None:
    """``TypeError`` naming ``name`` unless ``values`` are numbers or booleans (strings and
    objects cannot be scored)."""
    if not (jnp.issubdtype(values.dtype, jnp.number) or values.dtype == np.bool_):
        raise TypeError(f"{name} must be numeric; got dtype {values.dtype}.")


def nonfinite_rows(values: np.ndarray) -> np.ndarray:
    """The indices along the first axis of the rows holding a NaN or ±inf entry (``[0]`` for a
    non-finite scalar); empty for integer and boolean arrays, which cannot hold either."""
    if not jnp.issubdtype(values.dtype, jnp.inexact):  # bfloat16 included
        return np.zeros(0, np.int64)
    finite = np.isfinite(values)
    if finite.all():  # the common case: one pass over the array
        return np.zeros(0, np.int64)
    rows = finite.reshape(1, -1) if finite.ndim == 0 else finite.reshape(finite.shape[0], -1)
    return np.flatnonzero(~rows.all(axis=1))


def rows_text(rows: np.ndarray, total: int) -> str:
    """``row 3`` or ``rows 3, 7, 9, 12, 15, … (8 of 100)``: the first few of ``rows``."""
    listed = ", ".join(str(int(r)) for r in rows[:SHOWN])
    if rows.size > SHOWN:
        listed += ", …"
    count = f" ({rows.size} of {total})" if rows.size > 1 else ""
    return f"row{'s' if rows.size > 1 else ''} {listed}{count}"


def check_finite(name: str, values: np.ndarray, fix: str) -> None:
    """``TypeError`` unless ``values`` are numeric; ``ValueError`` naming ``name``, the number
    of NaN or infinite entries and their rows, followed by ``fix`` (what to do), when any is."""
    check_numeric(name, values)
    rows = nonfinite_rows(values)
    if rows.size:
        bad = int(values.size - np.count_nonzero(np.isfinite(values)))
        where = f", in {rows_text(rows, values.shape[0] if values.ndim else 1)}"
        raise ValueError(f"{name} contains {bad} NaN or infinite value(s){where}; {fix}")


def class_labels(values: np.ndarray, name: str, needs: str) -> np.ndarray:
    """``values`` as int32 class labels: an integer-valued float (``1.0``) is read as the
    integer; a fractional value (``0.5``), or one beyond any int32 index, is refused with a
    ``ValueError`` naming ``name``. ``needs`` says who reads them (``"Categorical likelihood"``,
    ``"accuracy"``). The values must already be finite (:func:`check_finite`)."""
    values = np.asarray(values)
    if values.dtype == np.bool_:
        return values.astype(np.int32)
    if jnp.issubdtype(values.dtype, jnp.inexact):
        fractional = values != np.trunc(values)
        if np.any(fractional):
            raise ValueError(
                f"{needs} needs integer class labels; {name} has non-integer values "
                f"({values_text(values[fractional])}): give class indices 0, …, K−1, e.g. "
                "np.unique(y, return_inverse=True)[1]."
            )
    huge = (values < _INT32.min) | (values > _INT32.max)
    if np.any(huge):
        raise ValueError(
            f"{name} holds {labels_text(values[huge])}, beyond any class index: {RENUMBER}."
        )
    return values.astype(np.int32)


def label_range_message(
    name: str, outside: np.ndarray, num_classes: int, have: str, wider: str, lower: int = 0
) -> str:
    """What is wrong with the labels ``outside`` (those not in ``lower``, …, K−1) and its fix.

    Args:
        name: the argument holding them (``"y_train"``, ``"labels"``).
        outside: the labels outside the classes.
        num_classes: K.
        have: where K comes from (``"the network has 3 outputs"``).
        wider: the other remedy for labels above the classes, with ``{k}`` for the number of
            classes they would need (``"give the network {k} outputs"``).
        lower: the first class (0 but for a likelihood numbering its classes otherwise).

    Returns:
        The message: a negative label asks for the classes to be renumbered, a label above
            the classes for the labels or the number of classes to be fixed.
    """
    outside = np.asarray(outside)
    if np.any(outside < lower):
        fix = RENUMBER
    else:
        fix = "fix the labels, or " + wider.format(k=int(outside.max()) + 1)
    return (
        f"{name} holds {labels_text(outside)} but {have} "
        f"(labels {lower}, …, {num_classes - 1}): {fix}."
    )


def check_class_labels(
    values: np.ndarray, name: str, num_classes: int, *, needs: str, have: str, wider: str
) -> np.ndarray:
    """``values`` as int32 labels 0, …, K−1, every rule of the module docstring checked in
    order (numeric, finite, integral, in range), each refusal naming ``name`` and its fix.

    Args:
        values: the labels, a host array.
        name: the argument holding them, for the messages.
        num_classes: K.
        needs: who reads them, for the integrality message (:func:`class_labels`).
        have: where K comes from, and ``wider``: the remedy of a label above the classes
            (:func:`label_range_message`).

    Returns:
        The labels as int32.
    """
    check_finite(
        name,
        values,
        "a class label must be an index 0, …, K−1: drop those rows or fix their labels.",
    )
    labels = class_labels(values, name, needs)
    outside = (labels < 0) | (labels >= num_classes)
    if np.any(outside):
        raise ValueError(label_range_message(name, labels[outside], num_classes, have, wider))
    return labels


def check_finite_targets(values: np.ndarray, name: str) -> np.ndarray:
    """Regression targets: numeric and finite (a NaN target makes the RMSE and the NLL NaN);
    returned as given."""
    check_finite(name, values, "drop those rows (e.g. keep = np.isfinite(y); x[keep], y[keep]).")
    return values


def values_text(values: np.ndarray) -> str:
    """The distinct values as written in the data (``3 and 7``; the first few of many)."""
    distinct = np.unique(np.asarray(values))
    shown = [f"{v:g}" if isinstance(v, float) else str(v) for v in distinct[:SHOWN].tolist()]
    if distinct.size > SHOWN:
        return ", ".join(shown) + f", … ({distinct.size} distinct values)"
    return and_text(shown)


def labels_text(values: np.ndarray) -> str:
    """``label 3`` or ``labels 3 and 7``."""
    return f"label{'s' if np.unique(np.asarray(values)).size > 1 else ''} {values_text(values)}"


def and_text(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]

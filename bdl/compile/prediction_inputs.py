"""What the predictions (``compiled.predict``, ``predictive``, ``log_predictive``) are given —
draws, inputs, targets — checked against the model before anything is traced.

Draws come in two forms, accepted alike:

* a :class:`bdl.Samples` (any :class:`Draws`): its valid draws, ``samples.flat()``. The sampling
  layer sits above this one, so a ``Samples`` is recognised by the attributes it has, and its
  own ``flat`` picks the draws: the divergence warnings live there, with the record of which
  chains diverged (docs/troubleshooting.md, *Divergence*);
* a pytree of the model's positions with leading draw axes, ``(draws, …)`` or
  ``(chains, draws, …)``.

Either is checked against the model's positions (the same parameters, each of its shape after
the leading axes) and must hold at least one draw; the inputs must have the training inputs'
shape per example. A mismatch is a ``ValueError`` naming the argument, raised before any
compilation, instead of an error from deep inside JAX.

Inputs with NaN or ±inf entries are predicted (a row's prediction is then NaN, the others are
unaffected) with a ``RuntimeWarning`` naming the rows; the scoring paths refuse them
(``nonfinite="raise"``), since one NaN prediction makes a test metric NaN. The check is one
``np.isfinite`` over the host array per call; the model's own splits (checked by
``bdl.compile``) are not read again, and a device array found finite is remembered (JAX arrays
are immutable), so that predicting draw by draw on the same inputs copies them to the host
once. Targets (``log_predictive``) follow the rules of ``bdl.compile``
(:mod:`bdl.utils.labels`): finite, and for a classifier integral labels among its classes.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any, Literal, Protocol, runtime_checkable

import jax
import numpy as np

from bdl.utils import labels as label_rules
from bdl.utils.identity_map import WeakIdentityMap
from bdl.utils.trees import describe, leaf_paths

PyTree = Any
#: a :class:`bdl.compile.compiled_model.CompiledModel` (this module does not import it)
Compiled = Any
#: parameter names listed in a message
SHOWN = 6
#: device arrays of inputs already found finite (immutable, so they stay so)
_FINITE: WeakIdentityMap[bool] = WeakIdentityMap()
#: the modules a warning looks past, to the user's line: bdl's, and Equinox's method wrapper
_INSIDE = ("bdl.", "equinox.")


@runtime_checkable
class Draws(Protocol):
    """What the predictions read of a :class:`bdl.Samples` (the sampling layer's result, above
    this one): the draws ``(chains, draws, …)``, which of them are valid ``(chains, draws)``,
    and ``flat()``, the valid draws with one leading sample axis."""

    @property
    def positions(self) -> PyTree: ...

    @property
    def valid(self) -> np.ndarray: ...

    def flat(self) -> PyTree: ...


def flatten_draws(
    compiled: Compiled, positions: Any, name: str = "positions", x: Any = None
) -> PyTree:
    """Draws (a :class:`Draws`, or positions with any number of leading draw axes) as one
    checked ``(K, …)`` stack, K ≥ 1, after checking the inputs ``x`` too when given; ``name``
    is the argument named in messages. Everything is checked before any array is touched."""
    if isinstance(positions, Draws):
        positions = positions.flat()
        if _num_draws(positions) == 0:
            raise ValueError(
                f"{name} is a Samples without valid draws: every chain diverged before its "
                "first draw, or the run kept none (keep_draws=False). See "
                "samples.divergence_report() and docs/troubleshooting.md."
            )
    lead = check_draws(compiled, positions, name)
    if x is not None:
        check_inputs(compiled, x)

    def stacked(a: Any) -> Any:
        a = a if hasattr(a, "reshape") else np.asarray(a)
        return a if lead == 1 else a.reshape(-1, *np.shape(a)[lead:])

    return jax.tree.map(stacked, positions)


def check_draws(compiled: Compiled, positions: Any, name: str = "positions") -> int:
    """Raise unless ``positions`` are draws of this model: its parameters, each of its shape
    after the same leading draw axes, numeric, at least one draw. Returns the number of leading
    axes. Only shapes are read: nothing is traced or compiled."""
    template = compiled.initial_position
    if jax.tree.structure(positions) != jax.tree.structure(template):
        given, expected = leaf_paths(positions), leaf_paths(template)
        if set(given) != set(expected):
            raise ValueError(
                f"{name}: the draws have parameters {_names(given)} but this model's are "
                f"{_names(expected)}{_difference(given, expected)}: draws of another model? "
                "Pass this model's draws, e.g. samples.flat() of bdl.sample(compiled, ...)."
            )
        raise ValueError(
            f"{name} must have the structure of the model's positions, {describe(template)}, "
            f"with leading draw axes; got {describe(positions)}."
        )
    leaves, reference = jax.tree.leaves(positions), jax.tree.leaves(template)
    paths = leaf_paths(template)
    for path, leaf in zip(paths, leaves, strict=True):
        dtype = leaf.dtype if hasattr(leaf, "dtype") else np.asarray(leaf).dtype
        if not (np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.bool_)):
            raise TypeError(f"{name} leaf {path} must be a numeric array; got dtype {dtype}.")
    lead = np.ndim(leaves[0]) - np.ndim(reference[0])
    if lead < 1:
        raise ValueError(
            f"{name} need at least one leading draw axis: (draws, ...) or (chains, draws, ...); "
            "wrap a single position with jax.tree.map(lambda a: a[None], position)."
        )
    shape = np.shape(leaves[0])[:lead]
    for path, leaf, ref in zip(paths, leaves, reference, strict=True):
        if np.shape(leaf) != (*shape, *np.shape(ref)):
            got = np.shape(leaf)
            raise ValueError(
                f"{name} leaf {path} has shape {got}; with the leading draw axes {shape} of the "
                f"first leaf it must be {(*shape, *np.shape(ref))}, this model's {path} being "
                f"{np.shape(ref)}: draws of another model?"
            )
    if int(np.prod(shape)) == 0:
        raise ValueError(
            f"{name} hold no draws (leading axes {shape}): every chain diverged before its "
            "first draw? See samples.divergence_report()."
        )
    return lead


def check_inputs(
    compiled: Compiled,
    x: Any,
    name: str = "x",
    nonfinite: Literal["warn", "raise"] = "warn",
) -> None:
    """Raise unless ``x`` is a numeric batch of examples shaped like the training inputs'.

    Rows with NaN or ±inf entries have NaN predictions: ``nonfinite="warn"`` (predictions)
    warns naming them, ``"raise"`` (scoring, where one NaN makes a metric NaN) refuses them
    with a ``ValueError``.
    """
    dtype = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype
    if not (np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.bool_)):
        raise TypeError(f"{name} must be a numeric array; got dtype {dtype}.")
    shape, want = tuple(np.shape(x)), tuple(compiled.x_train.shape[1:])
    if shape[1:] != want:
        if shape == want:
            raise ValueError(
                f"{name} is one example of shape {want}; give a batch with a leading axis, e.g. "
                f"{name}[None]."
            )
        if len(shape) == 2 and len(want) == 1:
            raise ValueError(
                f"{name} has {shape[1]} features per row; the model was compiled with {want[0]}."
            )
        raise ValueError(
            f"{name} has examples of shape {shape[1:]}; the model was compiled on examples of "
            f"shape {want}."
        )
    report_nonfinite(name, nonfinite_input_rows(compiled, x), shape[0], nonfinite)


def report_nonfinite(
    name: str, rows: np.ndarray, total: int, nonfinite: Literal["warn", "raise"]
) -> None:
    """Warn (``"warn"``) or raise a ``ValueError`` (``"raise"``) naming the ``rows`` of the
    inputs ``name`` that hold NaN or ±inf entries, out of ``total``; nothing without any.

    Args:
        name: the argument holding the inputs.
        rows: the rows with a NaN or infinite entry (:func:`nonfinite_input_rows`).
        total: the number of rows.
        nonfinite: ``"warn"`` for a prediction, ``"raise"`` where the predictions are scored.
    """
    if not rows.size:
        return
    found = (
        f"{name} has NaN or infinite entries in {label_rules.rows_text(rows, total)}: the "
        "prediction of such a row is NaN"
    )
    fix = "drop or impute those rows first, e.g. keep = np.isfinite(x).all(axis=1)"
    if nonfinite == "raise":
        raise ValueError(f"{found}, and so would every metric be; {fix}; x[keep], y[keep].")
    warnings.warn(f"{found}; {fix}; x[keep].", RuntimeWarning, stacklevel=_outside_bdl())


def nonfinite_input_rows(compiled: Compiled, x: Any) -> np.ndarray:
    """The rows of ``x`` holding a NaN or ±inf entry, found on the host; none for traced
    inputs (unknown), for the compiled model's own splits (``bdl.compile`` refused those), and
    for a device array already found finite.

    Args:
        compiled: the compiled model.
        x: the inputs.

    Returns:
        The row indices, in order.
    """
    if isinstance(x, jax.core.Tracer) or any(
        x is getattr(compiled, split, None) for split in ("x_train", "x_test")
    ):
        return np.zeros(0, np.int64)
    device = isinstance(x, jax.Array)
    if device and x in _FINITE:
        return np.zeros(0, np.int64)
    rows = label_rules.nonfinite_rows(np.asarray(x))
    if device and not rows.size:
        _FINITE.remember(x, True)
    return rows


def _outside_bdl() -> int:
    """The ``stacklevel`` of the first frame outside bdl (and the Equinox wrapper of its
    methods), from the caller's: the line of the user's code that asked for the prediction."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(_INSIDE):
        frame, level = frame.f_back, level + 1
    return level


def check_targets(compiled: Compiled, x: Any, y: Any, name: str = "y") -> Any:
    """``y`` checked as ``bdl.compile`` checks ``y_test`` (:mod:`bdl.utils.labels`): one target
    per row of ``x``, shaped like the training targets, numeric and finite, and for a
    classifier integral labels among its classes (the log-predictive of a label outside them is
    −∞ or meaningless). The values are not checked when ``y`` is traced.

    Args:
        compiled: the compiled model.
        x: the inputs.
        y: their targets.
        name: the argument named in messages.

    Returns:
        ``y`` as a host array (int32 labels for a classifier); as given when traced, or when
            it is one of the model's own splits (checked by ``bdl.compile``).
    """
    shape, want = tuple(np.shape(y)), tuple(compiled.y_train.shape[1:])
    rows = np.shape(x)[0]
    if shape[:1] != (rows,) or shape[1:] != want:
        raise ValueError(
            f"{name} has shape {shape}; it needs one target per row of x, shape {(rows, *want)}."
        )
    if isinstance(y, jax.core.Tracer):  # called under jit: the values are not known here
        return y
    if any(y is getattr(compiled, split, None) for split in ("y_train", "y_test")):
        return y  # checked by bdl.compile
    values = np.asarray(y)
    if compiled.likelihood.task != "classification" or compiled.num_classes is None:
        return label_rules.check_finite_targets(values, name)
    k = compiled.num_classes
    return label_rules.check_class_labels(
        values,
        name,
        k,
        needs=f"{type(compiled.likelihood).__name__} likelihood",
        have=f"this model has {k} classes",
        wider="compile the model with a network of {k} outputs",
    )


def _num_draws(tree: PyTree) -> int:
    leaves = jax.tree.leaves(tree)
    return int(np.shape(leaves[0])[0]) if leaves else 0


def _names(paths: list[str]) -> str:
    shown = paths[:SHOWN] + ([f"… {len(paths) - SHOWN} more"] if len(paths) > SHOWN else [])
    return "{" + ", ".join(shown) + "}"


def _difference(given: list[str], expected: list[str]) -> str:
    """`` (not this model's: …; missing: …)`` when the lists are too long to compare by eye."""
    if len(given) <= SHOWN and len(expected) <= SHOWN:
        return ""
    extra = [p for p in given if p not in set(expected)]
    missing = [p for p in expected if p not in set(given)]
    parts = ([f"not this model's: {_names(extra)}"] if extra else []) + (
        [f"missing: {_names(missing)}"] if missing else []
    )
    return f" ({'; '.join(parts)})"

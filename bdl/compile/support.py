"""Observed values against the likelihood's support, checked before anything is compiled.

A target y_i outside the support of p(y | f(x_i), φ) has log-density −∞ whatever θ is: every
chain would start at U = ∞ and diverge at once. The support checked is the distribution's own:
the ``support`` of the NumPyro distribution that :meth:`bdl.Likelihood.log_prob` scores y with
(:meth:`~bdl.Likelihood.matched_distribution`), and, for a per-example data field that feeds a
parameter (:attr:`~bdl.Likelihood.field_parameters`), that parameter's ``arg_constraints``
entry.

Both are read by abstract evaluation: the distribution is built, inside ``jax.eval_shape``, from
the shapes of the network output, the targets and the fields, and a constraint whose bounds are
fixed numbers (Poisson's integers ≥ 0, Categorical's 0, …, K − 1 with K read off the output's
shape) is then evaluated with NumPy on the observed values. Nothing is compiled. A support whose
bounds depend on traced values — the network output (a Uniform whose ends are predicted), a
per-example field (Binomial's ``total_count="trials"`` bounds y by each row's trials) — cannot
be evaluated here; those targets are left to the start check of ``bdl.sample``, which names the
rows whose log-likelihood is not finite (:mod:`bdl.compile.start_check`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions import constraints

from bdl.compile.data_fields import abstract_inputs
from bdl.dsl.likelihoods import Likelihood
from bdl.utils.labels import label_range_message, labels_text, values_text

#: offending values (and rows) listed in a message
SHOWN = 5


def check_observed(
    likelihood: Likelihood,
    output: jax.ShapeDtypeStruct,
    y: np.ndarray,
    name: str,
    fields: dict[str, np.ndarray] | None = None,
    fields_name: str = "fields",
) -> None:
    """Raise ``ValueError`` naming ``name`` (``"y_train"``, ``"y_test"``) when a target lies
    outside the likelihood's support, or naming ``fields_name[field]`` when a data field lies
    outside the constraint of the parameter it feeds. ``output``: the network output's shape
    and dtype on a few examples (from ``jax.eval_shape``)."""
    fields = fields or {}
    support, by_parameter = read_constraints(likelihood, output, y, fields)
    bad = outside(support, y)
    if bad is not None and bad.any():
        raise ValueError(_target_message(likelihood, support, output, y, bad, name))
    for parameter, field in likelihood.field_parameters.items():
        values = fields.get(field)
        bad = None if values is None else outside(by_parameter.get(parameter), values)
        if bad is not None and bad.any():
            raise ValueError(
                f"data {fields_name}[{field!r}] feeds the parameter {parameter!r} of "
                f"{_family(likelihood)}, which must lie in {by_parameter[parameter]!r}; "
                f"{_listing(values, bad)}. Fix or drop those rows."
            )


def read_constraints(
    likelihood: Likelihood,
    output: jax.ShapeDtypeStruct,
    y: np.ndarray,
    fields: dict[str, np.ndarray],
) -> tuple[constraints.Constraint | None, dict[str, constraints.Constraint]]:
    """(the support of y, ``{parameter: constraint}`` of the parameters fed by data fields), by
    abstract evaluation; a constraint that depends on traced values is left out (``None``)."""
    k = int(output.shape[0]) if output.shape else 1
    params, target = abstract_inputs(likelihood, k, y, fields)
    found: dict[str, Any] = {}

    def build(out: jax.Array, target: jax.Array, params: dict) -> jax.Array:
        d = likelihood.matched_distribution(out, target, params)
        found["support"] = _fixed(getattr(d, "support", None))
        arg_constraints = getattr(d, "arg_constraints", {}) or {}
        found["parameters"] = {
            p: c
            for p in likelihood.field_parameters
            if (c := _fixed(arg_constraints.get(p))) is not None
        }
        return jnp.zeros(())

    try:
        jax.eval_shape(build, output, target, params)
    except Exception:  # the log-likelihood check before this one names what does not fit
        return None, {}
    return found.get("support"), found.get("parameters", {})


def outside(constraint: constraints.Constraint | None, values: np.ndarray) -> np.ndarray | None:
    """Per row of ``values``, whether an entry lies outside ``constraint`` (evaluated with
    NumPy); ``None`` when it cannot be evaluated here."""
    if constraint is None:
        return None
    while isinstance(constraint, constraints.independent):  # rows are reduced below
        constraint = constraint.base_constraint
    values = np.asarray(values)
    try:
        ok = np.asarray(constraint(values), bool)
    except Exception:  # a dependent constraint, or one NumPy cannot evaluate
        return None
    n = values.shape[0] if values.ndim else 1
    if ok.ndim == 0:
        ok = np.broadcast_to(ok, (n,))
    if ok.shape[:1] != (n,):
        return None
    return ~ok.reshape(n, -1).all(axis=1)


def _fixed(constraint: Any) -> constraints.Constraint | None:
    """The constraint when none of its bounds is a traced value, else ``None``."""
    if not isinstance(constraint, constraints.Constraint):
        return None

    def traced(value: Any) -> bool:
        if isinstance(value, jax.core.Tracer):
            return True
        if isinstance(value, constraints.Constraint):
            return any(traced(v) for v in vars(value).values())
        if isinstance(value, list | tuple):
            return any(traced(v) for v in value)
        return False

    return None if traced(constraint) else constraint


def _family(likelihood: Likelihood) -> str:
    return repr(likelihood) if hasattr(likelihood, "distribution_fn") else type(likelihood).__name__


def _listing(values: np.ndarray, bad: np.ndarray) -> str:
    rows = np.flatnonzero(bad)
    entries = np.asarray(values)[rows].reshape(-1)
    where = ", ".join(str(r) for r in rows[:SHOWN]) + (", …" if rows.size > SHOWN else "")
    return (
        f"{rows.size} of {bad.size} rows lie outside it (rows {where}), e.g. {values_text(entries)}"
    )


def _target_message(
    likelihood: Likelihood,
    support: constraints.Constraint,
    output: jax.ShapeDtypeStruct,
    y: np.ndarray,
    bad: np.ndarray,
    name: str,
) -> str:
    outside_values = np.asarray(y)[bad]
    lower = getattr(support, "lower_bound", None)
    upper = getattr(support, "upper_bound", None)
    if likelihood.task == "classification" and isinstance(support, constraints.integer_interval):
        k = int(upper) + 1
        have = (
            f"the network has {k} outputs"
            if output.shape and output.shape[-1] == k
            else f"the likelihood has {k} classes"
        )
        return label_range_message(
            name, outside_values, k, have, "give the network {k} outputs", int(lower)
        )
    if likelihood.task == "classification" and support is constraints.boolean:
        return (
            f"{name} holds {labels_text(outside_values)}; a {_family(likelihood)} "
            "likelihood needs labels 0 and 1. Map the two classes to 0 and 1, or use "
            "bdl.Categorical() for more classes."
        )
    return (
        f"{name} holds values outside the support of {_family(likelihood)}, {support!r}: "
        f"{_listing(y, bad)}. Their log-likelihood is −∞ for every θ (every chain would diverge "
        "at its start): fix or drop those rows, or choose a likelihood whose support holds them."
    )

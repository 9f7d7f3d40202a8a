"""Per-example data fields (e.g. a known measurement error σ_i) read by a likelihood.

A likelihood names the fields it reads (:attr:`bdl.Likelihood.fields`); the data set carries them
(:attr:`bdl.data.Dataset.fields`, or extra keys of a dict ``{"x": …, "y": …, "sigma": …}``). They
are checked here before anything is compiled, then minibatched with x and y.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from bdl.compile.checks import check_finite
from bdl.data.dataset import Dataset
from bdl.dsl.likelihoods import Likelihood


def check_fields_given(
    likelihood: Likelihood, fields: dict[str, jax.Array] | None
) -> dict[str, jax.Array]:
    """The fields the likelihood reads, from ``fields``; a clear error when one is missing."""
    names = likelihood.fields
    if not names:
        return {}
    missing = [name for name in names if fields is None or name not in fields]
    if missing:
        raise ValueError(
            f"{likelihood!r} reads the per-example data field(s) {missing}: pass them for these "
            f"inputs, e.g. fields={{{missing[0]!r}: array of shape (batch,)}}."
        )
    return {name: fields[name] for name in names}


def dataset_fields(
    likelihood: Likelihood, data: Dataset
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None]:
    """(train fields, test fields or ``None``) as float32 arrays: every field the likelihood
    reads is present, has one entry per example, is finite, and a scale field is positive."""
    names = likelihood.fields
    if not names:
        return {}, None
    splits = [("fields", data.fields, data.n)]
    if data.has_test:
        splits.append(("fields_test", data.fields_test, data.x_test.shape[0]))
    out: list[dict[str, np.ndarray]] = []
    for where, given, n in splits:
        given = given or {}
        arrays = {}
        for name in names:
            if name not in given:
                have = sorted(given) or "none"
                raise ValueError(
                    f"{likelihood!r} reads the per-example field {name!r}, but the data's {where} "
                    f"has {have}. Add it: Dataset(..., {where}={{{name!r}: values}}) or a dict "
                    f"data={{'x': x, 'y': y, {name!r}: values}}."
                )
            value = np.asarray(given[name])
            check_finite(f"{where}[{name!r}]", value)
            if value.ndim == 0 or value.shape[0] != n:
                raise ValueError(
                    f"data {where}[{name!r}] must have one entry per example ({n}); got shape "
                    f"{value.shape}."
                )
            if name in _scale_fields(likelihood) and not np.all(value > 0):
                raise ValueError(
                    f"data {where}[{name!r}] is a per-example scale and must be > 0; found "
                    f"{int(np.sum(value <= 0))} entries <= 0."
                )
            arrays[name] = value.astype(np.float32)
        out.append(arrays)
    return out[0], (out[1] if len(out) > 1 else None)


def _scale_fields(likelihood: Likelihood) -> set[str]:
    scale = getattr(likelihood, "scale", None)
    return {scale} if isinstance(scale, str) else set()


def as_field_dataset(data: dict[str, Any]) -> Dataset:
    """A dict ``{"x": …, "y": …, name: per-example array, …}`` (optionally ``x_test``,
    ``y_test`` and ``fields_test``) as a :class:`Dataset`."""
    if "x" not in data or "y" not in data:
        raise ValueError(
            f"compile(model, data={{...}}) needs keys 'x' and 'y' (the rest are per-example "
            f"fields); got keys {sorted(data)}."
        )
    rest = {k: v for k, v in data.items() if k not in ("x", "y", "x_test", "y_test", "fields_test")}
    return Dataset(
        "data",
        np.asarray(data["x"]),
        np.asarray(data["y"]),
        None if data.get("x_test") is None else np.asarray(data["x_test"]),
        None if data.get("y_test") is None else np.asarray(data["y_test"]),
        fields={k: np.asarray(v) for k, v in rest.items()},
        fields_test=data.get("fields_test"),
    )


def check_log_prob(
    likelihood: Likelihood, output: Any, y: np.ndarray, fields: dict[str, np.ndarray]
) -> None:
    """Abstract evaluation (nothing compiled) of the per-example log-likelihood on two examples:
    it must run and give one value per example. Catches a distribution whose parameters do not
    broadcast with the outputs and targets, which a generic likelihood cannot check itself."""
    clash = set(likelihood.fields) & set(likelihood.param_priors)
    if clash:
        raise ValueError(
            f"{likelihood!r}: {sorted(clash)} are both a data field and a learned parameter; "
            "rename the data field."
        )
    k = int(output.shape[0])
    params, target = abstract_inputs(likelihood, k, y, fields)
    try:
        lp = jax.eval_shape(likelihood.log_prob, output, target, params)
    except Exception as err:
        raise ValueError(
            f"{likelihood!r} cannot score network outputs of shape {tuple(output.shape[1:])} "
            f"(per example) against targets of shape {y.shape[1:]}: {type(err).__name__}: {err}"
        ) from None
    if lp.shape != (k,):
        raise ValueError(
            f"{likelihood!r} gives log-likelihoods of shape {lp.shape} for {k} examples; it must "
            "give one value per example. Check the network's output shape against the targets."
        )


def abstract_inputs(
    likelihood: Likelihood, k: int, y: np.ndarray, fields: dict[str, np.ndarray]
) -> tuple[dict[str, jax.ShapeDtypeStruct], jax.ShapeDtypeStruct]:
    """The shapes of the likelihood's parameters (its learned ones, then the data fields) and of
    the targets for ``k`` examples, for abstract evaluation of ``likelihood.log_prob``.

    Args:
        likelihood: the likelihood.
        k: the number of examples.
        y: the targets (their trailing shape and dtype are read).
        fields: the per-example data fields.

    Returns:
        ``(params, target)`` as ``jax.ShapeDtypeStruct`` values.
    """
    params = {
        name: jax.ShapeDtypeStruct(np.shape(v), np.float32)
        for name, v in likelihood.param_init.items()
    }
    params.update(
        {name: jax.ShapeDtypeStruct((k, *v.shape[1:]), v.dtype) for name, v in fields.items()}
    )
    return params, jax.ShapeDtypeStruct((k, *y.shape[1:]), y.dtype)

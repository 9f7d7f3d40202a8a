"""Input checks run by :func:`bdl.compile` before anything is traced or compiled."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bdl.data.dataset import Dataset
from bdl.dsl.likelihoods import Likelihood
from bdl.dsl.potential import Potential
from bdl.utils import labels
from bdl.utils.arguments import shown
from bdl.utils.dtypes import float_dtype
from bdl.utils.trees import describe, path_to_str


def as_dataset(data: Any) -> Dataset:
    """Accept a :class:`bdl.data.Dataset` or a tuple ``(x, y)`` / ``(x, y, x_test, y_test)``."""
    if isinstance(data, Dataset):
        return data
    if isinstance(data, tuple | list) and len(data) in (2, 4):
        arrays = [np.asarray(a) for a in data]
        test = arrays[2:] if len(arrays) == 4 else [None, None]
        return Dataset("data", arrays[0], arrays[1], test[0], test[1])
    raise TypeError(
        "compile(model, data=...) needs a bdl.data.Dataset or a tuple (x, y) or "
        f"(x_train, y_train, x_test, y_test) of arrays; got {type(data).__name__}."
    )


def check_finite(name: str, array: np.ndarray | None) -> None:
    """Numeric, without NaN or ±inf (the rule :mod:`bdl.utils.labels` applies everywhere)."""
    if array is None:
        return
    labels.check_finite(
        f"data {name}",
        array,
        "clean or impute them before compiling (e.g. drop the rows with "
        "np.isfinite(x).all(axis=1)).",
    )


def check_data(data: Dataset) -> None:
    """Shapes agree and nothing is NaN or infinite."""
    for field in ("x_train", "y_train", "x_test", "y_test"):
        check_finite(field, getattr(data, field))
    if data.x_train.shape[0] != data.y_train.shape[0]:
        raise ValueError(
            f"data x_train has {data.x_train.shape[0]} examples but y_train has "
            f"{data.y_train.shape[0]}; they must match."
        )
    if data.x_train.shape[0] == 0:
        raise ValueError("data x_train is empty.")
    if data.has_test and data.x_test.shape[0] != data.y_test.shape[0]:
        raise ValueError(
            f"data x_test has {data.x_test.shape[0]} examples but y_test has "
            f"{data.y_test.shape[0]}; they must match."
        )
    for train, test in (("x_train", "x_test"), ("y_train", "y_test")):
        a, b = getattr(data, train), getattr(data, test)
        if b is not None and a.shape[1:] != b.shape[1:]:
            raise ValueError(
                f"data {test} has examples of shape {b.shape[1:]} but {train} of shape "
                f"{a.shape[1:]}; the test split must have the training split's features."
            )


def targets(likelihood: Likelihood, y: np.ndarray, name: str) -> np.ndarray:
    """``y`` as the model scores it: floats for a regression (float32, or float64 in JAX's
    64-bit mode), int32 class labels for a classifier (integer-valued floats such as ``1.0``
    are accepted; ``0.5`` is refused)."""
    if likelihood.task == "regression":
        return np.asarray(y, float_dtype())
    return labels.class_labels(y, name, f"{type(likelihood).__name__} likelihood")


def check_output(out: Any) -> None:
    """The network maps a batch to one floating-point array (found by abstract evaluation). An
    integer or boolean output has no gradient in the weights: the chains would sample the
    prior, whatever the data say."""
    if not isinstance(out, jax.ShapeDtypeStruct):
        raise ValueError(
            f"the network must return one array of outputs per batch; it returns "
            f"{describe(out)}. Return the array the likelihood scores (e.g. the logits)."
        )
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise TypeError(
            f"the network's output has dtype {out.dtype}; a likelihood needs floating-point "
            "outputs (logits, means), and an integer or boolean output has zero gradient in the "
            "weights, so the chains would only sample the prior. Remove the cast at the end of "
            "the network (e.g. .astype(jnp.int32), jnp.argmax, a comparison)."
        )


def _start_leaves(tree: Any, owner: str) -> list[tuple[str, Any, np.dtype]]:
    """(where, leaf, dtype) for every leaf of a declared start, ``where`` naming it for
    messages; a start without arrays is an error."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    if not flat:
        raise ValueError(f"{owner} has no arrays: there is nothing to sample.")
    return [
        (
            owner + (f" leaf {path_to_str(path)}" if path else ""),
            leaf,
            leaf.dtype if hasattr(leaf, "dtype") else np.asarray(leaf).dtype,
        )
        for path, leaf in flat
    ]


def _check_finite_start(where: str, leaf: Any) -> None:
    if not isinstance(leaf, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(leaf))):
        raise ValueError(f"{where} has NaN or infinite entries; chains cannot start there.")


def check_params(params: Any) -> None:
    """A plain-function network's declared parameters are sampled: every leaf must be a
    floating-point array with finite entries (an integer leaf has no gradient)."""
    for where, leaf, dtype in _start_leaves(params, "Model(params=...)"):
        if not jnp.issubdtype(dtype, np.floating):
            raise TypeError(
                f"{where} has dtype {dtype}; sampled parameters must be floating-point arrays "
                "(e.g. np.zeros(shape, np.float32)). Keep fixed settings out of params."
            )
        _check_finite_start(where, leaf)


def check_potential(potential: Potential, start: Any) -> None:
    """The initial position is a pytree of finite numbers, and ``log_density`` maps it to a
    scalar (checked by abstract evaluation: nothing is compiled)."""
    for where, leaf, dtype in _start_leaves(start, "Potential(init=...)"):
        if not (jnp.issubdtype(dtype, np.number) or jnp.issubdtype(dtype, np.bool_)):
            raise TypeError(f"{where} must be a numeric array; got {shown(leaf)}.")
        _check_finite_start(where, leaf)
    position = jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a), jnp.float32), start)
    try:
        out = jax.eval_shape(potential.log_density, position)
    except Exception as err:
        raise ValueError(
            f"Potential(log_density=...) cannot be evaluated at a position like init "
            f"{describe(start)}: {type(err).__name__}: {err}"
        ) from None
    if not (isinstance(out, jax.ShapeDtypeStruct) and out.shape == ()):
        raise ValueError(
            "Potential(log_density=...) must return a scalar log π(θ); at a position like init "
            f"{describe(start)} it returns {describe(out)}. Sum over the entries, e.g. "
            "-0.5 * jnp.sum(theta**2)."
        )


def check_batch_size(batch_size: Any, n: int) -> int:
    if batch_size is None:
        return n
    if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer):
        raise TypeError(f"batch_size must be an integer; got {type(batch_size).__name__}.")
    if not 1 <= batch_size <= n:
        raise ValueError(
            f"batch_size must satisfy 1 <= batch_size <= n = {n} (the training-set size); got "
            f"{batch_size}."
        )
    return int(batch_size)

"""Priors checked by :func:`bdl.compile` before anything is compiled, and declared starts checked
against their priors' supports before a run compiles.

* **Arguments.** Every NumPyro distribution a model samples from — each parameter's prior, a
  learned likelihood parameter's, a hierarchical prior's hyper-priors, and every distribution
  nested in them (a truncated distribution's base, a mixture's components) — has its arguments
  checked against NumPyro's own ``arg_constraints``, as NumPyro's ``validate_args`` would, but
  in NumPy on the values given (nothing is traced): ``dist.LKJCholesky(3, 0.0)`` built with
  NumPyro's validation off has concentration 0, outside (0, ∞).
* **Supports.** A support whose bounds are fixed numbers must hold something: ``dist.Uniform(2,
  1)`` has its lower bound above its upper one, and its density is sampled through a bijection
  onto an empty interval (a NaN start).
* **Event shapes.** A multivariate prior whose event leaves no free coordinate — a simplex of 1
  entry (``dist.Dirichlet(jnp.ones(1))``), a 1 × 1 correlation factor — gives the sampler
  nothing to move: the parameter would stay at its single possible value.
* **Declared starts.** ``init="fixed"`` (and the other starts from the declared parameters)
  needs each declared value inside its prior's support; the bijection would otherwise project
  an off-simplex vector onto the simplex, or give a NaN, without a word
  (:func:`check_declared_support`).

Each message names the parameter, the value at fault and the fix.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np
import numpyro.distributions as dist
from numpyro.distributions import constraints

from bdl.dsl.hierarchical import HierarchicalLeaf
from bdl.dsl.priors import Distribution, LeafInfo

#: a declared simplex may miss a sum of 1 by this much (float32 rounding of its entries)
SIMPLEX_TOLERANCE = 1e-4
#: entries of an array shown in a message
SHOWN = 6


def check_priors(model: Any, infos: tuple[LeafInfo, ...], priors: tuple[Any, ...]) -> None:
    """Raise ``ValueError`` when a prior of the model cannot be sampled: an argument outside
    NumPyro's constraint for it, an empty support, or an event shape that leaves the parameter
    nothing to sample (module docstring).

    Args:
        model: the declared :class:`bdl.Model`.
        infos: each network parameter's path and shape.
        priors: each network parameter's resolved prior.

    Raises:
        ValueError: what is wrong, naming the parameter, the value and the fix.
    """
    seen: set[int] = set()
    for info, prior in zip(infos, priors, strict=True):
        if isinstance(prior, HierarchicalLeaf):
            if id(prior.spec) not in seen:
                seen.add(id(prior.spec))
                for name, hyper in prior.spec.hyper_priors.items():
                    where = f"the {name} prior of HierarchicalNormal(name={prior.spec.name!r})"
                    check_distribution(hyper, where)
            continue
        if isinstance(prior, Distribution):
            check_distribution(prior.d, f"the prior of {info.path}")
            check_free_coordinates(prior.d, info.path, info.shape)
    for name, prior in model.likelihood.param_priors.items():
        check_distribution(prior, f"the prior of lik/{name}")
        shape = tuple(prior.batch_shape + prior.event_shape)
        check_free_coordinates(prior, f"lik/{name}", shape)


def check_distribution(d: dist.Distribution, where: str) -> None:
    """Raise ``ValueError`` when an argument of ``d`` lies outside NumPyro's constraint for it,
    or when its support is an empty interval; then the same for every distribution nested in
    it (its own arguments first, so that the one the user wrote is named).

    Args:
        d: a NumPyro distribution.
        where: how messages name it (``"the prior of net/w"``).

    Raises:
        ValueError: naming ``where``, the argument, its value and the fix.
    """
    family = type(d).__name__
    for argument, constraint in (getattr(d, "arg_constraints", None) or {}).items():
        if constraints.is_dependent(constraint) or argument not in vars(d):
            continue  # a bound read from another argument; or a lazily derived argument
        value = _concrete(vars(d)[argument])
        if value is None:
            continue
        ok = _holds(constraint, value)
        if ok is not None and not ok.all():
            bad = np.asarray(value)[~np.broadcast_to(ok, np.shape(value))] if ok.ndim else value
            raise ValueError(
                f"{where}, {family}, has {argument} = {_shown(value)}, but NumPyro's {family} "
                f"needs {argument} {describe(constraint)} ({_shown(bad)} is not). Give "
                f"{family}(..., {argument}=...) a value {describe(constraint)}"
                f"{_hint(family, argument)}."
            )
    _check_support(d, where)
    for name, inner in vars(d).items():
        if isinstance(inner, dist.Distribution):
            label = name.strip("_")
            check_distribution(inner, f"{where} (its {label})")


def check_free_coordinates(d: dist.Distribution, path: str, shape: tuple[int, ...]) -> None:
    """Raise ``ValueError`` when the prior ``d`` of the parameter ``path`` (of ``shape``) leaves
    the sampler no coordinate: its support's bijection maps an empty array onto the parameter
    (a simplex of 1 entry holds only the point 1).

    Args:
        d: the parameter's prior.
        path: the parameter's name (``net/w``, ``lik/weights``).
        shape: the parameter's shape.

    Raises:
        ValueError: naming the parameter, the prior's event shape and the fix.
    """
    size = math.prod(shape)
    if size == 0 or not d.event_shape:
        return
    try:
        transform = dist.transforms.biject_to(d.support)
        free = math.prod(transform.inverse_shape(shape))
    except Exception:  # a support without a bijection is refused elsewhere, with its name
        return
    if free > 0:
        return
    event = tuple(d.event_shape)
    blocks = size // max(math.prod(event), 1)
    raise ValueError(
        f"the prior of {path}, {type(d).__name__} with event shape {event}, leaves nothing to "
        f"sample: each of the {blocks} block(s) of shape {event} in {path} (shape {shape}) must "
        f"be {describe(d.support)}, and with that event shape only one value is, so {path} "
        "would stay fixed whatever the data say. For a prior over K entries, give it the "
        "event shape (K,) with K ≥ 2 (e.g. dist.Dirichlet(jnp.ones(K))) on a parameter whose "
        f"last axis holds those K entries (shape (..., K)), or give {path} a univariate prior."
    )


def check_declared_support(model: Any, init: str) -> None:
    """Raise ``ValueError`` when a declared parameter the start ``init`` begins from lies
    outside its prior's support (an off-simplex vector, a negative scale), which the sampler's
    bijection would otherwise project or turn into NaN without a word.

    Args:
        model: the compiled model.
        init: the start's name, for messages.

    Raises:
        ValueError: naming the parameter, its declared value and the fix.
    """
    leaves = model.net_treedef.flatten_up_to(model.adapter.params)
    for value, prior, info in zip(leaves, model.leaf_priors, model.leaf_infos, strict=True):
        if not isinstance(prior, Distribution) or isinstance(value, jax.core.Tracer):
            continue
        support = prior.d.support
        ok = _inside(support, np.asarray(value, np.float64))
        if ok is None or ok.all():
            continue
        raise ValueError(
            f"init={init!r} starts from the declared parameters, but they lie outside their "
            f"prior's support: {info.path} = {_shown(value)}, and its prior "
            f"{type(prior.d).__name__} needs values {describe(support)}"
            f"{_how_far(support, np.asarray(value, np.float64))}; the sampler's bijection would "
            "move it without a word (onto the support, or to NaN). Declare "
            f"{info.path} inside the support (e.g. a point the prior can draw), or start "
            "elsewhere: init='prior', or pass a position."
        )


def describe(constraint: Any) -> str:
    """A constraint in words, for messages: ``"> 0"``, ``"in [0, 1]"``, ``"on the simplex
    (entries ≥ 0 that sum to 1)"``.

    Args:
        constraint: a NumPyro constraint.

    Returns:
        The text.
    """
    c = constraint
    while isinstance(c, constraints.independent):
        c = c.base_constraint
    lower, upper = getattr(c, "lower_bound", None), getattr(c, "upper_bound", None)
    words = [
        (constraints.simplex, "on the simplex (entries ≥ 0 that sum to 1)"),
        (constraints.corr_cholesky, "a Cholesky factor of a correlation matrix"),
        (constraints.ordered_vector, "an increasing vector"),
        (constraints.positive_ordered_vector, "an increasing vector of positive entries"),
        (constraints.real, "a finite number"),
        (constraints.real_vector, "a vector of finite numbers"),
    ]
    for known, text in words:
        if c is known or type(c) is type(known):
            return text
    if lower is not None and upper is not None:
        closed = not isinstance(c, constraints.open_interval)
        left, right = ("[", "]") if closed else ("(", ")")
        return f"in {left}{_shown(lower)}, {_shown(upper)}{right}"
    if lower is not None:
        sign = "≥" if "Eq" in type(c).__name__ or c is constraints.nonnegative else ">"
        return f"{sign} {_shown(lower)}"
    if upper is not None:
        return f"< {_shown(upper)}"
    return repr(c)


def _check_support(d: dist.Distribution, where: str) -> None:
    """An interval support whose bounds are fixed numbers must not be empty."""
    try:
        support = d.support
    except Exception:
        return
    while isinstance(support, constraints.independent):
        support = support.base_constraint
    lower = _concrete(getattr(support, "lower_bound", None))
    upper = _concrete(getattr(support, "upper_bound", None))
    if lower is None or upper is None:
        return
    with np.errstate(invalid="ignore"):
        empty = ~(np.asarray(lower) < np.asarray(upper))
    if not empty.any():
        return
    family = type(d).__name__
    names = ("low", "high") if hasattr(d, "low") and hasattr(d, "high") else None
    given = (
        f"low = {_shown(lower)} and high = {_shown(upper)}"
        if names
        else f"support {_shown(lower)} to {_shown(upper)}"
    )
    fix = (
        f"put the lower bound first: {family}(low={_shown(upper)}, high={_shown(lower)})"
        if names and np.ndim(lower) == 0 and np.ndim(upper) == 0
        else "give it a lower bound below its upper bound"
    )
    raise ValueError(
        f"{where}, {family}, has an empty support: {given}, and the lower bound must lie below "
        f"the upper one; its density would be sampled through a map onto an empty interval "
        f"(a NaN start). Fix: {fix}."
    )


def _concrete(value: Any) -> np.ndarray | None:
    """``value`` as a NumPy array when it is a concrete number or array, else ``None``."""
    if value is None or isinstance(value, jax.core.Tracer):
        return None
    try:
        array = np.asarray(value)
    except Exception:
        return None
    return array if np.issubdtype(array.dtype, np.number) else None


def _holds(constraint: Any, value: np.ndarray) -> np.ndarray | None:
    """Whether ``value`` satisfies ``constraint``, per entry where it says so (``None`` when
    NumPy cannot evaluate it)."""
    try:
        with np.errstate(invalid="ignore"):
            return np.asarray(constraint(np.asarray(value, np.float64)), bool)
    except Exception:
        return None


def _inside(support: Any, value: np.ndarray) -> np.ndarray | None:
    """Whether ``value`` lies in ``support``: the constraint itself, but a simplex may miss a
    sum of 1 by :data:`SIMPLEX_TOLERANCE` (a float32 vector of many entries does)."""
    base = support
    while isinstance(base, constraints.independent):
        base = base.base_constraint
    if base is constraints.simplex:
        total = value.sum(-1)
        return np.asarray((value >= 0).all(-1) & (np.abs(total - 1) <= SIMPLEX_TOLERANCE))
    return _holds(support, value)


def _how_far(support: Any, value: np.ndarray) -> str:
    if support is constraints.simplex:
        return f", and its entries sum to {_shown(value.sum(-1))}"
    return ""


def _shown(value: Any) -> str:
    """A number as ``2``, an array as ``[0.5, 0.6, 0.2]`` (its first entries when large)."""
    array = np.asarray(value)
    if array.ndim == 0:
        return f"{array.item():.6g}"
    entries = ", ".join(f"{v:.4g}" for v in array.reshape(-1)[:SHOWN].tolist())
    more = f", … ({array.size} entries)" if array.size > SHOWN else ""
    return f"[{entries}{more}]"


def _hint(family: str, argument: str) -> str:
    if family == "LKJCholesky" and argument == "concentration":
        return " (η = 1 is uniform over correlation matrices; η > 1 favours the identity)"
    return ""

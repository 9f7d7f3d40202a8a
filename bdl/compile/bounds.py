"""Parameters whose bounds read other parameters (:class:`bdl.Bounded`), in a compiled model.

A bounded leaf's constrained value x = t(u; a(θ₋), b(θ₋)) depends on its own coordinate u and on
the constrained values θ₋ of the parameters its bounds (and prior) read. :func:`constrain`
fills the bounded leaves in an order in which every bound reads values already known — each pass
constrains the leaves whose bounds can be read, until none is left, so any acyclic set of
dependencies is resolved, and a cycle is named. The map from all sampled coordinates to all
parameters is then triangular, and log p(u) sums each leaf's log p(x) + log |∂x/∂u|
(:func:`log_prior`). :func:`unconstrain` inverts a set of constrained values, which are all
known at once. Nothing here runs for a model without a bounded leaf.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from bdl.dsl.bounded import Bounded, Parameters, Pending

PyTree = Any


def bounded_leaves(model: Any) -> list[int]:
    """The indices of the network leaves under a :class:`bdl.Bounded` prior.

    Args:
        model: the compiled model.

    Returns:
        Their positions in the model's leaf order.
    """
    return [i for i, p in enumerate(model.leaf_priors) if isinstance(p, Bounded)]


def _named(model: Any, net: list[Any], lik: dict[str, Any]) -> dict[str, Any]:
    values = {info.path: v for info, v in zip(model.leaf_infos, net, strict=True) if v is not None}
    values.update({f"lik/{name}": v for name, v in lik.items()})
    return values


def _fill(
    model: Any, net: list[Any], lik: dict[str, Any], value: Callable[[int, Parameters], Any]
) -> list[Any]:
    """``net`` with each bounded leaf i set to ``value(i, parameters)``, in dependency order."""
    pending = bounded_leaves(model)
    if not pending:
        return net
    net, values = list(net), _named(model, net, lik)
    paths = [info.path for info in model.leaf_infos]
    while pending:
        waiting = frozenset(paths[i] for i in pending)
        left = []
        for i in pending:
            try:
                net[i] = value(i, Parameters(values, waiting, owner=paths[i]))
            except Pending:
                left.append(i)
                continue
            values[paths[i]] = net[i]
        if len(left) == len(pending):
            names = ", ".join(paths[i] for i in left)
            raise ValueError(
                f"bdl.Bounded: the bounds of {names} read each other in a cycle, so none of them "
                "can be constrained first; let a bound read only parameters whose own bounds do "
                "not read it back (Stan's rule: a bound reads parameters declared before it)."
            )
        pending = left
    return net


def constrain(model: Any, leaves: list[Any], net: list[Any], lik: dict[str, Any]) -> list[Any]:
    """The constrained network leaves with the bounded ones filled in.

    Args:
        model: the compiled model.
        leaves: the sampled (unconstrained) leaves, in leaf order.
        net: the constrained leaves, ``None`` at the bounded ones.
        lik: the likelihood's learned parameters, constrained.

    Returns:
        Every leaf constrained.
    """
    priors, infos = model.leaf_priors, model.leaf_infos
    return _fill(model, net, lik, lambda i, p: priors[i].constrain_given(leaves[i], p, infos[i]))


def unconstrain(
    model: Any, values: list[Any], unconstrained: list[Any], lik: dict[str, Any]
) -> list[Any]:
    """The sampled coordinates of the bounded leaves, from constrained values.

    Args:
        model: the compiled model.
        values: every network leaf, constrained.
        unconstrained: the sampled leaves (the bounded ones' entries are replaced).
        lik: the likelihood's learned parameters, constrained.

    Returns:
        The sampled leaves with the bounded ones' coordinates (not finite outside the bounds).
    """
    out = list(unconstrained)
    named = _named(model, values, lik)
    for i in bounded_leaves(model):
        info = model.leaf_infos[i]
        out[i] = model.leaf_priors[i].unconstrain_given(
            values[i], Parameters(named, owner=info.path), info
        )
    return out


def log_prior(
    model: Any, leaves: list[Any], values: list[Any], lik: dict[str, Any]
) -> jax.Array | float:
    """Σ over the bounded leaves of log p(x) + log |∂x/∂u|.

    Args:
        model: the compiled model.
        leaves: the sampled leaves.
        values: every network leaf, constrained.
        lik: the likelihood's learned parameters, constrained.

    Returns:
        Their log-density in the sampled space (0 without bounded leaves).
    """
    named = _named(model, values, lik)
    total = 0.0
    for i in bounded_leaves(model):
        info = model.leaf_infos[i]
        view = Parameters(named, owner=info.path)
        total = total + model.leaf_priors[i].log_prob_given(leaves[i], view, info)
    return total


def sample(model: Any, keys: jax.Array, net: list[Any], lik: dict[str, Any]) -> list[Any]:
    """Start draws of the bounded leaves, given draws of every other parameter.

    Args:
        model: the compiled model.
        keys: one random key per network leaf.
        net: the other leaves' draws, ``None`` at the bounded ones.
        lik: the likelihood's learned parameters' draws.

    Returns:
        Every leaf drawn (constrained).

    Raises:
        NotImplementedError: a bounded leaf's prior is improper (one bound, flat).
    """
    priors, infos = model.leaf_priors, model.leaf_infos
    return _fill(model, net, lik, lambda i, p: priors[i].sample_given(keys[i], p, infos[i]))


def check(model: Any) -> None:
    """Raise before anything is compiled when a bound cannot be evaluated: an unknown name, a
    cycle, a shape that does not fit, a prior function that returns no distribution (the
    energy is evaluated abstractly at the initial position).

    Args:
        model: the compiled model.

    Raises:
        ValueError: what is wrong, naming the parameter and the argument.
    """
    if bounded_leaves(model):
        jax.eval_shape(model.log_prior, model.initial_position)

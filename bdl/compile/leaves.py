"""The network's parameter leaves between the sampled and the constrained space.

Each leaf has its prior's transform: the identity, ``biject_to(support)`` of a constrained prior
(log p(u) = log p(t(u)) + log |t′(u)|), the non-centred map of a hierarchical prior (which reads
its group's hyper-parameters), or the bounds of :class:`bdl.Bounded`, which read other
parameters and are resolved after the others (:mod:`bdl.compile.bounds`). The compiled model's
``constrain``, ``unconstrain`` and ``log_prior`` call these for the network and handle the
likelihood's learned parameters and the hyper-parameters themselves.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from bdl.compile import bounds
from bdl.compile.starts import group_values
from bdl.dsl.bounded import Bounded
from bdl.dsl.hierarchical import HierarchicalLeaf

PyTree = Any


def constrain(model: Any, net: PyTree, hyper: PyTree, lik: dict[str, Any]) -> list[Any]:
    """The network's leaves in their constrained spaces, in leaf order.

    Args:
        model: the compiled model.
        net: ``position["net"]``, in the sampled space.
        hyper: the hierarchical hyper-parameters, constrained.
        lik: the likelihood's learned parameters, constrained (bounds may read them).

    Returns:
        The constrained leaves.
    """
    leaves = model.net_treedef.flatten_up_to(net)
    out = []
    for u, prior, info in zip(leaves, model.leaf_priors, model.leaf_infos, strict=True):
        if isinstance(prior, HierarchicalLeaf):
            out.append(prior.constrain_given(u, group_values(prior, hyper), info))
        elif isinstance(prior, Bounded):
            out.append(None)  # its bounds read other parameters: filled in below
        else:
            t = prior.transform(info)
            out.append(u if t is None else t(u))
    return bounds.constrain(model, leaves, out, lik)


def unconstrain(model: Any, net: PyTree, hyper: PyTree, lik: dict[str, Any]) -> list[Any]:
    """The network's leaves in the sampled space, from constrained values.

    Args:
        model: the compiled model.
        net: the constrained weights.
        hyper: the hierarchical hyper-parameters, constrained.
        lik: the likelihood's learned parameters, constrained.

    Returns:
        The sampled leaves, in leaf order.
    """
    values = [jnp.asarray(v) for v in model.net_treedef.flatten_up_to(net)]
    out = []
    for v, prior, info in zip(values, model.leaf_priors, model.leaf_infos, strict=True):
        if isinstance(prior, HierarchicalLeaf):
            out.append(prior.unconstrain_given(v, group_values(prior, hyper), info))
        elif isinstance(prior, Bounded):
            out.append(None)  # below, with every other value known
        else:
            t = prior.transform(info)
            out.append(v if t is None else t.inv(v))
    return bounds.unconstrain(model, values, out, lik)


def log_prior(model: Any, position: PyTree, hyper: PyTree) -> jax.Array:
    """Σ over the network's leaves of log p(u), log-Jacobians included.

    Args:
        model: the compiled model.
        position: a position in the sampled space.
        hyper: the hierarchical hyper-parameters, constrained.

    Returns:
        The scalar log-density of the network's sampled coordinates.
    """
    leaves = model.net_treedef.flatten_up_to(position["net"])
    total = jnp.zeros(())
    for u, prior, info in zip(leaves, model.leaf_priors, model.leaf_infos, strict=True):
        if isinstance(prior, HierarchicalLeaf):
            total = total + prior.log_prob_given(u, group_values(prior, hyper), info)
        elif isinstance(prior, Bounded):
            continue  # below, with the values its bounds read
        elif (t := prior.transform(info)) is None:
            total = total + prior.log_prob(u, info)
        else:
            v = t(u)
            total = total + prior.log_prob(v, info) + jnp.sum(t.log_abs_det_jacobian(u, v))
    if not bounds.bounded_leaves(model):
        return total
    net, lik = model.constrain(position)
    return total + bounds.log_prior(model, leaves, model.net_treedef.flatten_up_to(net), lik)

"""Draws in a model's own named, constrained parameters.

Positions hold the sampled, unconstrained coordinates u (log σ, a simplex's stick-breaking
logits, an ordered vector's first entry and log-increments, a correlation factor's K(K − 1)/2
coordinates). :func:`named_draws` maps each draw back through the model's bijectors, t(u), and
names it by its place in the model: ``net/<path>`` for the network's weights, ``lik/<name>``
for the likelihood's learned parameters, ``hyper/<name>/…`` for hierarchical hyper-parameters.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from bdl.compile.compiled_model import CompiledModel
from bdl.compile.target import Target
from bdl.utils.trees import path_to_str

PyTree = Any


def named_draws(target: Target, positions: PyTree) -> dict[str, np.ndarray]:
    """Constrained draws by parameter name from positions with (chain, draw) axes: the
    network's weights (``net/...``), the likelihood's parameters (``lik/...``) and the
    hierarchical priors' hyper-parameters (``hyper/<name>/...``); a potential's positions as
    they are."""
    lead = jax.tree.leaves(positions)[0].shape[:2]
    flat = jax.tree.map(lambda a: np.reshape(a, (-1, *np.shape(a)[2:])), positions)
    if isinstance(target, CompiledModel):

        def by_name(position: PyTree) -> dict[str, PyTree]:
            net, lik = target.constrain(position)
            named = {"net": net, "lik": lik}
            if target.hyper_groups:  # hierarchical priors' loc and scale, e.g. hyper/ard/w/scale
                named["hyper"] = target.constrain_hyper(position)
            return named

        constrained = jax.lax.map(by_name, flat)
    else:
        constrained = flat
    pairs, _ = jax.tree_util.tree_flatten_with_path(constrained)
    out = {}
    for path, leaf in pairs:
        name = path_to_str(path) or "position"
        out[name] = np.asarray(leaf).reshape(*lead, *np.shape(leaf)[1:])
    return out

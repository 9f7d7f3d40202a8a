"""The named starts of :meth:`bdl.compile.compiled_model.CompiledModel.init_positions` that are
more than a broadcast: a draw from the prior, the declared parameters plus noise, and the
mode found by Adam (``init="map"``). Each takes the compiled model as its first argument and
works on one chain (the model ``vmap``s them) unless it says otherwise.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from numpyro.distributions.transforms import biject_to

from bdl.compile import bounds
from bdl.compile.minimise import minimise
from bdl.compile.prior_checks import check_declared_support
from bdl.compile.start_draws import FALLBACK_STREAM, finite_or_uniform, hyper_draw, site_draw
from bdl.dsl.bounded import Bounded
from bdl.dsl.hierarchical import HierarchicalLeaf
from bdl.utils.trees import path_to_str

PyTree = Any

#: Adam steps and learning rate of ``init="map"``
MAP_STEPS = 500
MAP_LEARNING_RATE = 1e-2


def prior_draw(model: Any, key: jax.Array) -> PyTree:
    """One draw from the prior of every sampled parameter, in the sampled space.

    A parameter whose prior cannot be drawn from — its sampler raises (NumPyro's inverse CDF
    of a truncated Student-t needs TensorFlow Probability), or the draw is not finite in the
    sampled space — starts from Stan's default instead: u ~ uniform(−2, 2) on the
    unconstrained scale, with a warning naming it (:mod:`bdl.compile.start_draws`).

    Args:
        model: the compiled model.
        key: a JAX random key.

    Returns:
        A position: the network's weights, the learned likelihood parameters and the
            hierarchical hyper-parameters, each from its prior.

    Raises:
        NotImplementedError: a prior is improper (nothing to draw from).
    """
    infos, priors = model.leaf_infos, model.leaf_priors
    lik_priors = model.likelihood.param_priors
    key, k_hyper = jax.random.split(key)
    keys = jax.random.split(key, len(infos) + len(lik_priors))
    groups = model.hyper_groups
    hyper = hyper_draw(groups, k_hyper) if groups else None
    net = [
        None  # bdl.Bounded: drawn below, given the values its bounds read
        if isinstance(p, Bounded)
        else leaf_draw(p, k, info, hyper)
        for k, p, info in zip(keys[: len(infos)], priors, infos, strict=True)
    ]
    # learned likelihood parameters (e.g. the Gaussian σ) are drawn from their priors too
    lik = {
        name: site_draw(
            f"lik/{name}",
            lambda k=k, prior=prior: prior.sample(k),
            biject_to(prior.support),
            tuple(prior.batch_shape + prior.event_shape),
            k,
        )
        for k, (name, prior) in zip(keys[len(infos) :], lik_priors.items(), strict=True)
    }
    net = bounds.sample(model, keys[: len(infos)], net, lik)
    return model.unconstrain(model.net_treedef.unflatten(net), lik if lik_priors else None, hyper)


def leaf_draw(prior: Any, key: jax.Array, info: Any, hyper: PyTree) -> jax.Array:
    """A draw of one network leaf from its prior (constrained), given the hyper-parameters,
    through :func:`site_draw`.

    Args:
        prior: the leaf's prior.
        key: a JAX random key.
        info: the leaf's path and shape.
        hyper: the hierarchical hyper-parameters, constrained (``None`` without any).

    Returns:
        The draw.
    """
    if isinstance(prior, HierarchicalLeaf):
        group = group_values(prior, hyper)
        return site_draw(
            info.path,
            lambda: prior.sample_given(key, group, info),
            None,
            info.shape,
            key,
            lambda u: prior.constrain_given(u, group, info),
        )
    return site_draw(
        info.path, lambda: prior.sample(key, info), prior.transform(info), info.shape, key
    )


def prior_draws(model: Any, key: jax.Array, keys: jax.Array) -> PyTree:
    """:func:`prior_draw` for every chain, with the entries of a chain's leaf that are not
    finite in the sampled space replaced by Stan's default start
    (:func:`bdl.compile.start_draws.finite_or_uniform`).

    Args:
        model: the compiled model.
        key: the start's random key.
        keys: one key per chain, split from ``key``.

    Returns:
        The positions, with a leading chain axis.

    Raises:
        NotImplementedError: a prior is improper.
    """
    positions = jax.vmap(lambda k: prior_draw(model, k))(keys)
    return finite_or_uniform(positions, jax.random.fold_in(key, FALLBACK_STREAM))


def group_values(prior: HierarchicalLeaf, hyper: PyTree) -> dict[str, jax.Array]:
    """The hyper-parameters (``{"loc": …, "scale": …}``) of the group a hierarchical prior's
    leaf belongs to.

    Args:
        prior: the leaf's hierarchical prior.
        hyper: every group's hyper-parameters, by group name (and leaf, for per-leaf groups).

    Returns:
        The group's hyper-parameters.
    """
    name, leaf = prior.group
    return hyper[name] if leaf is None else hyper[name][leaf]


def perturbed(position: PyTree, key: jax.Array) -> PyTree:
    """``position`` plus independent noise N(0, s²) per leaf, s = 10 % of the leaf's RMS (0.01
    for an all-zero leaf).

    Args:
        position: the declared parameters, in the sampled space.
        key: a JAX random key.

    Returns:
        The perturbed position.
    """
    leaves, treedef = jax.tree.flatten(position)
    keys = jax.random.split(key, len(leaves))

    def jitter(x: jax.Array, k: jax.Array) -> jax.Array:
        rms = jnp.sqrt(jnp.mean(jnp.square(x)))
        scale = jnp.where(rms > 0, 0.1 * rms, 0.01)
        return x + scale * jax.random.normal(k, jnp.shape(x), jnp.result_type(x))

    return treedef.unflatten([jitter(x, k) for x, k in zip(leaves, keys, strict=True)])


def broadcast(position: PyTree, num_chains: int) -> PyTree:
    """``position`` repeated along a new leading chain axis.

    Args:
        position: a position without a chain axis.
        num_chains: the chain axis' size.

    Returns:
        The position with a leading axis of ``num_chains``.
    """
    return jax.tree.map(lambda a: jnp.broadcast_to(a, (num_chains, *jnp.shape(a))), position)


def map_start(model: Any, key: jax.Array, num_chains: int) -> PyTree:
    """``init="map"``: the ``"auto"`` start, then :data:`MAP_STEPS` Adam steps (learning rate
    :data:`MAP_LEARNING_RATE`) on the mean minibatch loss Ũ/n, per chain.

    Args:
        model: the compiled model.
        key: a JAX random key.
        num_chains: how many chains.

    Returns:
        The positions, with a leading chain axis.
    """
    k_start, k_opt = jax.random.split(key)
    start = model.init_positions(k_start, num_chains, "auto")
    optimizer = optax.adam(MAP_LEARNING_RATE)
    return jax.vmap(lambda p, k: minimise(model, optimizer, p, k, MAP_STEPS))(
        start, jax.random.split(k_opt, num_chains)
    )


def named_start(model: Any, key: jax.Array, num_chains: int, init: str) -> PyTree:
    """The positions of a named start (:meth:`CompiledModel.init_positions` says which).

    Args:
        model: the compiled model.
        key: a JAX random key.
        num_chains: how many chains.
        init: one of the model's ``INITS``.

    Returns:
        The positions, with a leading chain axis.

    Raises:
        ValueError: a start this model cannot make (``"network"`` without a key-initialised
            network, ``"prior"`` with an improper prior).
    """
    keys = jax.random.split(key, num_chains)
    if init == "map":
        return map_start(model, key, num_chains)
    if init == "auto":
        if model.adapter.init is not None:
            init = "network"
        else:
            try:
                return prior_draws(model, key, keys)
            except NotImplementedError:  # an improper prior
                init = "perturbed"
    if init == "perturbed":
        return jax.vmap(lambda k: perturbed(model.initial_position, k))(keys)
    if init == "network":
        check_network_init(model)
        return jax.vmap(lambda k: model.unconstrain(model.adapter.init(k)))(keys)
    if init == "prior":
        try:
            return prior_draws(model, key, keys)
        except NotImplementedError:
            raise ValueError(
                "init='prior' needs a proper prior to draw from, and this model has an "
                "improper one; use init='auto', 'map' or 'fixed', or a position."
            ) from None
    return broadcast(model.initial_position, num_chains)  # "fixed"


def check_network_init(model: Any) -> None:
    """Refuse ``init="network"`` for a model that has no network initialised from a key.

    Args:
        model: the compiled model.

    Raises:
        ValueError: the model has no network, or its network is a built instance.
    """
    if model.adapter.flavour == "none":
        raise ValueError(
            "init='network': this model has no network; use init='prior', 'fixed', 'map' "
            "or 'auto', or pass a position."
        )
    if model.adapter.init is None:
        raise ValueError(
            f"init='network' needs a network that initialises from a key ("
            f"{model.adapter.flavour} instances are fixed); use init='prior' or "
            "'fixed', or pass params=key -> params."
        )


def check_declared_start(model: Any, init: Any) -> None:
    """Refuse a start from the declared parameters (``"fixed"``, ``"perturbed"``, ``"auto"`` or
    ``"map"`` without a network initialiser) that is not finite in the sampled space.

    Args:
        model: the compiled model.
        init: the start.

    Raises:
        ValueError: ``init="network"`` that the model cannot make, or declared parameters
            outside their prior's support (e.g. 0 under a HalfNormal prior).
    """
    if init == "network":
        check_network_init(model)
    if not isinstance(init, str) or init in ("network", "prior"):
        return
    if init in ("auto", "map") and model.adapter.init is not None:
        return  # the network's own initialiser
    check_declared_support(model, init)  # an off-simplex vector would be projected silently
    flat, _ = jax.tree_util.tree_flatten_with_path(model.initial_position)
    for path, leaf in flat:
        if not np.all(np.isfinite(np.asarray(leaf))):
            raise ValueError(
                f"init={init!r} starts from the declared parameters, but "
                f"{path_to_str(path)} is not finite in the sampled space: the parameters lie "
                "outside their prior's support (e.g. 0 under a HalfNormal prior). Use "
                "init='prior', or pass a position."
            )

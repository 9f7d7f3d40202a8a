"""Network adapters: one ``apply(params, x)`` interface over Flax, Equinox and plain functions.

Every supported network flavour is lowered to a :class:`NetworkAdapter`: a pure, batched
``apply(params, x) -> outputs`` over a parameter pytree of plain arrays, an optional key-based
initialiser, and the convention for reading a weight's fan-in (Flax stores kernels as
``(..., in, out)``, Equinox as ``(out, in, ...)``).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from bdl.utils.owner_jit import once_options
from bdl.utils.rng import initialisation_draws

PyTree = Any
Flavour = Literal["linen", "nnx", "equinox", "function", "none"]


@dataclasses.dataclass(frozen=True, eq=False)
class NetworkAdapter:
    """A network lowered to pure functions over a parameter pytree.

    Attributes:
        flavour: which front-end the network came from.
        apply: ``apply(params, x)`` on a batch ``x`` (example axis first).
        params: initial parameters (a pytree of arrays).
        init: ``init(key) -> params`` drawing fresh initial parameters, or ``None`` when the
            network was given as a built instance that cannot be re-initialised.
        fan_in_axes: ``"leading"`` if a weight's input axes are all but the last (Flax),
            ``"trailing"`` if they are all but the first (Equinox).
    """

    flavour: Flavour
    apply: Callable[[PyTree, jax.Array], jax.Array]
    params: PyTree
    init: Callable[[jax.Array], PyTree] | None
    fan_in_axes: Literal["leading", "trailing"]

    def fan_in(self, leaf: Any) -> int:
        """Fan-in of a weight leaf; 1 for scalars and vectors (biases)."""
        shape = np.shape(leaf)
        if len(shape) < 2:
            return 1
        if self.fan_in_axes == "leading":
            return int(np.prod(shape[:-1]))
        return int(np.prod(shape[1:]))


def describe_network(network: Any) -> Flavour:
    """Classify a user network object, raising a clear error for anything unsupported.

    A Flax module exists only once its front-end is imported, so the front-ends are looked up
    among the loaded modules rather than imported here (``flax.nnx`` alone takes ≈ 0.2 s).
    """
    if network is None:  # a model without a network: the likelihood reads its own parameters
        return "none"
    linen = sys.modules.get("flax.linen")
    if linen is not None and isinstance(network, linen.Module):
        return "linen"
    nnx = sys.modules.get("flax.nnx")
    if nnx is not None and isinstance(network, nnx.Module):
        return "nnx"
    if isinstance(network, eqx.Module):
        return "equinox"
    if callable(network):
        return "function"
    raise TypeError(
        "Model(network=...) must be a Flax linen module, a Flax nnx module, an Equinox module, "
        f"or a plain function f(params, x); got {type(network).__name__}."
    )


class NetworkStateError(ValueError):
    """The network keeps state besides its parameters (e.g. batch normalisation statistics)."""


#: what to use instead of batch normalisation, and why (the error of :func:`check_normalisation`)
_NORMALISATION_ADVICE = (
    "Batch normalisation normalises with statistics of the current minibatch (or running "
    "averages of past ones), so one example's output depends on which other examples share its "
    "minibatch: the minibatch energy is then not an unbiased estimate of a full-data energy "
    "U(θ), and the posterior exp(−U(θ)/T) is not a function of θ alone. Use a normalisation "
    "computed from each example by itself: bdl.layers.FilterResponseNorm (filter response "
    "normalisation with TLU, what Wenzel et al. 2020 use for their ResNet-20), "
    "flax.linen.GroupNorm or flax.linen.LayerNorm (flax.nnx.GroupNorm / LayerNorm for nnx)."
)


def check_normalisation(network: Any) -> None:
    """Reject a network that contains batch normalisation (Flax linen or nnx, Equinox)."""
    found = None
    nnx = sys.modules.get("flax.nnx")
    if nnx is not None and isinstance(network, nnx.Module):
        found = next(
            (type(m).__name__ for _, m in nnx.iter_graph(network) if isinstance(m, nnx.BatchNorm)),
            None,
        )
    elif isinstance(network, eqx.Module):
        leaves = jax.tree.leaves(network, is_leaf=lambda m: isinstance(m, eqx.nn.BatchNorm))
        found = next((type(m).__name__ for m in leaves if isinstance(m, eqx.nn.BatchNorm)), None)
    if found is not None:
        raise NetworkStateError(
            f"Model(network=...) contains {found} (batch normalisation). " + _NORMALISATION_ADVICE
        )


def make_adapter(
    network: Any,
    example_x: jax.Array,
    *,
    params: PyTree | Callable[[jax.Array], PyTree] | None = None,
    batched: bool | None = None,
    key: jax.Array | None = None,
) -> NetworkAdapter:
    """Lower a user network to a :class:`NetworkAdapter`.

    Args:
        network: the user's network (see :func:`describe_network`).
        example_x: a batch of inputs, used only for shapes (Flax linen initialisation).
        params: for a plain function, its initial parameters or ``init(key) -> params``.
        batched: whether the network maps a batch (``True``) or a single example (``False``,
            then it is ``vmap``-ed). Default: ``False`` for Equinox modules (their convention),
            ``True`` otherwise.
        key: key for the first initialisation (default ``jax.random.key(0)``), drawn with
            :func:`bdl.utils.rng.initialisation_draws`; per-chain starts in ``bdl.sample`` draw
            with the run's own keys.
    """
    flavour = describe_network(network)
    key = jax.random.key(0) if key is None else key
    if flavour == "none":
        return NetworkAdapter("none", _no_output, {}, None, "leading")
    if batched is None:
        batched = flavour != "equinox"

    def batch(fn: Callable[[PyTree, jax.Array], jax.Array]) -> Callable:
        if batched:
            return fn
        return lambda p, x: jax.vmap(lambda xi: fn(p, xi))(x)

    check_normalisation(network)
    if flavour == "linen":
        example = example_x if batched else example_x[0]
        collections = jax.eval_shape(network.init, key, example)
        others = sorted(set(collections) - {"params"})
        if "batch_stats" in others:
            raise NetworkStateError(
                "Model(network=...) uses batch normalisation (variable collection "
                "'batch_stats'). " + _NORMALISATION_ADVICE
            )
        if others:
            raise NetworkStateError(
                f"Model(network=...) keeps variable collection(s) {others} besides 'params'; bdl "
                "samples the parameters only and carries no other state between steps, so the "
                "network's output must be a function of its parameters and input alone."
            )

        def linen_init(k: jax.Array) -> PyTree:
            with initialisation_draws():
                return network.init(k, example)["params"]

        # the first initialisation runs once per compiled model: compiled as such
        # (bdl.utils.owner_jit.once_options); the adapter's may be nested in other programs
        first = jax.jit(linen_init, compiler_options=once_options())(key)
        return NetworkAdapter(
            flavour,
            batch(lambda p, x: network.apply({"params": p}, x)),
            first,
            jax.jit(linen_init),
            "leading",
        )

    if flavour == "nnx":
        from flax import nnx

        graphdef, state, rest = nnx.split(network, nnx.Param, ...)
        pure = state.to_pure_dict()

        def nnx_apply(p: PyTree, x: jax.Array) -> jax.Array:
            st = jax.tree.map(lambda v: v, state)
            nnx.replace_by_pure_dict(st, p)
            return nnx.merge(graphdef, st, rest)(x)

        return NetworkAdapter("nnx", batch(nnx_apply), pure, None, "leading")

    if flavour == "equinox":
        dynamic, static = eqx.partition(network, eqx.is_inexact_array)

        def eqx_apply(p: PyTree, x: jax.Array) -> jax.Array:
            return eqx.combine(p, static)(x)

        return NetworkAdapter("equinox", batch(eqx_apply), dynamic, None, "trailing")

    if params is None:
        raise ValueError(
            "Model(params=...) is required when network is a plain function f(params, x): pass "
            "the initial parameter pytree, or a function key -> parameters."
        )
    if callable(params):
        with initialisation_draws():
            first = params(key)
        return NetworkAdapter("function", batch(network), first, params, "leading")
    return NetworkAdapter("function", batch(network), params, None, "leading")


def _no_output(params: PyTree, x: jax.Array) -> jax.Array:
    """The output of a model without a network: no column per example, shape (batch, 0)."""
    return jnp.zeros((x.shape[0], 0), jnp.float32)

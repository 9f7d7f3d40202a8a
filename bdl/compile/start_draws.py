"""Prior draws for a start that do not fail: where a parameter's prior cannot be drawn from —
its sampler raises (NumPyro's inverse CDF of a truncated Student-t needs TensorFlow
Probability), or the draw is not finite in the sampled space (a draw at the edge of the
support, whose unconstrained value is ±∞) — that parameter starts from Stan's default instead,
u ~ uniform(−2, 2) on the unconstrained scale, and a warning names it. The prior's density is
still what is sampled; only the start is not a draw from it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions.transforms import Transform, biject_to

from bdl.dsl.hierarchical import HyperGroup, assemble_hyper
from bdl.utils.dtypes import float_dtype
from bdl.utils.trees import path_to_str

PyTree = Any

#: a start that is no prior draw is uniform(−FALLBACK_RANGE, FALLBACK_RANGE) per entry on the
#: unconstrained scale (Stan's default)
FALLBACK_RANGE = 2.0
#: the key stream of those draws (folded into the site's key)
FALLBACK_STREAM = 0x5747


def hyper_draw(groups: tuple[HyperGroup, ...], key: jax.Array) -> PyTree:
    """A draw of every hierarchical hyper-parameter from its prior (constrained space), as
    :func:`bdl.dsl.hierarchical.sample_hyper` draws them, with :func:`fallback_draw` for one
    whose sampler raises.

    Args:
        groups: the model's hyper-parameter groups.
        key: a JAX random key.

    Returns:
        The hyper-parameters, by group name (and leaf).
    """
    values = []
    for i, g in enumerate(groups):
        keys = jax.random.split(jax.random.fold_in(key, i), len(g.spec.hyper_priors))
        leaf = "" if g.leaf is None else f"/{g.leaf}"
        values.append(
            {
                k: site_draw(
                    f"hyper/{g.spec.name}{leaf}/{k}",
                    lambda kk=kk, p=p, g=g: (
                        p.expand(g.shape).sample(kk) if g.shape else p.sample(kk)
                    ),
                    biject_to(p.support),
                    tuple(g.shape) + tuple(p.event_shape),
                    kk,
                )
                for kk, (k, p) in zip(keys, g.spec.hyper_priors.items(), strict=True)
            }
        )
    return assemble_hyper(groups, values)


def site_draw(
    path: str,
    draw: Callable[[], jax.Array],
    transform: Transform | None,
    shape: tuple[int, ...],
    key: jax.Array,
    constrain: Callable[[jax.Array], jax.Array] | None = None,
) -> jax.Array:
    """``draw()``, or, when it raises anything but ``NotImplementedError`` (an improper prior),
    :func:`fallback_draw` mapped into the support, with a warning naming ``path``.

    Args:
        path: the parameter's name in messages (``net/w``, ``lik/scale``).
        draw: the prior draw, in the constrained space.
        transform: the bijection from the unconstrained space (``None``: the identity).
        shape: the parameter's shape (constrained).
        key: the site's random key.
        constrain: maps the unconstrained value into the parameter's space, when
            ``transform`` does not say how (a hierarchical leaf's w = μ + σ·z).

    Returns:
        The draw, in the constrained space.

    Raises:
        NotImplementedError: the prior is improper.
    """
    try:
        return draw()
    except NotImplementedError:
        raise
    except Exception as err:  # the sampler cannot run here; the density still can
        reason = f"{type(err).__name__}: {str(err).strip().rstrip('.')}"
    unconstrained = shape if transform is None else tuple(transform.inverse_shape(shape))
    u = fallback_draw(jax.random.fold_in(key, FALLBACK_STREAM), unconstrained)
    warn_fallback(path, f"its prior's sampler fails ({reason})")
    if constrain is not None:
        return constrain(u)
    return u if transform is None else transform(u)


def fallback_draw(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Stan's default start: u ~ uniform(−2, 2) per entry, on the unconstrained scale.

    Args:
        key: a JAX random key.
        shape: the unconstrained shape.

    Returns:
        The draw, in the current floating-point type.
    """
    return jax.random.uniform(
        key, shape, float_dtype(), minval=-FALLBACK_RANGE, maxval=FALLBACK_RANGE
    )


def finite_or_uniform(positions: PyTree, key: jax.Array) -> PyTree:
    """``positions`` (a leading chain axis) with every chain's leaf that is not finite — a prior
    draw at the edge of its support, whose unconstrained value is ±∞, or a NaN from the
    sampler — replaced by :func:`fallback_draw`, and one warning per such leaf, at run time
    (one host callback for all the leaves and chains).

    Args:
        positions: positions in the sampled space, with a leading chain axis (traced).
        key: a JAX random key.

    Returns:
        The positions.
    """
    flat, treedef = jax.tree_util.tree_flatten_with_path(positions)
    if not flat:
        return positions
    keys = jax.random.split(key, len(flat))
    out, bad = [], []
    for k, (_, leaf) in zip(keys, flat, strict=True):
        chains = jnp.shape(leaf)[0]
        ok = jnp.all(jnp.isfinite(jnp.reshape(leaf, (chains, -1))), axis=1)
        uniform = fallback_draw(k, jnp.shape(leaf)).astype(leaf.dtype)
        out.append(jnp.where(jnp.reshape(ok, (chains,) + (1,) * (leaf.ndim - 1)), leaf, uniform))
        bad.append(~jnp.all(ok))
    names = tuple(path_to_str(path) for path, _ in flat)
    jax.debug.callback(partial(_warn_not_finite, names), jnp.stack(bad), ordered=False)
    return treedef.unflatten(out)


def _warn_not_finite(names: tuple[str, ...], bad: Any) -> None:
    for name, flag in zip(names, np.asarray(bad).reshape(-1), strict=True):
        if flag:
            warn_fallback(name, "its prior draw is not finite in the sampled space")


def warn_fallback(path: str, reason: str) -> None:
    """Say, once per parameter and reason, that ``path`` starts from uniform(−2, 2) on the
    unconstrained scale instead of a prior draw.

    Args:
        path: the parameter's name.
        reason: why the prior draw was not used.
    """
    warnings.warn(
        f"the start of {path} is not a draw from its prior: {reason}. It starts from "
        f"uniform(−{FALLBACK_RANGE:g}, {FALLBACK_RANGE:g}) on the unconstrained scale instead "
        "(Stan's default), which every chain needs to forget in burn-in; to choose the start, "
        "pass init= a position (docs/compiler.md, 'Initial positions').",
        UserWarning,
        stacklevel=2,
    )

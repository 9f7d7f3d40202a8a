"""Convolutions in the layout XLA's CPU backend runs fast inside loops.

Outside a loop, XLA:CPU rewrites every convolution to its canonical layout (input batch ×
spatial × feature, kernel spatial × in × out) with explicit transposes and runs it with its fast
library kernel. Inside the body of a ``while`` loop — every ``lax.scan`` and ``lax.fori_loop``,
so every sampling loop — it does not, and the convolutions that reverse-mode differentiation
produces (the kernel gradient, with batch and feature swapped) fall back to a naive loop nest.
On a 2-core CPU with jax 0.10.2 one gradient step of a small 2-D CNN ran 28–42× slower in a loop
than called step by step, and the MNIST-1D 1-D CNN 6.3× (jax-ml/jax#12868 reports the same).

:func:`canonical_convolutions` re-evaluates a function's jaxpr with every
``conv_general_dilated`` written in the canonical layout, its operands and result transposed
explicitly. The arithmetic is the same convolution; only the layout XLA sees changes. On other
backends (GPU, TPU), whose compilers choose layouts themselves, it returns the function
unchanged.

Chains under ``vmap`` turn each convolution into a grouped one (one group per chain), which
XLA:CPU runs several times slower than the same convolutions one chain after another; the
sampling loop therefore maps a convolutional model's chains sequentially on the CPU
(:func:`has_convolution` decides).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend import core

from bdl.utils.identity_map import WeakIdentityMap

_CALLS = ("pjit", "jit", "closed_call", "core_call")


def canonical_convolutions(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its convolutions in XLA:CPU's canonical layout when traced for the CPU.

    The returned function traces ``fn`` to a jaxpr at its arguments and, when the jaxpr holds a
    convolution (at the top level or inside nested ``jit`` calls), evaluates it with each
    convolution transposed into the layout batch × spatial × feature / spatial × in × out;
    otherwise it replays the jaxpr as traced (``fn`` is traced once either way). Convolutions
    inside other higher-order primitives (``cond``, ``scan``, custom derivatives) are left as
    they are.
    """

    @functools.wraps(fn)
    def wrapped(*args: Any) -> Any:
        if jax.default_backend() != "cpu":
            return fn(*args)
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
        out = _evaluate(closed.jaxpr, closed.consts, jax.tree.leaves(args))
        return jax.tree.unflatten(jax.tree.structure(out_shape), out)

    return wrapped


def has_convolution(fn: Callable[..., Any], *args: Any) -> bool:
    """Whether ``fn(*args)`` convolves, at its top level or inside nested ``jit`` calls."""
    return _has_convolution(jax.make_jaxpr(fn)(*args).jaxpr)


def convolves_on_cpu(target: Any) -> bool:
    """Whether JAX runs on the CPU and the target's network has convolutions: then a loop's
    convolutions are rewritten (:func:`canonical_convolutions`) and chains or ensemble members
    run in turn rather than under ``vmap``."""
    return jax.default_backend() == "cpu" and target_convolves(target)


#: answers of :func:`target_convolves`; weak, so the cache never keeps a target (and the
#: compiled programs that hang on it) alive
_BY_TARGET: WeakIdentityMap[bool] = WeakIdentityMap()


def target_convolves(target: Any) -> bool:
    """Whether a compiled target's network has convolutions (its energy traced once per
    target, at its initial position; nothing is computed)."""
    hit = _BY_TARGET.get(target)
    if hit is not None:
        return hit
    answer = has_convolution(target.energy, target.initial_position)
    _BY_TARGET.remember(target, answer)
    return answer


def _has_convolution(jaxpr: core.Jaxpr) -> bool:
    for eqn in jaxpr.eqns:
        if eqn.primitive is lax.conv_general_dilated_p:
            return True
        if eqn.primitive.name in _CALLS and _has_convolution(_inner(eqn).jaxpr):
            return True
    return False


def _inner(eqn: core.JaxprEqn) -> core.ClosedJaxpr:
    inner = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
    return inner if isinstance(inner, core.ClosedJaxpr) else core.ClosedJaxpr(inner, ())


def _evaluate(jaxpr: core.Jaxpr, consts: Sequence[Any], args: Sequence[Any]) -> list[Any]:
    env: dict[Any, Any] = {}

    def read(v: Any) -> Any:
        return v.val if isinstance(v, core.Literal) else env[v]

    env.update(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        if eqn.primitive is lax.conv_general_dilated_p:
            outvals = [canonical_convolution(*invals, **eqn.params)]
        elif eqn.primitive.name in _CALLS and _has_convolution(_inner(eqn).jaxpr):
            inner = _inner(eqn)
            outvals = _evaluate(inner.jaxpr, inner.consts, invals)
        else:
            params = eqn.primitive.get_bind_params(eqn.params)
            subfuns, params = params if isinstance(params, tuple) else ((), params)
            with eqn.ctx.manager:
                outvals = eqn.primitive.bind(*subfuns, *invals, **params)
            if not eqn.primitive.multiple_results:
                outvals = [outvals]
        env.update(zip(eqn.outvars, outvals, strict=True))
    # an output that is a constant comes back as an array, as it does from ``fn``
    return [
        jnp.asarray(v.val, v.aval.dtype) if isinstance(v, core.Literal) else env[v]
        for v in jaxpr.outvars
    ]


def canonical_convolution(lhs: Any, rhs: Any, *, dimension_numbers: Any, **params: Any) -> Any:
    """The convolution of ``lhs`` and ``rhs`` computed in the layout b01f, 01io -> b01f."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    k = len(lhs_spec) - 2  # spatial dimensions, kept in their order
    lhs_t = lax.transpose(lhs, (lhs_spec[0], *lhs_spec[2:], lhs_spec[1]))
    rhs_t = lax.transpose(rhs, (*rhs_spec[2:], rhs_spec[1], rhs_spec[0]))
    canonical = lax.ConvDimensionNumbers(
        lhs_spec=(0, k + 1, *range(1, k + 1)),
        rhs_spec=(k + 1, k, *range(k)),
        out_spec=(0, k + 1, *range(1, k + 1)),
    )
    lhs_t, params = _explicit_negative_padding(lhs_t, params)
    out = lax.conv_general_dilated_p.bind(lhs_t, rhs_t, dimension_numbers=canonical, **params)
    # axis a of the result sits at position where[a] of the canonical output
    where = [0] * (k + 2)
    where[out_spec[0]] = 0
    where[out_spec[1]] = k + 1
    for i, axis in enumerate(out_spec[2:]):
        where[axis] = 1 + i
    return lax.transpose(out, tuple(where))


def _explicit_negative_padding(lhs_t: Any, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Negative padding (the input gradient of a strided convolution crops its input) done as
    an explicit ``lax.pad`` of the b01f input, leaving the convolution only non-negative padding.

    XLA:CPU's convolution kernel (jax 0.10.2) does not honour a negative low padding together
    with a positive high one: it reads past the end of the input, so the last output depends on
    whatever lies in memory there. A spatial dimension with negative padding is dilated by the
    same ``lax.pad`` (interior padding), so the convolution sees it undilated.
    """
    padding = tuple(params["padding"])
    if all(lo >= 0 and hi >= 0 for lo, hi in padding):
        return lhs_t, params
    dilation = tuple(params["lhs_dilation"])
    config = [(0, 0, 0)]
    kept_padding, kept_dilation = [], []
    for (lo, hi), d in zip(padding, dilation, strict=True):
        if lo < 0 or hi < 0:
            config.append((min(lo, 0), min(hi, 0), d - 1))
            kept_padding.append((max(lo, 0), max(hi, 0)))
            kept_dilation.append(1)
        else:
            config.append((0, 0, 0))
            kept_padding.append((lo, hi))
            kept_dilation.append(d)
    config.append((0, 0, 0))
    cropped = lax.pad(lhs_t, jnp.zeros((), lhs_t.dtype), config)
    params = {**params, "padding": tuple(kept_padding), "lhs_dilation": tuple(kept_dilation)}
    return cropped, params

"""Whether autodiff sees how the energy changes, checked once by :func:`bdl.compile`.

A network whose output does not depend differentiably on its weights (``jnp.round``, an integer
cast and back, ``jax.lax.stop_gradient`` on the output or on a layer's parameters) has a
likelihood whose autodiff gradient is zero, so ∇U = −∇log p(θ) and the chains sample the prior,
while U itself clearly depends on the data. :func:`check_gradient` compares, at the start
position θ₀, the change of a term f(t) = E(θ₀ + t·v) along directions v with what its autodiff
derivative f'(t) = ∇E·v (``jax.jvp``) predicts. E is the negative log-likelihood of the first
:data:`ROWS` training rows for a model (the prior is bdl's own differentiable code; the network
lives in the likelihood, and with the prior left out a hidden gradient cannot be masked by it),
and U for a potential.

**The statistic.** Along v, f and f' are evaluated at t = 0 and t = ±h for a few steps h. On
each half-step, e.g. [0, h], the trapezoid rule gives the change autodiff predicts, and its
residual is compared with a tolerance:

    m = |f(h) − f(0) − (h/2)(f'(0) + f'(h))|,
    m ≤ c + r + ρ·V,   c = h·|f'(h) − f'(0)|,   V = |f(h) − f(0)| + (h/2)(|f'(0)| + |f'(h)|),

r the rounding error of the evaluations (:data:`ROUNDING` ε times Σ|row term|, and h times the
same for the derivatives) and ρ = :data:`RELATIVE`. When f' is monotone on the half-step, the
trapezoid error is at most c, exactly: the curvature is measured by the autodiff derivatives
themselves, so neither a smooth energy, nor a ReLU kink, nor float32 rounding of an energy of
10⁶ raises an alarm. A hidden gradient has f' ≡ 0 while f changes: then c = 0 and m = V, which
no tolerance with ρ < 1 accepts.

**The verdict.** A half-step is *informative* when V exceeds r :data:`INFORMATIVE` times. A step
*agrees* when it is informative and neither half disagrees. A direction is refused when some
step disagrees and no step agrees: a legitimate energy agrees at its small steps (disagreeing,
if at all, only at large ones where f' is not monotone), while a piecewise-constant one
(rounding) does not change at all at small steps — uninformative, not agreement — and jumps at
large ones, where autodiff predicts nothing. Steps where f is not finite are ignored, and a
start where f is not finite is left to the start check of ``bdl.sample``.

**The directions.** :data:`GLOBAL_DIRECTIONS` random directions over all parameters, with the
steps :data:`STEPS` (up to one RMS: rounding of outputs that start at 0 shows only there), and
one random direction confined to each leaf, with the smaller :data:`LEAF_STEPS`, so that a
gradient stopped in one layer is caught and named. Each leaf is scaled to its RMS (the RMS of the
whole position for a leaf that is zero, 1 when all are): a step h is the same relative change for
a weight matrix and a bias. When a direction over all parameters is refused, the leaves are
probed again with every step, on that failure path only, to name all those responsible.

**The cost.** 2·(2·4 + 1) + leaves·(2·2 + 1) jvps of the likelihood on at most :data:`ROWS`
rows (fewer when the network is expensive: :data:`FLOP_BUDGET`), in one program, vmapped or (for
an expensive network) one point at a time; compiling that program is most of the cost. A network
with a custom reverse-mode rule (``jax.custom_vjp``), which forward mode cannot differentiate,
is probed with ``jax.vjp``; one the program cannot trace at all is not checked.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from bdl.compile.compiled_model import CompiledModel
from bdl.compile.compiled_potential import CompiledPotential
from bdl.utils.trees import leaf_paths

PyTree = Any

#: step sizes h along the directions over all parameters, in units of each leaf's RMS
STEPS = (1.0, 2.0**-3, 2.0**-6, 2.0**-9)
#: step sizes along the directions confined to one leaf (fewer: there is one per leaf)
LEAF_STEPS = (2.0**-3, 2.0**-6)
#: random directions over all parameters, besides one direction confined to each leaf
GLOBAL_DIRECTIONS = 2
#: the most training rows the likelihood is evaluated on (a hidden gradient shows on any rows)
ROWS = 256
#: floating-point operations of the whole check, above which it uses fewer rows (at least one)
FLOP_BUDGET = 5e9
#: above this many floating-point operations the points are evaluated one at a time, not
#: vmapped: vmapped over parameters, a convolution is far slower than run once per point
VMAP_FLOPS = 2e9
#: rows used when the backend cannot count the network's operations
UNCOSTED_ROWS = 16
#: the share of the change V a trapezoid residual may reach: a hidden gradient reaches all of it
RELATIVE = 0.25
#: how many rounding errors a change must exceed to be informative
INFORMATIVE = 8.0
#: rounding error of a sum of row terms, in units of the dtype's epsilon times Σ|term|
ROUNDING = 256.0
#: leaves named in a message
SHOWN = 6


def check_gradient(target: CompiledModel | CompiledPotential, switch: str) -> None:
    """Refuse a target whose autodiff gradient misses how its energy changes (module docstring).

    Args:
        target: the compiled model or potential, at its start position.
        switch: how the argument that turns this check off is spelt, for the message.

    Raises:
        ValueError: along directions confined to some leaves (or over all parameters) the energy
            changes while its autodiff derivative does not predict the change; the message names
            the leaves, the likely causes and the fix.
    """
    dtype = jax.dtypes.canonicalize_dtype(jnp.float64)  # float32 unless JAX runs in 64 bits
    position = jax.tree.map(lambda a: jnp.asarray(a, dtype), target.initial_position)
    leaves = jax.tree.leaves(position)
    if not leaves:
        return
    steps = [LEAF_STEPS] * len(leaves) + [STEPS] * GLOBAL_DIRECTIONS
    found = _probe(target, position, steps, dtype)
    if not found or not found[0]:
        return
    refused, rows = found
    if any(k >= len(leaves) for k, *_ in refused):
        # seen over all parameters: to name every leaf responsible, also at the large steps,
        # the directions confined to one leaf are probed again with all the steps (on this
        # failure path only)
        again = _probe(target, position, [STEPS] * len(leaves), dtype)
        named = {k for k, *_ in refused}
        refused += [r for r in (again[0] if again else []) if r[0] not in named]
        refused.sort(key=lambda r: r[0])
    if not isinstance(target, CompiledModel):
        term = "the energy"
    else:
        term = "the log-likelihood of the first " + (
            f"{rows} training rows" if rows > 1 else "training row"
        )
    paths = [path or "the position" for path in leaf_paths(position)]
    raise ValueError(_message(refused, paths, term, switch))


def _probe(
    target: CompiledModel | CompiledPotential,
    position: PyTree,
    steps: list[tuple[float, ...]],
    dtype: Any,
) -> tuple[list[tuple[int, float, float, float]], int] | None:
    """The refused directions (direction, step, change, predicted change) and the rows used,
    with ``steps[k]`` the steps along direction k; ``None`` when the check cannot run or the
    start itself is not finite (bdl.sample's start check then says why)."""
    leaves = jax.tree.leaves(position)
    # per direction the points t = 0, +h₁, −h₁, +h₂, −h₂, …
    ts = [np.concatenate([[0.0], np.stack([h, np.negative(h)], 1).ravel()]) for h in steps]
    ks = np.concatenate([np.full(len(t), k, np.int32) for k, t in enumerate(ts)])
    probe = _Probe(target, position, _directions(leaves, position), ks, np.concatenate(ts), dtype)
    rows = min(target.n, ROWS) if isinstance(target, CompiledModel) else 0
    evaluated = _evaluate(probe, rows)
    if evaluated is None:
        return None
    results, rows = evaluated
    bounds = np.cumsum([0] + [len(t) for t in ts])
    flat = [np.asarray(a, np.float64) for a in results]
    if not all(np.all(np.isfinite(a[bounds[:-1]])) for a in flat[:2]):
        return None
    eps = float(jnp.finfo(dtype).eps)
    refused = []
    for k, h in enumerate(steps):
        found = _direction(*(a[bounds[k] : bounds[k + 1]] for a in flat), h, eps)
        if found is not None:
            refused.append((k, *found))
    return refused, rows


def _evaluate(probe: _Probe, rows: int) -> tuple[Any, int] | None:
    """The program's results and the rows it used, by ``jax.jvp``, or by ``jax.vjp`` for a
    network with a custom reverse-mode rule (``jax.custom_vjp``), which forward mode cannot
    differentiate; ``None`` when neither runs (e.g. a network that cannot be vmapped): the
    check never refuses what it could not evaluate."""
    for mode in ("jvp", "vjp"):
        try:
            return _run(probe, rows, mode)
        except Exception:  # the other mode, then nothing: the sampler reports its own errors
            continue
    return None


def _run(probe: _Probe, rows: int, mode: str) -> tuple[Any, int]:
    """Evaluate on ``rows`` rows, fewer when the check would spend more than
    :data:`FLOP_BUDGET` (a jvp costs about three forward passes), one point at a time above
    :data:`VMAP_FLOPS`."""
    points = len(probe.ks)
    flops = _flops_per_row(probe)
    one_at_a_time = False
    if flops is None:  # no cost model: a block small enough for any network
        rows = min(rows, UNCOSTED_ROWS)
    elif flops > 0:
        rows = max(1, min(rows, int(FLOP_BUDGET / (3 * flops * points))))
        one_at_a_time = 3 * flops * rows * points > VMAP_FLOPS
    lowered = probe.lower(rows, one_at_a_time, mode)
    # the program runs once: on a CPU, XLA's optimisations cost more time than they save
    options = {"xla_backend_optimization_level": 0} if jax.default_backend() == "cpu" else None
    results = lowered.compile(options)(*probe.arguments())
    return jax.block_until_ready(results), rows


def _flops_per_row(probe: _Probe) -> float | None:
    """XLA's count of the floating-point operations of the network on one row (of the energy,
    for a potential), from the lowered forward pass: traced, not compiled; ``None`` when the
    backend cannot count them."""
    arrays, static = eqx.partition(probe.target, eqx.is_array)

    def forward(arrays: Any, position: PyTree, x: Any) -> jax.Array:
        target = eqx.combine(arrays, static)
        if isinstance(target, CompiledModel):
            return target.forward(position, x)
        return target.energy(position)

    x = None
    if isinstance(probe.target, CompiledModel):  # one row's shape: lowering needs no values
        rows = probe.target.x_train
        x = jax.ShapeDtypeStruct((1, *rows.shape[1:]), rows.dtype)
    try:
        cost = jax.jit(forward).lower(arrays, probe.position, x).cost_analysis()
    except Exception:  # a backend without a cost model
        return None
    if isinstance(cost, list | tuple):
        cost = cost[0] if cost else None
    flops = (cost or {}).get("flops")
    return None if flops is None else float(flops)


class _Probe:
    """The check's program: at every point (direction ``ks[i]``, t = ``ts[i]``), the term f(t)
    and its autodiff derivative f'(t), with Σ|part| and Σ|∂part| over the term's parts (its
    rows), which bound their rounding errors. Direction k < (number of leaves) is the first noise
    draw confined to leaf k; the others are the noise draws over all parameters."""

    def __init__(
        self,
        target: CompiledModel | CompiledPotential,
        position: PyTree,
        noise: PyTree,
        ks: np.ndarray,
        ts: np.ndarray,
        dtype: Any,
    ) -> None:
        self.target, self.position, self.noise = target, position, noise
        self.ks, self.ts, self.dtype = ks, ts, dtype

    def arguments(self) -> tuple[Any, ...]:
        """The program's arguments: the target's arrays (its training rows among them), the
        position, the noise and the points (passed, not closed over: no data set is baked into
        the program)."""
        arrays, _ = eqx.partition(self.target, eqx.is_array)
        # device_put of host arrays in their final dtypes: jnp.asarray would compile a conversion
        points = (
            jax.device_put(np.asarray(self.ks, np.int32)),
            jax.device_put(np.asarray(self.ts, self.dtype)),
        )
        return arrays, self.position, self.noise, points

    def _data(self, target: CompiledModel, rows: int) -> Any:
        """The first ``rows`` training rows, taken inside the program (sliced outside it, each
        array would compile a slicing program of its own)."""
        y = target.y_train[:rows]
        y = y.astype(self.dtype) if jnp.issubdtype(y.dtype, jnp.floating) else y
        fields = {k: v[:rows] for k, v in target.fields_train.items()} or None
        return target.x_train[:rows].astype(self.dtype), y, fields

    def lower(self, rows: int, one_at_a_time: bool, mode: str) -> Any:
        """The program lowered (traced, not compiled) for ``rows`` rows, its points vmapped or
        one at a time, its derivatives by ``mode``, ``"jvp"`` or ``"vjp"``."""
        _, static = eqx.partition(self.target, eqx.is_array)

        def run(arrays: Any, position: PyTree, noise: PyTree, points: Any) -> Any:
            target = eqx.combine(arrays, static)
            data = self._data(target, rows) if isinstance(target, CompiledModel) else None
            leaves, treedef = jax.tree.flatten(position)
            draws = jax.tree.leaves(noise)

            def parts(p: PyTree) -> jax.Array:
                if isinstance(target, CompiledModel):
                    x, y, fields = data
                    return -target.log_likelihood(p, x, y, fields)
                return target.energy(p)[None]

            def at(point: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, ...]:
                k, t = point
                draw = jnp.maximum(k - len(leaves), 0)
                v = [
                    jnp.where((k == j) | (k >= len(leaves)), d[draw], 0)
                    for j, d in enumerate(draws)
                ]
                p = treedef.unflatten([a + t * b for a, b in zip(leaves, v, strict=True)])
                if mode == "jvp":
                    value, slope = jax.jvp(parts, (p,), (treedef.unflatten(v),))
                    sums = (value, slope, jnp.abs(value), jnp.abs(slope))
                    return tuple(jnp.sum(s) for s in sums)
                value, pullback = jax.vjp(parts, p)
                (grad,) = pullback(jnp.ones_like(value))
                terms = [g * b for g, b in zip(jax.tree.leaves(grad), v, strict=True)]
                slope = sum(jnp.sum(term) for term in terms)
                slope_size = sum(jnp.sum(jnp.abs(term)) for term in terms)
                return jnp.sum(value), slope, jnp.sum(jnp.abs(value)), slope_size

            return jax.lax.map(at, points) if one_at_a_time else jax.vmap(at)(points)

        return jax.jit(run).lower(*self.arguments())


def _directions(leaves: list[jax.Array], position: PyTree) -> PyTree:
    """:data:`GLOBAL_DIRECTIONS` standard normal draws shaped like the position (a leading axis),
    each leaf scaled to its RMS, or to the RMS of the whole position for a leaf that is (nearly)
    zero, or 1 when every parameter is zero. Drawn with NumPy from a fixed seed: the check is the
    same on every call, and the program compiles no random number generator."""
    # on the host: each leaf's sum of squares would compile two programs
    squares = [float(np.sum(np.square(np.asarray(a, np.float64)))) for a in leaves]
    sizes = [max(int(np.size(a)), 1) for a in leaves]
    overall = float(np.sqrt(sum(squares) / sum(sizes)))
    overall = overall if overall > 0 and np.isfinite(overall) else 1.0
    rng = np.random.default_rng(0)
    noise = []
    for a, square, size in zip(leaves, squares, sizes, strict=True):
        rms = float(np.sqrt(square / size))
        scale = rms if np.isfinite(rms) and rms > 1e-2 * overall else overall
        draw = rng.standard_normal((GLOBAL_DIRECTIONS, *np.shape(a)))
        noise.append(jax.device_put(np.asarray(scale * draw, a.dtype)))
    return jax.tree.unflatten(jax.tree.structure(position), noise)


def _direction(
    f: np.ndarray,
    d: np.ndarray,
    size: np.ndarray,
    dsize: np.ndarray,
    steps: tuple[float, ...],
    eps: float,
) -> tuple[float, float, float] | None:
    """(step, change of the term, change its autodiff derivative predicts) at the smallest step
    that disagrees, when one does and none agrees (the module docstring); else ``None``. The
    arrays hold the points t = 0, +h₁, −h₁, +h₂, −h₂, … of one direction."""
    agree, first = False, None
    for j, h in enumerate(steps):
        ok, bad = _half_steps(f, d, size, dsize, j, h, eps)
        agree |= ok
        if bad is not None:  # the steps decrease: the last one kept is the most local evidence
            first = (h, *bad)
    return None if agree else first


def _half_steps(
    f: np.ndarray, d: np.ndarray, size: np.ndarray, dsize: np.ndarray, j: int, h: float, eps: float
) -> tuple[bool, tuple[float, float] | None]:
    """Whether step ``j`` agrees (informative, neither half disagreeing) and, when a half
    disagrees, (the change of f from t = 0 to the end of that half, the change autodiff
    predicts), for the half that disagrees most relative to its V."""
    ends = (1 + 2 * j, 2 + 2 * j)  # t = +h, −h
    if not all(np.isfinite(f[e]) and np.isfinite(d[e]) for e in ends):
        return False, None
    informative, worst = False, None
    for e, sign in zip(ends, (1.0, -1.0), strict=True):
        change = sign * (f[e] - f[0])  # over the half-step, in the direction of increasing t
        predicted = 0.5 * h * (d[0] + d[e])
        scale = abs(change) + 0.5 * h * (abs(d[0]) + abs(d[e]))
        rounding = ROUNDING * eps * (max(size[0], size[e]) + h * (dsize[0] + dsize[e]))
        if scale <= INFORMATIVE * rounding:
            continue
        informative = True
        excess = abs(change - predicted) - (h * abs(d[e] - d[0]) + rounding + RELATIVE * scale)
        if excess > 0 and (worst is None or excess / scale > worst[0]):
            worst = (excess / scale, sign * change, sign * predicted)
    return informative and worst is None, None if worst is None else worst[1:]


def _message(
    refused: list[tuple[int, float, float, float]], paths: list[str], term: str, switch: str
) -> str:
    named = [paths[k] for k, *_ in refused if k < len(paths)]
    shown = ", ".join(named[:SHOWN]) + (f" and {len(named) - SHOWN} more" * (len(named) > SHOWN))
    k, step, change, predicted = refused[0]
    if k < len(paths):
        along = f"within {paths[k]}"
        which = f"every parameter ({shown})" if len(named) == len(paths) else shown
    else:  # no single leaf shows it: a change spread over several
        along, which = "over all parameters", "the parameters together"
    model = term != "the energy"
    follow = (
        "those parameters would follow the prior alone"
        if model
        else "the chains would not feel that part of the energy"
    )
    where = "the network's output" if model else "the log-density"
    return (
        f"the gradient of {term} does not see how it changes with {which}: a step of {step:.3g} "
        f"(in units of each leaf's RMS) along a random direction {along} changes it by "
        f"{change:.4g}, while its autodiff derivative predicts {predicted:.4g}. Sampled with "
        f"this gradient, {follow}. Likely causes: rounding (jnp.round, jnp.floor, jnp.ceil, "
        "jnp.sign), an integer cast (.astype(jnp.int32)), jax.lax.stop_gradient on "
        f"{where} or on a layer's parameters, or custom code with a wrong or zero derivative "
        "(jax.custom_jvp, jax.custom_vjp, jax.pure_callback). Fix: make it a differentiable "
        "function of every sampled parameter (drop the rounding, the cast or the "
        "stop_gradient; for discrete targets choose a likelihood for them, e.g. bdl.Poisson or "
        "bdl.Categorical, rather than rounding the prediction), and keep fixed settings out of "
        f"the sampled parameters. If the energy is meant to be this way, pass {switch}."
    )

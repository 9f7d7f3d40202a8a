"""The quantities whose R̂ and ESS mean something: a model's coordinates, a network's predictions.

* Identifiable models (:func:`default_space` says ``"parameter"``): the parameters themselves
  (:func:`parameter_summaries`).
* Networks (``"function"``): permuting hidden units maps a posterior mode onto another, so chains
  in different modes disagree in every weight while agreeing on every prediction, and R̂ of the
  weights says nothing. What is monitored instead is the predictive mean (class probabilities
  for classifiers) and the log-likelihood on held-out inputs (:func:`function_summaries`).

The same quantities serve the convergence check after every run
(:mod:`bdl.sampling.verdict.convergence_check`, which takes a bounded number of them:
:func:`parameter_quantities`, :func:`function_quantities`), the summary ``bdl sample`` prints
(:mod:`bdl.validation.summary`) and the trust gate of the NUTS references
(:mod:`bdl.validation.reference`, which re-exports the functions of this module).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from bdl.compile.compiled_model import CompiledModel
from bdl.compile.target import Target
from bdl.utils.owner_jit import owner_jit
from bdl.utils.trees import coordinate_name, leaf_paths

PyTree = Any
Space = Literal["parameter", "function"]

#: coordinates of a leaf this small are always monitored (scales, intercepts, hyper-parameters)
SMALL_LEAF = 8
#: draws per call of the function-space program
CHUNK = 64
#: rows (draws of every chain) per block of :func:`function_values_at_draws`: few, because a
#: call that completes a few draws evaluates a whole block, and because a block of many rows runs
#: slower per row, its activations outgrowing the caches (docs/benchmarks.md has the figures)
DRAW_BLOCK = 4


def default_space(target: Target) -> Space:
    """Networks (Flax, Equinox modules) are compared in function space, the rest (plain
    functions, models without a network, potentials) in parameters."""
    if isinstance(target, CompiledModel) and target.adapter.flavour not in ("function", "none"):
        return "function"
    return "parameter"


def evaluation_inputs(target: CompiledModel, num: int = 200) -> tuple[jax.Array, jax.Array]:
    """The held-out inputs (first ``num`` test examples; training inputs if there is no labelled
    test split)."""
    if held_out(target):
        return target.x_test[:num], target.y_test[:num]
    return target.x_train[:num], target.y_train[:num]


def held_out(target: CompiledModel) -> bool:
    """Whether the model has a labelled test split (else the training inputs stand in)."""
    return target.x_test is not None and target.y_test is not None


def evaluation_fields(target: CompiledModel, num: int = 200) -> dict[str, jax.Array]:
    """The per-example data fields of :func:`evaluation_inputs`' examples (empty when the
    likelihood reads none)."""
    fields = (target.fields_test or {}) if held_out(target) else target.fields_train
    return {k: v[:num] for k, v in fields.items()}


def function_summaries(target: CompiledModel, positions: PyTree, num: int = 200) -> np.ndarray:
    """Per-draw predictive means (probabilities for classifiers) and log-likelihoods on held-out
    inputs, shape (chain, draw, k): the means of the first ``num`` inputs (each input's outputs
    together), then their log-likelihoods.

    Computed :data:`CHUNK` draws per call of one compiled program (the last chunk padded), so
    that a model compiles it once whatever the number of draws, and memory holds one chunk's
    activations."""
    lead = jax.tree.leaves(positions)[0].shape[:2]
    count = int(np.prod(lead))
    flat = jax.tree.map(lambda a: np.reshape(a, (count, *np.shape(a)[2:])), positions)
    parts = []
    for start in range(0, count, CHUNK):
        chunk = jax.tree.map(lambda a, s=start: _padded(a[s : s + CHUNK], CHUNK), flat)
        parts.append(np.asarray(_summaries(target, chunk, num)))
    return np.concatenate(parts)[:count].reshape(*lead, -1)


def _padded(a: np.ndarray, rows: int) -> np.ndarray:
    """``a`` with its last row repeated up to ``rows`` rows."""
    if a.shape[0] == rows:
        return a
    return np.concatenate([a, np.broadcast_to(a[-1:], (rows - a.shape[0], *a.shape[1:]))])


def function_values(target: CompiledModel, flat: PyTree, num: int) -> jax.Array:
    """:func:`function_summaries` of positions with one leading axis (sliced inside the program:
    slicing the device's data outside it compiles a program per slice)."""
    x, y = evaluation_inputs(target, num)
    fields = evaluation_fields(target, num)

    def one(position: PyTree) -> jax.Array:
        net, lik = target.constrain(position)
        out = target.adapter.apply(net, x)
        mean = target.likelihood.mean(out, {**lik, **fields}).reshape(x.shape[0], -1)
        ll = target.likelihood.log_prob(out, y, {**lik, **fields})
        return jnp.concatenate([mean.reshape(-1), ll])

    return jax.vmap(one)(flat)


_summaries = owner_jit(function_values)


def function_values_at_draws(
    target: CompiledModel, positions: PyTree, num: int, draws: jax.Array
) -> jax.Array:
    """:func:`function_values` of a chunk's buffers, positions ``(chain, row, ...)`` still on
    the device, as ``(chain, row, k)``: what the convergence check reads, computed while the run
    goes on, so that its draws need not come back to the device after it
    (:class:`bdl.sampling.kept.keeper.Keep`). Only the blocks of :data:`DRAW_BLOCK` rows that hold
    the first ``draws`` rows (traced: one program per buffer shape) are evaluated; the other rows
    are left at zero."""
    chains, rows = jax.tree.leaves(positions)[0].shape[:2]
    block = min(DRAW_BLOCK, rows)

    def values(first: jax.Array) -> jax.Array:  # rows first … first + block − 1, every chain
        part = jax.tree.map(lambda a: jax.lax.dynamic_slice_in_dim(a, first, block, 1), positions)
        flat = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), part)
        return function_values(target, flat, num).reshape(chains, block, -1)

    spec = jax.eval_shape(values, jnp.int32(0))

    def one(b: jax.Array, out: jax.Array) -> jax.Array:
        first = jnp.minimum(b * block, rows - block)  # the last block may overlap the one before
        return jax.lax.dynamic_update_slice_in_dim(out, values(first), first, 1)

    blocks = (draws + block - 1) // block
    return jax.lax.fori_loop(0, blocks, one, jnp.zeros((chains, rows, spec.shape[-1]), spec.dtype))


_at_draws = owner_jit(function_values_at_draws)


def draw_monitor(target: CompiledModel, num: int) -> Any:
    """The function a run's sink calls on each chunk's positions and number of draws made
    (:func:`function_values_at_draws` on ``num`` held-out inputs), returning device arrays."""
    return lambda positions, draws: _at_draws(target, positions, num, np.asarray(draws, np.int32))


def parameter_summaries(positions: PyTree) -> np.ndarray:
    """Every coordinate of ``(chain, draw, ...)`` positions as columns, shape (chain, draw, d),
    in the order of :func:`bdl.utils.trees.parameter_names`."""
    leaves = [np.asarray(a).reshape(*a.shape[:2], -1) for a in jax.tree.leaves(positions)]
    return np.concatenate(leaves, axis=-1)


def parameter_quantities(positions: PyTree, budget: int) -> tuple[np.ndarray, list[str], int]:
    """At most ``budget`` coordinates of ``(chain, draw, ...)`` positions: (values
    ``(chain, draw, k)`` in float64, their names, the number of coordinates), as
    :func:`chosen_coordinates` chooses them."""
    chosen, names, total = chosen_coordinates(positions, budget)
    return coordinate_columns(positions, chosen).astype(np.float64), names, total


def chosen_coordinates(positions: PyTree, budget: int) -> tuple[np.ndarray, list[str], int]:
    """Which coordinates of ``(chain, draw, ...)`` positions to monitor, at most ``budget``:
    (their indices in the flattened position, C order leaf after leaf; their names; the number
    of coordinates).

    All of them when there are no more than ``budget``; otherwise every coordinate of the leaves
    of at most :data:`SMALL_LEAF` entries (scales, intercepts, hyper-parameters: where a model's
    trouble usually sits) and coordinates evenly spaced over the rest.
    """
    leaves = jax.tree.leaves(positions)
    paths = leaf_paths(positions)
    shapes = [tuple(np.shape(a)[2:]) for a in leaves]
    sizes = np.array([int(np.prod(s)) for s in shapes])
    total = int(sizes.sum())
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    if total <= budget:
        chosen = np.arange(total)
    else:
        small = np.concatenate(
            [
                np.arange(offsets[i], offsets[i + 1])
                for i in range(len(leaves))
                if sizes[i] <= SMALL_LEAF
            ]
            + [np.zeros(0, int)]
        ).astype(int)
        if small.size >= budget:
            small = np.zeros(0, int)
        rest = np.setdiff1d(np.arange(total), small)
        spread = rest[np.linspace(0, rest.size - 1, budget - small.size).round().astype(int)]
        chosen = np.union1d(small, spread)
    which = np.searchsorted(offsets, chosen, side="right") - 1
    names = [
        coordinate_name(paths[i] or "theta", shapes[i], int(index - offsets[i]))
        for i, index in zip(which, chosen, strict=True)
    ]
    return chosen.astype(np.int64), names, total


def coordinate_columns(positions: PyTree, chosen: np.ndarray) -> np.ndarray:
    """The coordinates ``chosen`` (indices into the flattened position, as
    :func:`chosen_coordinates` gives them) of ``(chain, draw, ...)`` positions, ``(chain, draw,
    k)`` in their own dtype; one leaf at a time, so that a large network is never copied whole."""
    leaves = jax.tree.leaves(positions)
    sizes = np.array([int(np.prod(np.shape(a)[2:])) for a in leaves])
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    which = np.searchsorted(offsets, chosen, side="right") - 1
    columns = []
    for i in np.unique(which):
        a = np.asarray(leaves[i])
        local = chosen[which == i] - offsets[i]
        columns.append(a.reshape(*a.shape[:2], -1)[..., local])
    if not columns:
        first = np.asarray(leaves[0])
        return np.zeros((*first.shape[:2], 0), first.dtype)
    return np.concatenate(columns, axis=-1)


def function_inputs(target: CompiledModel, budget: int) -> int:
    """How many held-out inputs :func:`function_quantities` evaluates for ``budget``
    quantities (at least one)."""
    available = int((target.x_test if held_out(target) else target.x_train).shape[0])
    classifier = target.likelihood.task == "classification"
    # the predictive means per input: a classifier's classes, else (as a rule) the targets'
    # entries; read off the result, the guess only sizes the budget (no extra trace)
    guess = target.num_classes if classifier and target.num_classes else None
    guess = guess or int(np.prod(target.y_train.shape[1:], dtype=int))
    return int(min(available, max(1, budget // (guess + 1))))


def function_quantities(
    target: CompiledModel, positions: PyTree, budget: int, computed: Any = None
) -> tuple[np.ndarray, list[str], int]:
    """The predictive means and log-likelihoods of :func:`function_summaries` on as many
    held-out inputs as keep them within ``budget`` (at least one input): (values
    ``(chain, draw, k)`` in float64, their names, the number there would be on every held-out
    input). ``computed``: ``(num, values)`` already evaluated during the run on ``num`` inputs
    (:func:`function_values_at_draws`), used when ``num`` is what the budget gives."""
    available = int((target.x_test if held_out(target) else target.x_train).shape[0])
    classifier = target.likelihood.task == "classification"
    num = function_inputs(target, budget)
    if computed is not None and computed[0] == num:
        values = np.asarray(computed[1], np.float64)
    else:
        values = function_summaries(target, positions, num).astype(np.float64)
    outputs = values.shape[-1] // num - 1  # per input: its predictive means and log-likelihood
    where = "x_test" if held_out(target) else "x_train"
    names = []
    for i in range(num):
        for j in range(outputs):
            if classifier:
                names.append(f"p(y={j} | {where}[{i}])")
            else:
                names.append(f"E[y | {where}[{i}]]" + (f"[{j}]" if outputs > 1 else ""))
    names += [f"log p(y | {where}[{i}])" for i in range(num)]
    return values, names, available * (outputs + 1)


#: a classifier's test point whose log predictive density log p(y | x, θ) has an sd below this
#: (nats) over every draw is saturated: however its draws are ordered, its term of the BMA's
#: log-likelihood cannot move by more than about this much
SATURATED = 0.01


def verdict_inputs(target: CompiledModel, budget: int) -> int:
    """How many held-out inputs the convergence verdict reads for ``budget`` quantities: one
    per input for a classifier (its per-example log predictive density), else as
    :func:`function_inputs`."""
    if target.likelihood.task == "classification":
        available = int((target.x_test if held_out(target) else target.x_train).shape[0])
        return int(min(available, max(1, budget)))
    return function_inputs(target, budget)


@dataclasses.dataclass(frozen=True)
class VerdictQuantities:
    """What a network's convergence verdict judges (:func:`verdict_quantities`).

    Attributes:
        values: ``(chain, draw, k)`` in float64; names: one per column.
        total: the quantities there would be on every held-out input.
        saturated: quantities left out as saturated (:data:`SATURATED`).
        probabilities: a classifier's class probabilities on the inputs read,
            ``(chain, draw, inputs, classes)`` (``None`` for a regressor): the BMA's stability
            is measured on them.
    """

    values: np.ndarray
    names: list[str]
    total: int
    saturated: int
    probabilities: np.ndarray | None


def verdict_quantities(
    target: CompiledModel, positions: PyTree, budget: int, computed: Any = None
) -> VerdictQuantities:
    """The function-space quantities of a network's convergence verdict.

    For a classifier, the per-example log predictive density log p(y_i | x_i, θ) of held-out
    points, one per input: the terms the BMA's test log-likelihood and accuracy are made of,
    as Izmailov et al. (2021) judge HMC's convergence on networks by what the model average
    predicts. Not every class probability: a probability of order 1e-5 that drifts within a
    chain fails a rank-based R̂ as badly as one of order 0.5 (ranks ignore scale) while it
    cannot move the BMA. For the same reason a test point whose log p(y_i | x_i, θ) has an sd
    below :data:`SATURATED` nats over every draw is left out (counted in ``saturated``): a
    probability pinned near 1 that dips once to 0.999 gives a rank R̂ of 7 (ranks of many ties
    and one outlier) while its log-likelihood term moves by 10⁻⁵ nats. For a regressor, the
    predictive means and log-likelihoods (:func:`function_quantities`).

    ``computed``: ``(num, values)`` evaluated during the run on ``num`` inputs
    (:func:`function_values_at_draws`), used when ``num`` is what the budget gives.
    """
    if target.likelihood.task != "classification":
        values, names, total = function_quantities(target, positions, budget, computed)
        return VerdictQuantities(values, names, total, 0, None)
    available = int((target.x_test if held_out(target) else target.x_train).shape[0])
    num = verdict_inputs(target, budget)
    if computed is not None and computed[0] == num:
        raw = np.asarray(computed[1], np.float64)
    else:
        raw = function_summaries(target, positions, num).astype(np.float64)
    classes = raw.shape[-1] // num - 1
    probabilities = raw[..., : num * classes].reshape(*raw.shape[:2], num, classes)
    lppd = raw[..., num * classes :]
    where = "x_test" if held_out(target) else "x_train"
    with np.errstate(over="ignore", invalid="ignore"):
        spread = lppd.reshape(-1, num).std(axis=0)
    keep = ~(spread < SATURATED)  # a non-finite quantity is kept: the verdict must see it
    names = [f"log p(y | {where}[{i}])" for i in range(num) if keep[i]]
    return VerdictQuantities(lppd[..., keep], names, available, int((~keep).sum()), probabilities)

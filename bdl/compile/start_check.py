"""Whether chains can start at a position: the full-data energy U(θ) and its gradient are
finite there, and, when they are not, which term is to blame.

A start at which U or ∇U is NaN or ±∞ diverges at its first step, and the sampler could only
report "diverged at step 0" (with warm-up, an adapted step size of NaN). Two functions say more:

* :func:`start_value_is_finite` evaluates log p(θ) + Σ_{i∈B} log p(y_i | x_i, θ) for every
  block B of the training rows in turn, blocks of the minibatch size, so that it needs no more
  memory than a step; ``bdl.sample`` traces it inside its start program (no program of its
  own), and refuses a start where it fails before any step. :func:`start_is_finite` adds the
  gradient; it runs, compiled, only for a chain that diverged, to say whether its start was to
  blame (a value that is finite where its gradient is not is rare, and costs a compilation of
  the backward pass that every healthy run would pay).
* :func:`explain_start`, run only when that failed, probes the terms one by one: the prior, the
  network's outputs row by row, the per-example log-likelihoods, the per-example gradients,
  and names the rows of ``x_train`` / ``y_train`` or the parameters responsible.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from bdl.compile.compiled_model import CompiledModel
from bdl.compile.compiled_potential import CompiledPotential
from bdl.compile.precision import float64_note
from bdl.compile.target import Target
from bdl.utils.owner_jit import owner_jit
from bdl.utils.trees import leaf_paths

PyTree = Any
#: rows (and parameters) listed in a message
SHOWN = 10
#: minibatches whose gradient is not finite that are searched row by row
SEARCHED_BLOCKS = 8


def start_is_finite(target: Target, position: PyTree) -> jax.Array:
    """Whether U(θ) and ∇U(θ) are finite at ``position`` (traced; a boolean scalar)."""
    if not isinstance(target, CompiledModel):
        energy, grad = target.energy_and_grad(position)
        return jnp.isfinite(energy) & _all_finite(grad)

    def terms(position: PyTree, rows: jax.Array | None) -> jax.Array:
        # the prior rides along in every block: one backward pass to trace, not two
        return target.log_prior(position) + _log_likelihood_sum(target, position, rows)

    def block(ok: jax.Array, rows: jax.Array | None) -> tuple[jax.Array, None]:
        value, grad = jax.value_and_grad(terms)(position, rows)
        return ok & jnp.isfinite(value) & _all_finite(grad), None

    if target.batch_size == target.n:
        return block(jnp.asarray(True), None)[0]
    return jax.lax.scan(block, jnp.asarray(True), _blocks(target))[0]


def start_value_is_finite(target: Target, position: PyTree) -> jax.Array:
    """Whether U(θ) is finite at ``position``: :func:`start_is_finite` without the gradient
    (traced inside the start program of ``bdl.sample``; the forward pass alone costs about half
    the compilation of forward and backward)."""
    if not isinstance(target, CompiledModel):
        return jnp.isfinite(target.energy(position))

    def block(ok: jax.Array, rows: jax.Array | None) -> tuple[jax.Array, None]:
        value = target.log_prior(position) + _log_likelihood_sum(target, position, rows)
        return ok & jnp.isfinite(value), None

    if target.batch_size == target.n:
        return block(jnp.asarray(True), None)[0]
    return jax.lax.scan(block, jnp.asarray(True), _blocks(target))[0]


def cannot_start(bad: list[int], first: int, what: str, why: str) -> str:
    """The message refusing a run whose chains ``bad`` (local indices; ``first``: the run's index
    of the first of them) cannot start.

    Args:
        bad: the chains whose start is not finite, at least one.
        first: the run's index of local chain 0.
        what: what is not finite (``"the energy U(θ) is"``).
        why: :func:`explain_start` at the first of them.

    Returns:
        The message.
    """
    names = ", ".join(str(first + c) for c in bad[:10]) + (", …" if len(bad) > 10 else "")
    where = (
        "its starting position"
        if len(bad) == 1
        else (f"their starting positions; at chain {first + bad[0]}'s")
    )
    chains = f"chain{'s' if len(bad) > 1 else ''} {names}"
    return f"{chains} cannot start: {what} not finite at {where}: {why}."


def explain_start(target: Target, position: PyTree) -> str:
    """Why U(θ) or ∇U(θ) is not finite at ``position``, naming the term: the prior (and the
    parameters where its gradient is not finite), the rows of ``x_train`` on which the network
    returns NaN or ±∞, the rows of ``y_train`` whose log-likelihood is −∞ or NaN, the rows whose
    log-likelihood has no finite gradient; and, when the run is in float32 and both are finite
    in float64 there, that float32 is to blame and how to switch
    (:func:`bdl.compile.precision.float64_note`). Evaluates (and compiles) on every call: for
    the failure path only.

    Args:
        target: a compiled model or potential.
        position: where U or ∇U is not finite.

    Returns:
        The explanation, one clause per term found.
    """
    why = _explain_terms(target, position)
    note = float64_note(target, position, start_is_finite)
    return f"{why}; but {note}" if note else why


def _explain_terms(target: Target, position: PyTree) -> str:
    if not isinstance(target, CompiledModel):
        return _explain_energy(target, position)
    found = []
    prior, grad = eqx.filter_jit(lambda t, p: jax.value_and_grad(t.log_prior)(p))(target, position)
    leaves = _bad_leaves(grad)
    if not np.isfinite(float(prior)):
        where = f" (its gradient is not finite in {leaves})" if leaves else ""
        found.append(
            f"the prior's log-density is {float(prior):g}{where}: a parameter lies outside "
            "its prior's support, or so far out that the density underflows"
        )
    elif leaves:
        found.append(f"the gradient of the prior's log-density is NaN or ±inf in {leaves}")
    outputs, values, blocks = (np.asarray(a) for a in _row_report(target, position))
    rows = _rows(outputs)
    if rows:
        found.append(
            f"the network returns NaN or ±inf for {rows} of x_train: fix the network's "
            "operations there (a log or sqrt of a negative number, an overflow, a division by "
            "zero) or those inputs"
        )
    rows = _rows(values & ~outputs)
    if rows:
        found.append(
            f"the log-likelihood is −∞ or NaN for {rows} of y_train, where the network's "
            "outputs are finite: those targets have no density under the likelihood (outside "
            "its support, or so far from the outputs that the density underflows)"
        )
    if not found and blocks.any():
        rows = _rows(_gradient_rows(target, position, np.flatnonzero(blocks)))
        if rows:
            found.append(
                f"the gradient of the log-likelihood is NaN or ±inf for {rows} of x_train, "
                "where its value is finite: the network has no finite derivative there (e.g. "
                "jnp.sqrt or jnp.abs at 0, a log near 0)"
            )
    if not found:
        return (
            "the energy U or its gradient is not finite although every term of it is: their sum "
            "overflows float32 (rescale the data or the network's outputs)"
        )
    return "; ".join(found)


def _log_likelihood_sum(
    compiled: CompiledModel, position: PyTree, rows: jax.Array | None
) -> jax.Array:
    x, y, fields = _batch(compiled, rows)
    return jnp.sum(compiled.log_likelihood(position, x, y, fields))


def _batch(compiled: CompiledModel, rows: jax.Array | None) -> tuple[Any, Any, Any]:
    take = (lambda a: a) if rows is None else (lambda a: a[rows])
    fields = {k: take(v) for k, v in compiled.fields_train.items()}
    return take(compiled.x_train), take(compiled.y_train), (fields or None)


def _blocks(compiled: CompiledModel) -> jax.Array:
    """The training rows in blocks of the minibatch size, ``(m, B)``; the last block is filled
    up with the first rows (a row seen twice changes no verdict)."""
    b = compiled.batch_size
    m = -(-compiled.n // b)
    return (jnp.arange(m * b) % compiled.n).reshape(m, b)


def _all_finite(tree: PyTree) -> jax.Array:
    leaves = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.inexact)]
    if not leaves:
        return jnp.asarray(True)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


@owner_jit
def _row_report(
    compiled: CompiledModel, position: PyTree
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Per training row, whether the network's output and the log-likelihood are not finite
    ``(n,)``; per block of :func:`_blocks`, whether the gradient of its log-likelihood is not
    finite ``(m,)``."""

    def block(_: None, rows: jax.Array) -> tuple[None, tuple[jax.Array, ...]]:
        x, _, _ = _batch(compiled, rows)
        out = compiled.forward(position, x)
        bad_out = ~jnp.all(jnp.isfinite(out.reshape(out.shape[0], -1)), axis=1)
        lls = _per_example(compiled, position, rows)
        grad = jax.grad(_log_likelihood_sum, argnums=1)(compiled, position, rows)
        return None, (bad_out, ~jnp.isfinite(lls), ~_all_finite(grad))

    _, (outputs, values, blocks) = jax.lax.scan(block, None, _blocks(compiled))
    return outputs.reshape(-1)[: compiled.n], values.reshape(-1)[: compiled.n], blocks


def _per_example(compiled: CompiledModel, position: PyTree, rows: jax.Array) -> jax.Array:
    x, y, fields = _batch(compiled, rows)
    return compiled.log_likelihood(position, x, y, fields)


def _gradient_rows(compiled: CompiledModel, position: PyTree, blocks: np.ndarray) -> np.ndarray:
    """Per training row, whether its log-likelihood's gradient is not finite, searched in the
    first :data:`SEARCHED_BLOCKS` blocks whose summed gradient is not (one row at a time)."""
    bad = np.zeros(compiled.n, bool)
    indices = np.asarray(_blocks(compiled))
    for b in blocks[:SEARCHED_BLOCKS]:
        rows = indices[b]
        flags = np.asarray(_row_gradients(compiled, position, jnp.asarray(rows)))
        bad[rows[flags]] = True
    return bad


@owner_jit
def _row_gradients(compiled: CompiledModel, position: PyTree, rows: jax.Array) -> jax.Array:
    def one(row: jax.Array) -> jax.Array:
        grad = jax.grad(_log_likelihood_sum, argnums=1)(compiled, position, row[None])
        return ~_all_finite(grad)

    return jax.lax.map(one, rows)


def _explain_energy(target: Target, position: PyTree) -> str:
    energy, grad = eqx.filter_jit(lambda t, p: t.energy_and_grad(p))(target, position)
    who = "Potential(log_density=...)" if isinstance(target, CompiledPotential) else "the target"
    leaves = _bad_leaves(grad)
    if not np.isfinite(float(energy)):
        where = f" (its gradient is not finite in {leaves})" if leaves else ""
        return f"{who} gives the energy U = {float(energy):g}{where}"
    if leaves:
        return f"the gradient of {who}'s energy is NaN or ±inf in {leaves}"
    return f"{who} gives a finite energy and gradient here on a second evaluation"


def _bad_leaves(grad: PyTree) -> str:
    """The paths of the leaves with a non-finite entry, as ``net/w, lik/scale`` ('' if none)."""
    flags = [not np.all(np.isfinite(np.asarray(g))) for g in jax.tree.leaves(grad)]
    paths = [p or "the position" for p, f in zip(leaf_paths(grad), flags, strict=True) if f]
    more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return ", ".join(paths[:SHOWN]) + more


def _rows(flags: np.ndarray) -> str:
    """``rows [3, 7]`` (the first few of many: ``rows [3, 7, …] (42 of 1000)``); '' if none."""
    rows = np.flatnonzero(flags)
    if rows.size == 0:
        return ""
    shown = ", ".join(str(r) for r in rows[:SHOWN])
    if rows.size > SHOWN:
        return f"rows [{shown}, …] ({rows.size} of {flags.size})"
    return f"row{'s' if rows.size > 1 else ''} [{shown}]"

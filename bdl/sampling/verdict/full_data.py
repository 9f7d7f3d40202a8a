"""Full-data energies and gradients at some of a run's draws: the one program that the checks
after a run share, the run-away and heat tests (:mod:`bdl.sampling.verdict.runaway_check`) and the
bias check (:mod:`bdl.sampling.verdict.bias_check`).

:func:`at_draws` evaluates, at each given draw, U(θ), (θ − c)·∇U(θ) for a given centre c and
some coordinates of ∇U(θ), with the full data, :data:`CHUNK` draws per call (the next power of
two of them when there are fewer). The coordinates are padded to a width fixed per target
(:func:`width`), so the two checks call one program with the same shapes, compiled once per
target (and call size), and compiled for a program that runs once (:mod:`bdl.utils.owner_jit`).
The two checks also share their argument check (:func:`check_arguments`), how many draws they
can afford (:func:`afforded_draws`) and the temperature of each draw (:func:`temperatures`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bdl.compile.target import Target
from bdl.sampling.samples import Samples
from bdl.utils.arguments import instance
from bdl.utils.owner_jit import owner_jit

PyTree = Any

#: draws per call of the program
CHUNK = 64
#: the most gradient coordinates a call returns per draw
MAX_COLUMNS = 1024


class AtDraws(NamedTuple):
    """What :func:`at_draws` returns, in float64, one row per draw: U(θ) ``(rows,)``,
    (θ − c)·∇U(θ) ``(rows,)`` and the chosen coordinates of ∇U(θ) ``(rows, columns)``."""

    energy: np.ndarray
    dot: np.ndarray
    grad: np.ndarray


def check_arguments(samples: Any, target: Any, name: str) -> None:
    """Raises unless ``samples`` are draws and ``target`` a compiled target.

    Args:
        samples: the draws given to the check.
        target: the target given to the check.
        name: the check's name, for the messages.

    Raises:
        TypeError: ``samples`` is not a :class:`bdl.Samples` or ``target`` not a compiled target.
    """
    instance(samples, Samples, f"{name} needs a bdl.Samples")
    instance(target, Target, f"{name}(target=...) must be the compiled model the draws came from")


def afforded_draws(
    target: Target, steps: int, draws: int, share: float, least: int, most: int
) -> int:
    """How many draws per chain a check evaluates with the full data: worth at most ``share`` of
    ``steps`` minibatch gradients, within [``least``, ``most``], and at most ``draws``.

    Args:
        target: the compiled model or potential.
        steps: the run's steps.
        draws: the draws per chain there are to choose from.
        share: the share of the run's gradient work the check may spend.
        least: the fewest draws per chain (above ``share``).
        most: the most draws per chain.

    Returns:
        The number of draws per chain.
    """
    batch = int(getattr(target, "batch_size", target.n) or target.n)
    afford = int(share * steps * batch / max(target.n, 1))
    return int(min(draws, most, max(least, afford)))


def temperatures(samples: Samples, target: Target) -> np.ndarray:
    """T_t of every draw, (chains, draws): the recorded one, else the target's constant T.

    Args:
        samples: the draws of a run.
        target: the compiled model or potential they came from.

    Returns:
        The temperatures, float64.
    """
    shape = (samples.num_chains, samples.num_draws)
    recorded = samples.info.get("temperature")
    if recorded is not None and np.shape(recorded) == shape:
        return np.asarray(recorded, np.float64)
    constant = target.constant_temperature()
    return np.full(shape, 0.0 if constant is None else float(constant))


def width(size: int) -> int:
    """The gradient coordinates a call returns per draw, for a position of ``size``
    coordinates: every one up to :data:`MAX_COLUMNS`."""
    return int(min(max(size, 1), MAX_COLUMNS))


def at_draws(
    target: Target,
    positions: PyTree,
    rows: list[tuple[int, int]],
    centres: list[list[np.ndarray]],
    columns: np.ndarray | None = None,
) -> AtDraws:
    """Full-data U, (θ − c)·∇U and ∇U's coordinates ``columns`` at draws ``rows`` of
    ``positions``.

    Args:
        target: the compiled model or potential.
        positions: ``(chain, draw, ...)`` draws (host or device arrays).
        rows: the ``(chain, draw)`` of each draw to evaluate.
        centres: the centre c of each row, one array per leaf (without the chain and draw axes).
        columns: indices into the flattened position (C order, leaf after leaf), at most
            :func:`width` of them; ``None``: none wanted.

    Returns:
        The values, one row per draw (:class:`AtDraws`).
    """
    leaves = jax.tree.leaves(positions)
    treedef = jax.tree.structure(positions)
    size = sum(int(np.prod(np.shape(a)[2:])) for a in leaves)
    wanted = np.zeros(0, np.int64) if columns is None else np.asarray(columns, np.int64)
    # one width per target: both checks' calls share one program
    padded = np.zeros(max(width(size), wanted.size), np.int32)
    padded[: wanted.size] = wanted
    columns_in = jax.device_put(padded)  # a transfer that compiles nothing
    call = min(CHUNK, 1 << (len(rows) - 1).bit_length())
    energies, dots, grads = [], [], []
    for start in range(0, len(rows), call):
        part = list(range(start, min(start + call, len(rows))))
        part += [part[-1]] * (call - len(part))
        theta = [np.stack([np.asarray(a)[rows[i][0], rows[i][1]] for i in part]) for a in leaves]
        means = [
            np.stack([np.asarray(centres[i][k], a.dtype) for i in part])
            for k, a in enumerate(theta)
        ]
        energy, dot, grad = _at_draws(
            target, jax.tree.unflatten(treedef, theta), jax.tree.unflatten(treedef, means),
            columns_in,
        )  # fmt: skip
        energies.append(np.asarray(energy, np.float64))
        dots.append(np.asarray(dot, np.float64))
        grads.append(np.asarray(grad, np.float64)[:, : wanted.size])
    n = len(rows)
    return AtDraws(
        np.concatenate(energies)[:n], np.concatenate(dots)[:n], np.concatenate(grads)[:n]
    )


def full_data_at(
    target: Target, theta: PyTree, centre: PyTree, columns: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """U(θ), (θ − c)·∇U(θ) and ∇U(θ)'s flattened coordinates ``columns`` at each of a stack of
    positions, with the full data (the checks' one program).

    Args:
        target: the compiled model or potential.
        theta: positions with one leading axis.
        centre: the centre c of each, with the same structure.
        columns: indices into the flattened position (C order, leaf after leaf).

    Returns:
        ``(positions,)``, ``(positions,)`` and ``(positions, len(columns))``.
    """

    def one(pair: tuple[Any, Any]) -> tuple[jax.Array, jax.Array, jax.Array]:
        position, mean = pair
        energy, grad = target.energy_and_grad(position)
        flat = jnp.concatenate([jnp.ravel(g) for g in jax.tree.leaves(grad)])
        terms = jax.tree.map(lambda x, m, g: jnp.sum((x - m) * g), position, mean, grad)
        return energy, sum(jax.tree.leaves(terms)), flat[columns]

    return jax.lax.map(one, (theta, centre))


_at_draws = owner_jit(full_data_at, once=True)

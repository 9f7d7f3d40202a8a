"""The result of :func:`bdl.sample`: draws with (chain, draw) axes, per-draw info, conversions."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from bdl.utils.trees import leaf_paths

PyTree = Any


@dataclasses.dataclass(frozen=True, eq=False)
class Samples:
    """Collected draws.

    Attributes:
        positions: θ draws, a pytree of arrays shaped ``(chains, draws, ...)``.
        extra: further collected quantities (e.g. ``{"guide": θ_a}`` for Entropy-MCMC).
        info: per-draw diagnostics (energy, kinetic energy, …), arrays ``(chains, draws)``.
        steps: the 0-based step index after which each draw was taken, ``(draws,)``.
        kernel: the kernel's name.
        steps_done: steps completed. Below ``num_steps`` when interrupted, and by
            ``(num_steps − burn_in) mod thin`` otherwise: trailing steps that could not end a
            draw are not run.
        interrupted: the run was stopped early (Ctrl-C); the draws up to then are kept.
    """

    positions: PyTree
    extra: dict[str, PyTree]
    info: dict[str, np.ndarray]
    steps: np.ndarray
    kernel: str
    steps_done: int
    interrupted: bool = False

    @property
    def num_chains(self) -> int:
        return int(jax.tree.leaves(self.positions)[0].shape[0])

    @property
    def num_draws(self) -> int:
        return int(jax.tree.leaves(self.positions)[0].shape[1])

    def flat(self, what: str = "position") -> PyTree:
        """Draws with chains and draws merged into one leading sample axis."""
        tree = self.positions if what == "position" else self.extra[what]
        return jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), tree)

    def to_arviz(self) -> Any:
        """An ArviZ ``InferenceData`` (posterior named by parameter path, sample_stats)."""
        import arviz as az

        posterior = dict(
            zip(leaf_paths(self.positions), jax.tree.leaves(self.positions), strict=True)
        )
        for name, tree in self.extra.items():
            for path, leaf in zip(leaf_paths(tree), jax.tree.leaves(tree), strict=True):
                posterior[f"{name}/{path}"] = leaf
        stats = {k: np.asarray(v) for k, v in self.info.items()}
        return az.from_dict(
            posterior={k: np.asarray(v) for k, v in posterior.items()}, sample_stats=stats
        )

    def __repr__(self) -> str:
        state = ", interrupted" if self.interrupted else ""
        return (
            f"Samples(kernel={self.kernel!r}, chains={self.num_chains}, "
            f"draws={self.num_draws}, steps_done={self.steps_done}{state})"
        )

"""How ``bdl.sample`` cuts and vectorises its loop: settings that never change the draws on
the CPU, only how they are computed (``bdl.sample(..., loop=LoopOptions(...))``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from bdl.sampling.run.chunking import ChunkPolicy, default_policy
from bdl.utils.convolutions import convolves_on_cpu

#: steps per block of the sampling loop on an accelerator (:attr:`LoopOptions.block`)
ACCELERATOR_BLOCK = 32


@dataclasses.dataclass(frozen=True)
class LoopOptions:
    """How the sampling loop runs; ``None`` picks the default for the target and backend.

    Attributes:
        chunks: steps per call of the compiled loop (:mod:`bdl.sampling.run.chunking`); default, a
            :class:`~bdl.sampling.run.chunking.TimedChunks` kept per target.
        block: steps per block of every loop of traced length: 1 on the CPU, where such a loop
            runs in place, and 32 on an accelerator, where each iteration of such a loop waits
            for the host (:mod:`bdl.sampling.run.chain`). With a block above 1 a chunk of whole
            draws runs each draw's ``thin`` steps in a loop of static length (a second
            segment of the sampling program, compiled per ``thin``).
        chains_in_turn: run the chains one after another instead of under ``vmap`` (any
            model; a run of one chain has nothing to take turns); default for a network with
            convolutions on the CPU, whose ``vmap`` form (grouped convolutions) XLA:CPU runs
            several times slower. Each chain's draws equal those of the ``vmap`` form to float
            reassociation; what it gives across device layouts: [Devices and
            processes](../scaling.md).
    """

    chunks: ChunkPolicy | None = None
    block: int | None = None
    chains_in_turn: bool | None = None

    def __post_init__(self) -> None:
        if self.chunks is not None and not isinstance(self.chunks, ChunkPolicy):
            raise TypeError(
                "LoopOptions(chunks=...) must be a bdl.sampling.run.chunking policy "
                f"(TimedChunks(), FixedChunks(steps)); got {type(self.chunks).__name__}."
            )
        if self.block is not None and (
            isinstance(self.block, bool) or not isinstance(self.block, int) or self.block < 1
        ):
            raise ValueError(f"LoopOptions(block=...) must be an integer >= 1; got {self.block!r}.")
        if self.chains_in_turn is not None and not isinstance(self.chains_in_turn, bool):
            raise TypeError(
                "LoopOptions(chains_in_turn=...) must be True or False; got "
                f"{self.chains_in_turn!r}."
            )


@dataclasses.dataclass(frozen=True)
class Resolved:
    """:class:`LoopOptions` with every default decided for one run."""

    chunks: ChunkPolicy
    block: int
    convolutions: bool  # convolutions written in XLA:CPU's fast in-loop layout
    chains_in_turn: bool


def default_block() -> int:
    """Steps per block of a loop of traced length on this backend (:attr:`LoopOptions.block`)."""
    return 1 if jax.default_backend() == "cpu" else ACCELERATOR_BLOCK


def resolve(options: LoopOptions | None, target: Any, run: tuple) -> Resolved:
    """The run's loop settings: ``options``' where given, else the defaults (class docstring)."""
    if options is None:
        options = LoopOptions()
    if not isinstance(options, LoopOptions):
        raise TypeError(f"loop must be a bdl.sampling.LoopOptions; got {type(options).__name__}.")
    convolutions = convolves_on_cpu(target)
    block = default_block() if options.block is None else options.block
    in_turn = convolutions if options.chains_in_turn is None else options.chains_in_turn
    chunks = options.chunks if options.chunks is not None else default_policy(target, run)
    return Resolved(chunks, block, convolutions, in_turn)

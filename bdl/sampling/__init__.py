"""The sampling loop and its result."""

from bdl.sampling.bias import check_bias
from bdl.sampling.chunking import ChunkPolicy, FixedChunks, TimedChunks
from bdl.sampling.convergence import check_convergence
from bdl.sampling.layout import make_mesh
from bdl.sampling.loading import load_samples
from bdl.sampling.loop_options import LoopOptions
from bdl.sampling.merge import merge_samples
from bdl.sampling.runaway import runaway_chains
from bdl.sampling.sample import sample
from bdl.sampling.samples import (
    BiasWarning,
    ConvergenceWarning,
    DivergenceWarning,
    RunawayWarning,
    Samples,
)
from bdl.sampling.storage import check_output_path

__all__ = [
    "BiasWarning",
    "ChunkPolicy",
    "ConvergenceWarning",
    "DivergenceWarning",
    "FixedChunks",
    "LoopOptions",
    "RunawayWarning",
    "Samples",
    "TimedChunks",
    "check_bias",
    "check_convergence",
    "check_output_path",
    "load_samples",
    "make_mesh",
    "merge_samples",
    "runaway_chains",
    "sample",
]

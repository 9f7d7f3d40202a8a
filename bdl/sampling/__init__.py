"""The sampling loop and its result."""

from bdl.sampling.kept.loading import load_samples
from bdl.sampling.kept.merge import merge_samples
from bdl.sampling.kept.writing import check_output_path
from bdl.sampling.run.chunking import ChunkPolicy, FixedChunks, TimedChunks
from bdl.sampling.run.layout import make_mesh
from bdl.sampling.run.loop_options import LoopOptions
from bdl.sampling.sample import sample
from bdl.sampling.samples import (
    BiasWarning,
    ConvergenceWarning,
    DivergenceWarning,
    RunawayWarning,
    Samples,
)
from bdl.sampling.verdict.bias_check import check_bias
from bdl.sampling.verdict.convergence_check import check_convergence
from bdl.sampling.verdict.runaway_check import runaway_chains

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

"""The sampling loop and its result."""

from bdl.sampling import run
from bdl.sampling.checks import checked
from bdl.sampling.samples import Samples

#: :func:`bdl.sampling.run.sample`, its seed and start checked before anything is traced
sample = checked(run.sample)

__all__ = ["Samples", "sample"]

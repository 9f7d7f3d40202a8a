"""The sampling loop and its result."""

from bdl.sampling.run import sample
from bdl.sampling.samples import Samples

__all__ = ["Samples", "sample"]

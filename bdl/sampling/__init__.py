"""The sampling loop and its result."""

from bdl.sampling.sample import sample
from bdl.sampling.samples import Samples

__all__ = ["Samples", "sample"]

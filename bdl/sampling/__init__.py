"""The sampling loop and its result."""

from bdl.sampling.layout import make_mesh
from bdl.sampling.merge import merge_samples
from bdl.sampling.run import sample
from bdl.sampling.samples import DivergenceWarning, Samples
from bdl.sampling.storage import check_output_path, load_samples

__all__ = [
    "DivergenceWarning",
    "Samples", "check_output_path", "load_samples", "make_mesh", "merge_samples", "sample"]

"""bdl: Bayesian deep learning with stochastic-gradient MCMC in JAX.

Declare a model (:class:`Model`), compile it on data (:func:`compile`), and draw samples with a
kernel from :mod:`bdl.kernels` (:func:`sample`).
"""

from bdl import diagnostics, kernels, metrics
from bdl.compilation_cache import enable_compilation_cache
from bdl.compile import CompiledModel, CompiledPotential, compile
from bdl.dsl import (
    Bernoulli,
    ByPath,
    Categorical,
    Distribution,
    Gaussian,
    HeNormal,
    Laplace,
    Likelihood,
    Model,
    Normal,
    Poisson,
    Potential,
    Prior,
    StudentT,
    linear_ramp,
)
from bdl.sampling import Samples, load_samples, sample
from bdl.spec import ModelSpec
from bdl.validation import validate

__version__ = "0.1.0"

__all__ = [
    "Bernoulli",
    "ByPath",
    "Categorical",
    "CompiledModel",
    "CompiledPotential",
    "Distribution",
    "Gaussian",
    "HeNormal",
    "Laplace",
    "Likelihood",
    "Model",
    "ModelSpec",
    "Normal",
    "Poisson",
    "Potential",
    "Prior",
    "Samples",
    "StudentT",
    "compile",
    "diagnostics",
    "enable_compilation_cache",
    "kernels",
    "linear_ramp",
    "load_samples",
    "metrics",
    "sample",
    "validate",
]

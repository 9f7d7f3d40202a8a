"""bdl: Bayesian deep learning with stochastic-gradient MCMC in JAX.

Declare a model (:class:`Model`), compile it on data (:func:`compile`), and draw samples with a
kernel from :mod:`bdl.kernels` (:func:`sample`).

The public names are imported on first use (PEP 562), so that ``import bdl`` — and commands such
as ``bdl kernels`` that need a small part of the library — do not pay for NumPyro, Flax, Optax
or ArviZ until something uses them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "Bernoulli": "bdl.dsl",
    "BiasWarning": "bdl.sampling",
    "Bounded": "bdl.dsl",
    "ByPath": "bdl.dsl",
    "Categorical": "bdl.dsl",
    "CompiledModel": "bdl.compile",
    "CompiledPotential": "bdl.compile",
    "Distribution": "bdl.dsl",
    "Gaussian": "bdl.dsl",
    "HeNormal": "bdl.dsl",
    "HierarchicalNormal": "bdl.dsl",
    "Laplace": "bdl.dsl",
    "Likelihood": "bdl.dsl",
    "Model": "bdl.dsl",
    "ModelSpec": "bdl.spec",
    "Normal": "bdl.dsl",
    "Ordered": "bdl.dsl",
    "Poisson": "bdl.dsl",
    "Potential": "bdl.dsl",
    "Prior": "bdl.dsl",
    "Samples": "bdl.sampling",
    "ConvergenceWarning": "bdl.sampling",
    "DivergenceWarning": "bdl.sampling",
    "RunawayWarning": "bdl.sampling",
    "StudentT": "bdl.dsl",
    "compile": "bdl.compile.compiler",
    "enable_compilation_cache": "bdl.compilation_cache",
    "linear_ramp": "bdl.dsl",
    "load_samples": "bdl.sampling",
    "reference": "bdl.validation.reference_draws",
    "make_mesh": "bdl.sampling",
    "merge_samples": "bdl.sampling",
    "sample": "bdl.sampling",
    "validate": "bdl.validation",
}
_SUBMODULES = ("augment", "diagnostics", "kernels", "layers", "metrics")

__all__ = [
    "Bernoulli",
    "BiasWarning",
    "Bounded",
    "ByPath",
    "Categorical",
    "CompiledModel",
    "CompiledPotential",
    "ConvergenceWarning",
    "Distribution",
    "DivergenceWarning",
    "Gaussian",
    "HeNormal",
    "HierarchicalNormal",
    "Laplace",
    "Likelihood",
    "Model",
    "ModelSpec",
    "Normal",
    "Ordered",
    "Poisson",
    "Potential",
    "Prior",
    "RunawayWarning",
    "Samples",
    "StudentT",
    "augment",
    "compile",
    "diagnostics",
    "enable_compilation_cache",
    "kernels",
    "layers",
    "linear_ramp",
    "load_samples",
    "make_mesh",
    "merge_samples",
    "metrics",
    "reference",
    "sample",
    "validate",
]

# ``bdl.compile`` is both a subpackage and the function: import the (light) package now, so that
# no later import of one of its modules rebinds ``bdl.compile`` to the package, and let
# __getattr__ resolve the name to the function.
importlib.import_module("bdl.compile")
del globals()["compile"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        try:
            value = importlib.import_module(f"bdl.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"bdl.{name}":
                raise
            raise AttributeError(f"module 'bdl' has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what type checkers and editors see
    from bdl import augment, diagnostics, kernels, layers, metrics
    from bdl.compilation_cache import enable_compilation_cache
    from bdl.compile import CompiledModel, CompiledPotential
    from bdl.compile.compiler import compile
    from bdl.dsl import (
        Bernoulli,
        Bounded,
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
    from bdl.sampling import (
        BiasWarning,
        ConvergenceWarning,
        DivergenceWarning,
        RunawayWarning,
        Samples,
        load_samples,
        make_mesh,
        merge_samples,
        sample,
    )
    from bdl.spec import ModelSpec
    from bdl.validation import validate
    from bdl.validation.reference_draws import reference

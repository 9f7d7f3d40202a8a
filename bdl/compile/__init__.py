"""The compiler: declarations lowered to pure, jittable JAX functions."""

from bdl.compile.compiled_model import CompiledModel
from bdl.compile.compiled_potential import CompiledPotential
from bdl.compile.compiler import compile
from bdl.compile.target import Target

__all__ = ["CompiledModel", "CompiledPotential", "Target", "compile"]

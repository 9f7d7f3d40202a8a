"""The model DSL: networks, likelihoods, priors, temperature."""

from bdl.dsl.bounded import Bounded
from bdl.dsl.conditional import ConditionalLeafPrior
from bdl.dsl.hierarchical import HierarchicalNormal
from bdl.dsl.likelihoods import Bernoulli, Categorical, Gaussian, Likelihood, Poisson, StudentT
from bdl.dsl.model import Model
from bdl.dsl.ordered import Ordered
from bdl.dsl.potential import Potential
from bdl.dsl.priors import ByPath, Distribution, HeNormal, Laplace, LeafPrior, Normal, Prior
from bdl.dsl.temperature import linear_ramp

__all__ = [
    "Bernoulli",
    "Bounded",
    "ByPath",
    "Categorical",
    "ConditionalLeafPrior",
    "Distribution",
    "Gaussian",
    "HeNormal",
    "HierarchicalNormal",
    "Laplace",
    "LeafPrior",
    "Likelihood",
    "Model",
    "Normal",
    "Ordered",
    "Poisson",
    "Potential",
    "Prior",
    "StudentT",
    "linear_ramp",
]

"""Models without a network: ``bdl.Model(likelihood=…, params=…)``.

Without a network the model is p(φ) Π_i p(y_i | φ): the likelihood reads only its own learned
parameters φ (``Likelihood.from_numpyro`` with every parameter given by keyword, the learned ones
as NumPyro priors), which are the whole position, ``position["lik"]`` (``position["net"]`` is
empty). ``params`` gives the starting values of some of them, in their constrained spaces.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from bdl.dsl.numpyro_likelihood import Likelihood
from bdl.utils.arguments import finite_array, shown


def check_without_network(likelihood: Likelihood, params: Any) -> None:
    """Raise unless ``likelihood`` can declare a model by itself: it reads no network output,
    has learned parameters to sample, and ``params`` names some of them."""
    if likelihood.reads_output:
        raise ValueError(
            f"Model(network=None): the likelihood {likelihood!r} reads a network output. A "
            "model without a network needs a likelihood whose every parameter is given by "
            "keyword, the sampled ones as priors, e.g. bdl.Likelihood.from_numpyro(dist.Normal, "
            "loc=dist.Normal(0.0, 10.0), scale=dist.HalfNormal(1.0)); or give the network."
        )
    learned = likelihood.param_priors
    if not learned:
        raise ValueError(
            f"Model(network=None): the likelihood {likelihood!r} has no learned parameter, so "
            "there is nothing to sample; give at least one parameter as a NumPyro "
            "distribution (its prior), e.g. scale=dist.HalfNormal(1.0)."
        )
    if params is None:
        return
    if not isinstance(params, Mapping):
        raise TypeError(
            "Model(params=...) of a model without a network gives starting values of the "
            f"likelihood's learned parameters, {{name: value}} with names among {sorted(learned)}; "
            f"got {shown(params)}."
        )
    unknown = sorted(set(params) - set(learned))
    if unknown:
        raise ValueError(
            f"Model(params=...) names {unknown}, which are not learned parameters of the "
            f"likelihood; its learned parameters are {sorted(learned)}."
        )
    for name, value in params.items():
        finite_array(
            value,
            f"Model(params={{{name!r}: ...}}) must be a number or array (the starting value); "
            f"got {shown(value)}.",
            f"Model(params={{{name!r}: ...}}) has NaN or infinite entries.",
        )


def starting_values(likelihood: Likelihood, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The learned parameters' starting values (constrained): ``params`` where given, else the
    likelihood's own (:attr:`Likelihood.param_init`)."""
    values = dict(likelihood.param_init)
    for name, value in (params or {}).items():
        values[name] = np.asarray(value, np.float32)
    return values

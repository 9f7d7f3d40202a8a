"""Finite mixtures of one NumPyro component family, as a constructor ``Likelihood.from_numpyro``
can feed: ``Likelihood.from_numpyro(dist.MixtureSameFamily, component=dist.Normal, weights=…,
loc=…, scale=…)``.

    p(y | w, φ) = Σ_k w_k · D(y; φ_k),      w on the simplex,

with the component parameters φ_k on the last batch axis (of size K) of each parameter. It is
NumPyro's ``MixtureSameFamily(Categorical(probs=w), D(φ))``; the mixture's log-density is
log Σ_k exp(log w_k + log D(y; φ_k)), evaluated by ``logsumexp``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import jax
import numpyro.distributions as dist

from bdl.utils.arguments import shown


def mixture(component: Any) -> Callable[..., dist.Distribution]:
    """The constructor ``(weights, **component parameters) -> MixtureSameFamily`` of mixtures of
    ``component`` (a NumPyro distribution class such as ``dist.Normal``); its signature lists
    ``weights`` first, then the component's parameters, so that ``Likelihood.from_numpyro``
    reads them as the distribution's parameters."""
    if not (inspect.isclass(component) and issubclass(component, dist.Distribution)):
        raise TypeError(
            "Likelihood.from_numpyro(dist.MixtureSameFamily, component=...) must name the "
            "component family, a NumPyro distribution class such as dist.Normal; got "
            f"{shown(component)}."
        )
    params = [
        p
        for p in inspect.signature(component).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "validate_args"
    ]
    if any(p.name == "weights" for p in params):
        raise ValueError(
            f"Likelihood.from_numpyro(dist.MixtureSameFamily, component={component.__name__}): "
            "the component has a parameter named 'weights', which the mixture's weights would "
            "shadow."
        )

    def build(weights: jax.Array, **component_params: Any) -> dist.Distribution:
        given = {k: v for k, v in component_params.items() if v is not None}
        return dist.MixtureSameFamily(dist.Categorical(probs=weights), component(**given))

    weights = inspect.Parameter("weights", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY, default=None) for p in params]
    build.__signature__ = inspect.Signature([weights, *keyword])  # type: ignore[attr-defined]
    build.__name__ = f"MixtureSameFamily[{component.__name__}]"
    build.__qualname__ = build.__name__
    return build

"""The regressions of the posteriordb suite, each as its Stan program states it.

* ``earnings-earn_height``: earn ~ N(β₁ + β₂·height, σ²), flat priors on β and σ > 0.
* ``earnings-logearn_interaction_z``: log earn ~ N(β₁ + β₂·z + β₃·male + β₄·z·male, σ²),
  z the standardised height (Stan's ``sd``: the N − 1 denominator), flat priors.
* ``earnings-logearn_logheight_male``: log earn ~ N(β₁ + β₂·log height + β₃·male, σ²), flat
  priors.
* ``kidiq_with_mom_work-kidscore_interaction_c``: kid_score ~ N(β₁ + β₂·hs + β₃·iq + β₄·hs·iq,
  σ²), hs and iq centred at their means, flat priors.
* ``arma-arma11``: ARMA(1, 1), ν₁ = μ + φμ, ν_t = μ + φ·y_{t−1} + θ·e_{t−1}, e_t = y_t − ν_t,
  e ~ N(0, σ²); μ ~ N(0, 10²), φ, θ ~ N(0, 2²), σ ~ Cauchy⁺(0, 2.5).

Stan's flat priors are ``ImproperUniform`` here (on ℝ for β, on (0, ∞) for σ, so σ is sampled
as log σ with its Jacobian, as Stan does). The regressions' rows are their observations; the ARMA
series is one observation of T values (its errors chain through time), the series being both the
input and the target.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from numpyro.distributions import constraints

from bdl.data.dataset import Dataset
from bdl.dsl.likelihoods import Gaussian
from bdl.dsl.model import Model
from bdl.dsl.priors import ByPath, Distribution, Normal

#: Stan's implicit uniform prior on an unconstrained real and on a positive real
FLAT = Distribution(dist.ImproperUniform(constraints.real, (), ()))
FLAT_POSITIVE = dist.ImproperUniform(constraints.positive, (), ())


def linear(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    """The linear predictor x·β of a design matrix whose first column is the intercept's ones.

    Args:
        params: ``{"beta": β}``.
        x: the design matrix ``(n, len(β))``.

    Returns:
        x·β, ``(n,)``.
    """
    return x @ params["beta"]


def _columns(*columns: np.ndarray) -> np.ndarray:
    return np.stack([np.ones_like(columns[0]), *columns], axis=1)


def _float(data: dict[str, Any], key: str) -> np.ndarray:
    return np.asarray(data[key], np.float64)


def _earn_height(data: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    return _columns(_float(data, "height")), _float(data, "earn")


def _logearn_interaction_z(data: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    height, male = _float(data, "height"), _float(data, "male")
    z = (height - height.mean()) / height.std(ddof=1)  # Stan's sd(): N − 1 denominator
    return _columns(z, male, z * male), np.log(_float(data, "earn"))


def _logearn_logheight_male(data: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    height, male = _float(data, "height"), _float(data, "male")
    return _columns(np.log(height), male), np.log(_float(data, "earn"))


def _kidscore_interaction_c(data: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    hs, iq = _float(data, "mom_hs"), _float(data, "mom_iq")
    hs, iq = hs - hs.mean(), iq - iq.mean()
    return _columns(hs, iq, hs * iq), _float(data, "kid_score")


#: posterior → its (design matrix with the intercept's column, response) from posteriordb's data
_DESIGNS = {
    "earnings-earn_height": _earn_height,
    "earnings-logearn_interaction_z": _logearn_interaction_z,
    "earnings-logearn_logheight_male": _logearn_logheight_male,
    "kidiq_with_mom_work-kidscore_interaction_c": _kidscore_interaction_c,
}

REGRESSIONS: tuple[str, ...] = tuple(_DESIGNS)
"""The posteriors :func:`regression` declares: the four linear regressions of the module
docstring (ARMA is :func:`arma11`)."""


def regression(name: str, data: dict[str, Any]) -> tuple[Model, Dataset]:
    """A linear regression of the suite, y ~ N(Xβ, σ²) with flat priors on β and σ > 0, its
    design X and response y built from posteriordb's data as the Stan program builds them
    (module docstring).

    Args:
        name: one of :data:`REGRESSIONS`, e.g. ``"earnings-earn_height"``.
        data: the posterior's posteriordb data (``earnings`` or ``kidiq_with_mom_work``).

    Returns:
        The model and its data set (rows: the N people).

    Raises:
        ValueError: ``name`` is not one of :data:`REGRESSIONS`.
    """
    if name not in _DESIGNS:
        raise ValueError(f"name must be one of {', '.join(REGRESSIONS)}; got {name!r}.")
    design, y = _DESIGNS[name](data)
    model = Model(
        network=linear,
        params={"beta": jnp.zeros(design.shape[1])},
        likelihood=Gaussian(scale=None, scale_prior=FLAT_POSITIVE),
        prior=FLAT,
        name=name,
    )
    return model, Dataset(name, design.astype(np.float32), np.asarray(y, np.float32))


def arma_predictions(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    """ARMA(1, 1) one-step predictions ν of each series (row) of ``x``, as arma11.stan computes
    them: ν₁ = μ + φμ (the error before the first value taken as 0), then
    ν_t = μ + φ·y_{t−1} + θ·(y_{t−1} − ν_{t−1}).

    Args:
        params: ``{"mu", "phi", "theta"}``, scalars.
        x: series ``(m, T)``.

    Returns:
        ν, ``(m, T)``.
    """
    mu, phi, theta = params["mu"], params["phi"], params["theta"]

    def series(y: jax.Array) -> jax.Array:
        first = mu + phi * mu

        def step(err: jax.Array, pair: jax.Array) -> tuple[jax.Array, jax.Array]:
            previous, current = pair[0], pair[1]
            nu = mu + phi * previous + theta * err
            return current - nu, nu

        pairs = jnp.stack([y[:-1], y[1:]], axis=1)
        _, rest = jax.lax.scan(step, y[0] - first, pairs)
        return jnp.concatenate([first[None], rest])

    return jax.vmap(series)(x)


def arma11(data: dict[str, Any]) -> tuple[Model, Dataset]:
    """``arma-arma11``: an ARMA(1, 1) series with μ ~ N(0, 10²), φ, θ ~ N(0, 2²) and
    σ ~ Cauchy⁺(0, 2.5).

    Args:
        data: posteriordb's ``arma`` data.

    Returns:
        The model and its data set: one row, the series as input and as target.
    """
    y = np.asarray(data["y"], np.float32)[None, :]
    model = Model(
        network=arma_predictions,
        params={"mu": jnp.zeros(()), "phi": jnp.zeros(()), "theta": jnp.zeros(())},
        likelihood=Gaussian(scale=None, scale_prior=dist.HalfCauchy(2.5)),
        prior=ByPath({"/mu$": Normal(10.0), "/(phi|theta)$": Normal(2.0)}),
        name="arma-arma11",
    )
    return model, Dataset("arma-arma11", y, y)

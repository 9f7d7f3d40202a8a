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


def _regression(name: str, design: np.ndarray, y: np.ndarray) -> tuple[Model, Dataset]:
    model = Model(
        network=linear,
        params={"beta": jnp.zeros(design.shape[1])},
        likelihood=Gaussian(scale=None, scale_prior=FLAT_POSITIVE),
        prior=FLAT,
        name=name,
    )
    data = Dataset(name, design.astype(np.float32), np.asarray(y, np.float32))
    return model, data


def _columns(*columns: np.ndarray) -> np.ndarray:
    return np.stack([np.ones_like(columns[0]), *columns], axis=1)


def earn_height(data: dict[str, Any]) -> tuple[Model, Dataset]:
    """``earnings-earn_height``: earnings on height, flat priors.

    Args:
        data: posteriordb's ``earnings`` data.

    Returns:
        The model and its data set (rows: the N people).
    """
    height = np.asarray(data["height"], np.float64)
    return _regression("earnings-earn_height", _columns(height), np.asarray(data["earn"]))


def logearn_interaction_z(data: dict[str, Any]) -> tuple[Model, Dataset]:
    """``earnings-logearn_interaction_z``: log earnings on standardised height, sex and their
    interaction, flat priors.

    Args:
        data: posteriordb's ``earnings`` data.

    Returns:
        The model and its data set.
    """
    height = np.asarray(data["height"], np.float64)
    male = np.asarray(data["male"], np.float64)
    z = (height - height.mean()) / height.std(ddof=1)  # Stan's sd(): N − 1 denominator
    design = _columns(z, male, z * male)
    y = np.log(np.asarray(data["earn"], np.float64))
    return _regression("earnings-logearn_interaction_z", design, y)


def logearn_logheight_male(data: dict[str, Any]) -> tuple[Model, Dataset]:
    """``earnings-logearn_logheight_male``: log earnings on log height and sex, flat priors.

    Args:
        data: posteriordb's ``earnings`` data.

    Returns:
        The model and its data set.
    """
    height = np.asarray(data["height"], np.float64)
    male = np.asarray(data["male"], np.float64)
    y = np.log(np.asarray(data["earn"], np.float64))
    return _regression("earnings-logearn_logheight_male", _columns(np.log(height), male), y)


def kidscore_interaction_c(data: dict[str, Any]) -> tuple[Model, Dataset]:
    """``kidiq_with_mom_work-kidscore_interaction_c``: a child's test score on the mother's
    schooling and IQ, centred, and their interaction, flat priors.

    Args:
        data: posteriordb's ``kidiq_with_mom_work`` data.

    Returns:
        The model and its data set.
    """
    hs = np.asarray(data["mom_hs"], np.float64)
    iq = np.asarray(data["mom_iq"], np.float64)
    hs, iq = hs - hs.mean(), iq - iq.mean()
    design = _columns(hs, iq, hs * iq)
    return _regression(
        "kidiq_with_mom_work-kidscore_interaction_c", design, np.asarray(data["kid_score"])
    )


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

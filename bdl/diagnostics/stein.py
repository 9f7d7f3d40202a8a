r"""Stein identities: how far the law of a run's draws is from π_T, with full-data gradients.

For π_T ∝ exp(−U/T) on ℝ^d, write G(θ) = ∇U(θ)/T. Integration by parts gives, for any smooth
vector field h with enough decay (Stein 1972; Gorham & Mackey 2015),

    E_{π_T}[ h(θ)·G(θ) − ∇·h(θ) ] = 0,

an identity that needs neither the normaliser of π_T nor a reference sample. A sampler whose
stationary law q differs from π_T — a finite step, noisy gradients, an omitted correction term —
breaks it. This module estimates, from a run's draws, statistics built on it that read as the
errors a user cares about: each coordinate's mean error (in sds) and the ratio of its spread
to the target's.

**Test fields.** For a coordinate i, a fixed matrix A and a scalar function φ of θ_i alone, take
h = φ(θ_i)·A e_i. Then h·G = φ(θ_i)·(AᵀG)_i and ∇·h = A_ii·φ'(θ_i), so with the *marginal score*
u_i = (AᵀG)_i / A_ii,

    E_{π_T}[ φ(θ_i) u_i ] = E_{π_T}[ φ'(θ_i) ].

Three choices of φ are used, each against its own standard error:

* φ = 1 (location): E[u_i] = 0. Reported as ℓ_i = E_q[u_i]·√V_ii, in the target's sds.
* φ = a·tanh((θ_i − c_i)/a) (spread), c_i the chain's mean: the ratio
  ρ_i = E_q[φ u_i] / E_q[φ'] is 1 under π_T. Two widths are used: a = s_i ("bulk", s_i the
  draws' robust sd, interquartile range / 1.349) and a = 3·s_i ("wide"). Both are bounded, so their
  estimates stay well behaved for heavy-tailed laws, where moments of θ² are not.

**Preconditioning.** With A = V, the target's covariance, u_i = (VG)_i/V_ii is exactly the
score of θ_i's marginal for a Gaussian target, so the statistics measure the marginals' errors —
what a user reads off the draws — rather than errors along stiff directions that hardly move the
marginals (with A = I, the configurational temperature (θ_i − c_i)·∂_iU/T of Wenzel et al. 2020,
App. I, a two-dimensional Gaussian of correlation 0.99 sampled 15 % too wide along its stiff axis
reads 1.17 in every coordinate while each marginal sd is 0.1 % off). V is estimated by the
Stein identity itself: E_{π}[(θ − c)Gᵀ] = I, so the regression slope B of G on θ over the draws
with gradients satisfies B = V⁻¹ under π_T (and for any law q when the target is Gaussian).
With d small enough for the regression (:data:`FULL_MAX` coordinates, at least four draws with
gradients per coordinate), A = V = B⁻¹; otherwise A = I and B is fitted per coordinate.

**Control variates.** Gradients cost a full pass over the data, so they are computed at a subset
S of the draws only. The regression gives a prediction of u_i at every draw,
û_i(θ) = (θ_i − m̂_i)/V_ii with m̂ = θ̄_S − V·Ḡ_S the mean it implies (one Newton step from the
subset's mean), exact for a Gaussian target; each expectation E_q[f] (f = φ·u_i, …) is then
estimated as

    mean over S of f + β·( mean over all draws of f̂ − mean over S of f̂ ),

f̂ being f with û_i for u_i: a regression estimator (Cochran 1977, ch. 7) with the coefficient
β ∈ [0, 1] that minimises its variance (the slope of f on f̂ over S). For a Gaussian target β = 1
and the estimate is as precise as if every draw had its gradient; for heavy tails, where û
grows linearly while u stays bounded, β falls towards 0 and the estimate towards the plain mean
over S. Its standard error comes from the two influence series (the first over S, the second over
all draws), each through its own effective sample size
(:func:`bdl.diagnostics.chains.effective_sample_size`, Geyer's initial monotone sequence over the
chains), not from one draw's spread.

**Reading a ratio as a scale.** If q were π_T rescaled by s about its centre, the spread
ratios would move with s at a rate k that depends on the tails: ρ = s² for a Gaussian, ρ ≈ s for a
Student-t with three degrees of freedom. A second Stein identity gives that rate from the draws
(for the bulk function and a scale family, dρ/ds at s = 1 is
k = (E[a x tanh(x/a) u²] − E[x sech²(x/a) u]) / E[sech²(x/a)], x = θ_i − c_i; here evaluated with
each term divided by the power of ρ that makes k invariant to the scale, so that k is 2 for any
Gaussian however wide the draws). The implied ratio of spreads is s = ρ^{1/k}, reported as the
relative error s − 1 (k is held within [:data:`K_MIN`, :data:`K_MAX`]).

**Pooling.** Where a sampler's error is the same in every coordinate (an SGLD step on an
isotropic target), the mean of log s over coordinates has a far smaller standard error than any
one coordinate; it is estimated with the mean of the coordinates' influence series.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from bdl.diagnostics.chains import effective_sample_size

__all__ = [
    "FAMILIES",
    "FULL_MAX",
    "K_MAX",
    "K_MIN",
    "Pooled",
    "SteinEstimates",
    "stein_estimates",
]

#: most coordinates preconditioned by the full regression (above: coordinate by coordinate)
FULL_MAX = 64
#: draws with gradients needed per coordinate for the full regression
DRAWS_PER_COORDINATE = 4
#: the spread test functions: name -> width in robust sds
FAMILIES: dict[str, float] = {"bulk": 1.0, "wide": 3.0}
#: the range the rate k of a spread ratio is held in
K_MIN, K_MAX = 0.5, 4.0
#: the robust sd of a normal law from its interquartile range
_IQR_TO_SD = 1.0 / 1.3489795003921634


@dataclasses.dataclass(frozen=True)
class Pooled:
    """The geometric mean over coordinates of one spread family's implied ratio s, and its
    standard error."""

    value: float
    se: float


@dataclasses.dataclass(frozen=True)
class SteinEstimates:
    """What the Stein identities say of a run's draws, coordinate by coordinate.

    Attributes:
        names: the coordinates' names.
        location, location_se: the mean error ℓ_i in the target's sds, and its standard error.
        spread, spread_se: per family (:data:`FAMILIES`), the implied ratio s_i of the draws'
            spread to the target's (1: right), and its standard error.
        rate: per family, the rate k_i at which the ratio moves with a rescaling (2: Gaussian).
        pooled: per family, the geometric mean of s_i over the coordinates (:class:`Pooled`).
        target_sd: √V_ii, the target's sd of each coordinate implied by the regression (NaN
            where it is not positive).
        draws_sd: the draws' sd of each coordinate (within chains).
        preconditioned: whether the full regression preconditioned the statistics (module
            docstring).
        draws, with_gradients: the draws used, and how many of them had a gradient.
    """

    names: tuple[str, ...]
    location: np.ndarray
    location_se: np.ndarray
    spread: dict[str, np.ndarray]
    spread_se: dict[str, np.ndarray]
    rate: dict[str, np.ndarray]
    pooled: dict[str, Pooled]
    target_sd: np.ndarray
    draws_sd: np.ndarray
    preconditioned: bool
    draws: int
    with_gradients: int


def stein_estimates(
    draws: Any,
    gradients: Any,
    subset: Any,
    names: Any = None,
    *,
    full_max: int = FULL_MAX,
) -> SteinEstimates:
    """The Stein statistics of ``draws`` (module docstring).

    Args:
        draws: θ at every draw, ``(chains, draws, d)``.
        gradients: G = ∇U/T at the draws ``subset`` of every chain, ``(chains, len(subset), d)``,
            full-data gradients (no minibatch noise).
        subset: the draw indices (into axis 1 of ``draws``) the gradients were taken at.
        names: one name per coordinate (default ``theta[i]``).
        full_max: most coordinates for the preconditioned (full-regression) statistics.

    Returns:
        The estimates, in float64.

    Raises:
        ValueError: the shapes do not match, or fewer than 2 draws with gradients per chain.
    """
    x = np.asarray(draws, np.float64)
    g = np.asarray(gradients, np.float64)
    idx = np.asarray(subset, np.int64)
    if x.ndim != 3 or g.ndim != 3 or g.shape != (x.shape[0], idx.size, x.shape[2]):
        raise ValueError(
            f"stein_estimates: draws (chains, draws, d) and gradients (chains, {idx.size}, d) "
            f"do not match; got {x.shape} and {g.shape}."
        )
    chains, num, d = x.shape
    if idx.size < 2:
        raise ValueError("stein_estimates: needs gradients at 2 draws per chain at least.")
    names = tuple(names) if names is not None else tuple(f"theta[{i}]" for i in range(d))
    at = x[:, idx]
    centre = x.mean(axis=1, keepdims=True)  # each chain's mean: the spread functions' centre
    fit = _regression(at, g, full_max)
    score_all = (x - fit.mean) / fit.variance  # û_i at every draw
    score_at = (at - fit.mean) / fit.variance

    target_sd = np.sqrt(np.where(fit.variance > 0, fit.variance, np.nan))
    draws_sd = np.sqrt(((x - centre) ** 2).sum(axis=(0, 1)) / max(chains * num - chains, 1))
    scale_sd = np.where(np.isfinite(target_sd), target_sd, draws_sd)
    location, location_se, _ = _controlled(
        fit.score * scale_sd, score_at * scale_sd, score_all * scale_sd, with_se=True
    )

    robust = _robust_sd(x - centre, draws_sd)
    spread, spread_se, rate, pooled = {}, {}, {}, {}
    for family, width in FAMILIES.items():
        a = width * robust
        s, se, k, influence = _spread(x - centre, at - centre, a, score_all, score_at, fit.score)
        spread[family], spread_se[family], rate[family] = s, se, k
        pooled[family] = _pooled(s, influence)
    return SteinEstimates(
        names=names,
        location=location,
        location_se=location_se,
        spread=spread,
        spread_se=spread_se,
        rate=rate,
        pooled=pooled,
        target_sd=target_sd,
        draws_sd=draws_sd,
        preconditioned=fit.full,
        draws=chains * num,
        with_gradients=chains * idx.size,
    )


@dataclasses.dataclass(frozen=True)
class _Fit:
    """The regression of G on θ over the draws with gradients: the marginal scores u there, and
    the Gaussian prediction's mean m̂ (per chain) and variance V_ii."""

    score: np.ndarray  # (chains, S, d)
    mean: np.ndarray  # (chains, 1, d)
    variance: np.ndarray  # (d,)
    full: bool


def _regression(at: np.ndarray, g: np.ndarray, full_max: int) -> _Fit:
    """Fit G ≈ Ḡ_c + B(θ − θ̄_c) within chains; V = B⁻¹ (module docstring). The full regression
    where it is well posed and gives positive variances, else one slope per coordinate; a
    coordinate whose slope is not positive gets no control variate (V_ii = ∞, û_i = 0)."""
    chains, size, d = at.shape
    xc = at - at.mean(axis=1, keepdims=True)
    gm = g.mean(axis=1, keepdims=True)
    gc = g - gm
    dof = max(chains * size - chains, 1)
    if d <= full_max and chains * size >= DRAWS_PER_COORDINATE * d + 10:
        sigma = np.einsum("csj,csk->jk", xc, xc) / dof
        cross = np.einsum("csj,csk->jk", gc, xc) / dof  # Cov(G_j, θ_k)
        with np.errstate(all="ignore"):
            try:
                v = sigma @ np.linalg.inv(cross)  # B⁻¹ = Σ_S Cov(G, θ)⁻¹
            except np.linalg.LinAlgError:
                v = None
        if v is not None and np.all(np.isfinite(v)) and np.all(np.diag(v) > 0):
            diag = np.diag(v).copy()
            score = (g @ v.T) / diag
            mean = at.mean(axis=1, keepdims=True) - (gm @ v.T)
            return _Fit(score, mean, diag, True)
    var = (xc**2).sum(axis=(0, 1)) / dof
    cov = (gc * xc).sum(axis=(0, 1)) / dof
    fitted = (cov > 0) & (var > 0)
    diag = np.where(fitted, var / np.where(fitted, cov, 1.0), np.inf)
    mean = at.mean(axis=1, keepdims=True) - gm * np.where(fitted, diag, 0.0)
    return _Fit(g, mean, diag, False)


def _ess(series: np.ndarray) -> np.ndarray:
    """The effective sample size of each column of ``(chains, draws, k)`` series, at least 1;
    a constant series counts as its number of values."""
    if series.shape[1] < 4:
        return np.full(series.shape[2], float(series.shape[0] * series.shape[1]))
    with np.errstate(all="ignore"):
        ess = np.asarray(effective_sample_size(series), np.float64).reshape(series.shape[2])
    constant = np.ptp(series.reshape(-1, series.shape[2]), axis=0) == 0
    ess = np.where(constant, series.shape[0] * series.shape[1], ess)
    return np.clip(np.nan_to_num(ess, nan=1.0), 1.0, None)


def _variance_of_mean(series: np.ndarray) -> np.ndarray:
    """Var of the mean of each column of ``(chains, draws, k)``: its variance over its ESS."""
    centred = series - series.mean(axis=(0, 1))
    return centred.var(axis=(0, 1)) / _ess(centred)


def _controlled(
    f_at: np.ndarray, fhat_at: np.ndarray, fhat_all: np.ndarray, *, with_se: bool = False
) -> tuple[np.ndarray, np.ndarray | None, tuple[np.ndarray, np.ndarray]]:
    """E_q[f] per column, from f at the draws with gradients and its prediction f̂ (which needs
    no gradient) there and at every draw: mean_S(f) + β·(mean_all(f̂) − mean_S(f̂)), with the
    coefficient β ∈ [0, 1] that minimises the variance (the least-squares slope of f on f̂ over
    S; 1 when the prediction is exact, as for a Gaussian target, near 0 where it only adds noise,
    as in heavy tails). Returns the estimate, its standard error (``with_se``; else ``None``: an
    ESS per column is the check's main cost) and the two influence series (over S, over all
    draws)."""
    flat_f = f_at.reshape(-1, f_at.shape[-1])
    flat_h = fhat_at.reshape(-1, f_at.shape[-1])
    fc, hc = flat_f - flat_f.mean(axis=0), flat_h - flat_h.mean(axis=0)
    var = (hc**2).sum(axis=0)
    beta = np.where(var > 0, (fc * hc).sum(axis=0) / np.where(var > 0, var, 1.0), 0.0)
    beta = np.clip(np.nan_to_num(beta), 0.0, 1.0)
    on_subset = f_at - beta * fhat_at
    on_all = beta * fhat_all
    value = on_subset.mean(axis=(0, 1)) + on_all.mean(axis=(0, 1))
    se = None
    if with_se:
        se = np.sqrt(_variance_of_mean(on_subset) + _variance_of_mean(on_all))
    return value, se, (on_subset, on_all)


def _robust_sd(centred: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """Interquartile range / 1.349 of each coordinate's chain-centred draws (the sd where that is
    zero: a coordinate that takes few values)."""
    flat = centred.reshape(-1, centred.shape[-1])
    q1, q3 = np.percentile(flat, [25.0, 75.0], axis=0)
    robust = (q3 - q1) * _IQR_TO_SD
    return np.where(robust > 0, robust, np.where(sd > 0, sd, 1.0))


def _spread(
    x_all: np.ndarray,
    x_at: np.ndarray,
    a: np.ndarray,
    score_all: np.ndarray,
    score_at: np.ndarray,
    score: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """One spread family: the implied ratio s, its se, the rate k, and the influence series of
    log s (over all draws, over the subset) for pooling. ``score`` is u at the draws with
    gradients, ``score_at`` and ``score_all`` its prediction û there and at every draw."""
    z_all, z_at = x_all / a, x_at / a
    phi_all, phi_at = a * np.tanh(z_all), a * np.tanh(z_at)
    dphi_all, dphi_at = _sech2(z_all), _sech2(z_at)
    denom = dphi_all.mean(axis=(0, 1))
    num, _, (on_subset, on_all) = _controlled(
        phi_at * score, phi_at * score_at, phi_all * score_all
    )
    ratio = num / denom
    influence_at = on_subset / denom
    influence_all = (on_all - ratio * dphi_all) / denom
    positive = np.maximum(ratio, 1e-12)
    curv, _, (curv_at, curv_all) = _controlled(
        phi_at * x_at * score**2, phi_at * x_at * score_at**2, phi_all * x_all * score_all**2
    )
    slope, _, (slope_at, slope_all) = _controlled(
        x_at * dphi_at * score, x_at * dphi_at * score_at, x_all * dphi_all * score_all
    )
    with np.errstate(all="ignore"):
        k = (curv / positive**2 - slope / positive) / denom
    inside = np.isfinite(k) & (k > K_MIN) & (k < K_MAX)  # a rate held at its bound is not varied
    k = np.clip(np.nan_to_num(k, nan=2.0), K_MIN, K_MAX)
    # a ratio at or below 0 has no scale: noise swamps it (left out, NaN, as is its se)
    s = np.where(ratio > 0, positive ** (1.0 / k), np.nan)
    # log s = log ρ / k: its influence through ρ and through k (whose error matters far from
    # ρ = 1), k's own through its two moments, ρ and the denominator
    weight = np.where(inside, np.log(positive) / k**2, 0.0)
    dk_dratio = (-2.0 * curv / positive**3 + slope / positive**2) / denom

    def log_influence(ratio_part, curv_part, slope_part, denom_part):
        k_part = (
            (curv_part / positive**2 - slope_part / positive) / denom
            + dk_dratio * ratio_part
            - k * denom_part / denom
        )
        return ratio_part / (k * positive) - weight * k_part

    log_at = log_influence(influence_at, curv_at, slope_at, 0.0)
    log_all = log_influence(influence_all, curv_all, slope_all, dphi_all - denom)
    se = s * np.sqrt(_variance_of_mean(log_at) + _variance_of_mean(log_all))
    return s, se, k, (log_all, log_at)


def _sech2(z: np.ndarray) -> np.ndarray:
    """sech²(z) = 4e^{−2|z|}/(1 + e^{−2|z|})², without cosh's overflow far out."""
    e = np.exp(-2.0 * np.abs(z))
    return 4.0 * e / (1.0 + e) ** 2


def _pooled(s: np.ndarray, influence: tuple[np.ndarray, np.ndarray]) -> Pooled:
    """The geometric mean of ``s`` over coordinates (those where it is defined), with the se of
    the mean log from the coordinates' mean influence series."""
    ok = np.isfinite(s)
    if not ok.any():
        return Pooled(math.nan, math.nan)
    all_draws, at_subset = (i[..., ok].mean(axis=-1, keepdims=True) for i in influence)
    log_mean = float(np.mean(np.log(s[ok])))
    var = float(_variance_of_mean(all_draws)[0] + _variance_of_mean(at_subset)[0])
    value = math.exp(log_mean)
    return Pooled(value, value * math.sqrt(var))

"""Comparisons of a kernel's draws with a NUTS reference, each gate a systematic tolerance plus the
Monte Carlo error of both runs (:mod:`bdl.validation.monte_carlo`).

Parameter space (identifiable models): per parameter, the standardised mean error
(m_k − m_ref)/sd_ref, the sd ratio sd_k/sd_ref, the MCSE-aware z-score
(m_k − m_ref)/√(MCSE_k² + MCSE_ref²), and the energy distance between the two sample sets
standardised by the reference sd.

Function space (networks, Izmailov et al. 2021; Wenzel et al. 2020 App. O): on held-out inputs,
top-1 agreement, total variation and symmetrised KL between the two BMA predictives, and the BMA
accuracy, NLL and ECE of both. For regression networks: the predictive mean error in reference
sd units and the ratio of predictive sds.

Every threshold is ``tolerance + Monte Carlo allowance``: the allowance grows as either run's
effective sample size shrinks, so that an exact sampler fails a gate with probability at most
:data:`bdl.validation.monte_carlo.FALSE_FAIL`; docs/validation.md derives each one.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import ndtr

from bdl import metrics
from bdl.compile.compiled_model import CompiledModel
from bdl.diagnostics import ess_bulk
from bdl.utils.trees import parameter_names
from bdl.validation import monte_carlo as mc
from bdl.validation.reference import (
    evaluation_fields,
    evaluation_inputs,
    parameter_summaries,
)
from bdl.validation.row import Row

PyTree = Any


# systematic tolerances (docs/validation.md explains each); the Monte Carlo allowance comes on top
#: the fewest effective draws the comparison's Monte Carlo errors rest on
MIN_KERNEL_ESS = 100.0
#: the name of the row gating :data:`MIN_KERNEL_ESS`: the bulk ESS of every compared parameter
#: (the convergence check's "kernel min bulk ESS (convergence)" is another gate, per chain)
COMPARED_ESS = "compared parameters: min bulk ESS"
#: |m − m_ref|/sd_ref
MEAN_TOLERANCE = 0.02
#: |log(sd/sd_ref)| ≤ log(1 + SD_TOLERANCE)
SD_TOLERANCE = 0.01
#: energy distance in reference-sd units
ENERGY_TOLERANCE = 0.01
#: top-1 disagreement
AGREEMENT_TOLERANCE = 0.05
TOTAL_VARIATION_TOLERANCE = 0.05
SYMMETRISED_KL_TOLERANCE = 0.02
#: mean over inputs of |Δ predictive mean|/sd_ref
PREDICTIVE_MEAN_TOLERANCE = 0.2
#: |log(median predictive sd ratio)| ≤ log(1 + PREDICTIVE_SD_TOLERANCE)
PREDICTIVE_SD_TOLERANCE = 0.25
#: draws per side the energy distance uses at most
ENERGY_DRAWS = 2_000


def compare_parameters(
    draws: PyTree,
    reference: PyTree,
    *,
    seed: int = 0,
    labels: dict[str, Any] | None = None,
    energy_draws: int = ENERGY_DRAWS,
) -> list[Row]:
    """The parameter-space rows for ``(chain, draw, ...)`` draws against NUTS's. The parameter
    with the largest standardised mean error is named by
    :func:`bdl.utils.trees.parameter_names` (``labels``: its feature names by path); the
    energy distance uses at most ``energy_draws`` draws per side, chosen at random.

    Args:
        draws: the kernel's draws, ``(chain, draw, ...)`` per leaf.
        reference: NUTS's draws, with the same structure.
        seed: the seed of the energy distance's subsample.
        labels: feature names along the first axis of some leaves, by path.
        energy_draws: the most draws per side in the energy distance.

    Returns:
        The rows of the comparison.
    """
    x = parameter_summaries(draws).astype(np.float64)
    r = parameter_summaries(reference).astype(np.float64)
    k, ref = mc.mean_and_errors(x), mc.mean_and_errors(r)
    sd_r = ref["sd"]
    both = np.sqrt(k["mcse"] ** 2 + ref["mcse"] ** 2)
    sme = (k["mean"] - ref["mean"]) / sd_r
    log_ratio = np.log(k["sd"] / sd_r)
    log_se = np.sqrt(k["log_sd_se"] ** 2 + ref["log_sd_se"] ** 2)
    xs = x.reshape(-1, x.shape[-1]) / sd_r
    rs = r.reshape(-1, r.shape[-1]) / sd_r
    key = jax.random.key(seed)
    ed = float(metrics.energy_distance(xs, rs, max_samples=energy_draws, key=key))
    ed_bound = _energy_bound(
        xs, mc.harmonic_ess(k["ess"]), rs, mc.harmonic_ess(ref["ess"]), energy_draws
    )
    z = (k["mean"] - ref["mean"]) / both
    rows = _moment_rows(
        ess_bulk(x), sme, both / sd_r, log_ratio, log_se, z, ed, ed_bound,
        reference_ess=float(np.min(ess_bulk(r))),
    )  # fmt: skip
    names = parameter_names(reference, batch_dims=2, labels=labels)
    # under each "max |…|" row, the parameter where it is reached, with that statistic's value
    for title, values in (("max |MCSE-aware z|", z), ("max |standardised mean error|", sme)):
        worst = int(np.argmax(np.abs(values)))
        at = next(i for i, row in enumerate(rows) if row.name == title) + 1
        rows.insert(
            at, Row(f"  (worst parameter: {names[worst]})", float(values[worst]), None, "", None)
        )
    return rows


def _energy_bound(xs: np.ndarray, ess_x: float, rs: np.ndarray, ess_r: float, draws: int) -> float:
    """The Monte Carlo allowance of the energy distance of ``xs`` and ``rs`` (standardised),
    ``draws`` of each at most."""
    m, n = min(draws, len(xs)), min(draws, len(rs))
    effective = (
        mc.effective_subsample(ess_x, m, len(xs)),
        mc.effective_subsample(ess_r, n, len(rs)),
    )
    return mc.energy_distance_bound(rs, effective, (m, n))


def _moment_rows(
    ess: np.ndarray,
    sme: np.ndarray,
    sme_se: np.ndarray,
    log_ratio: np.ndarray,
    log_se: np.ndarray,
    z: np.ndarray,
    ed: float,
    ed_bound: float,
    reference_ess: float | None = None,
) -> list[Row]:
    """The gated parameter-space rows, shared by NUTS and closed-form checks: one allowance per
    gate for all d parameters, tolerance + z_d·(the largest standard error), z_d the
    Bonferroni quantile of d two-sided errors. ``reference_ess``: NUTS's own smallest bulk ESS
    (``None`` against a closed form)."""
    z_d = mc.bonferroni_z(len(sme))
    sme_max = float(np.max(np.abs(sme)))
    sme_limit = MEAN_TOLERANCE + z_d * float(np.max(sme_se))
    log_limit = math.log1p(SD_TOLERANCE) + z_d * float(np.max(log_se))
    low, high = float(np.exp(log_ratio.min())), float(np.exp(log_ratio.max()))
    ed_limit = ENERGY_TOLERANCE + ed_bound
    sd_rule = f"log 1+{SD_TOLERANCE} + z·se"
    return [
        Row(
            COMPARED_ESS,
            float(ess.min()),
            reference_ess,
            f">= {MIN_KERNEL_ESS:.0f}",
            bool(ess.min() >= MIN_KERNEL_ESS),
        ),
        _gated(
            "max |standardised mean error|", sme_max, "<=", sme_limit, f"<= {MEAN_TOLERANCE} + z·se"
        ),
        _gated(
            "min sd ratio",
            low,
            ">=",
            math.exp(-log_limit),
            f">= e^-({sd_rule})",
            passed=-log_ratio.min() <= log_limit,
        ),
        _gated(
            "max sd ratio",
            high,
            "<=",
            math.exp(log_limit),
            f"<= e^({sd_rule})",
            passed=log_ratio.max() <= log_limit,
        ),
        _reported("max |MCSE-aware z|", float(np.max(np.abs(z)))),
        _gated(
            "energy distance (sd units)",
            ed,
            "<=",
            ed_limit,
            f"<= {ENERGY_TOLERANCE} + MC",
            nonnegative=True,
        ),
    ]


def compare_closed_form(
    draws: np.ndarray,
    mean: np.ndarray,
    cov: np.ndarray,
    *,
    seed: int = 0,
    energy_draws: int = ENERGY_DRAWS,
) -> list[Row]:
    """Draws ``(chain, draw, d)`` against an exact Gaussian posterior N(``mean``, ``cov``).

    The same quantities and thresholds as :func:`compare_parameters`, with the exact moments in
    place of the NUTS estimates: the standardised mean error (m − μ)/√Σ_ii, the sd ratio
    sd/√Σ_ii, the z-score (m − μ)/MCSE (the exact side has no Monte Carlo error) and the energy
    distance to 4,000 exact draws, all in units of the exact sd. Used for the conjugate
    regression, where it checks the kernel and the NUTS reference alike.

    Args:
        draws: the kernel's draws ``(chain, draw, d)``.
        mean: the exact posterior mean ``(d,)``.
        cov: the exact posterior covariance ``(d, d)``.
        seed: the seed of the exact draws and the subsample of the energy distance.
        energy_draws: the most draws per side in the energy distance.

    Returns:
        The rows of the comparison.
    """
    x = np.asarray(draws, np.float64)
    mean = np.asarray(mean, np.float64)
    cov = np.asarray(cov, np.float64)
    k = mc.mean_and_errors(x)
    sd = np.sqrt(np.diag(cov))
    sme = (k["mean"] - mean) / sd
    exact = np.random.default_rng(seed).multivariate_normal(mean, cov, size=4_000) / sd
    xs = x.reshape(-1, x.shape[-1]) / sd
    key = jax.random.key(seed)
    ed = float(metrics.energy_distance(xs, exact, max_samples=energy_draws, key=key))
    ed_bound = _energy_bound(xs, mc.harmonic_ess(k["ess"]), exact, float(len(exact)), energy_draws)
    return _moment_rows(
        ess_bulk(x), sme, k["mcse"] / sd, np.log(k["sd"] / sd), k["log_sd_se"],
        (k["mean"] - mean) / k["mcse"], ed, ed_bound,
    )  # fmt: skip


def predictive_per_sample(target: CompiledModel, positions: PyTree, num: int = 500) -> jax.Array:
    """Per-draw predictive means on held-out inputs: (samples, n, K) or (samples, n)."""
    x, _ = evaluation_inputs(target, num)
    fields = evaluation_fields(target, num)
    flat = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), positions)

    def one(position: PyTree) -> jax.Array:
        net, lik = target.constrain(position)
        return target.likelihood.mean(target.adapter.apply(net, x), {**lik, **fields})

    return jax.lax.map(one, flat)


def _by_chain(values: jax.Array, positions: PyTree) -> np.ndarray:
    """Per-draw values ``(samples, ...)`` back in ``(chain, draw, ...)``."""
    chains, draws = jax.tree.leaves(positions)[0].shape[:2]
    return np.asarray(values, np.float64).reshape(chains, draws, *values.shape[1:])


def compare_functions(target: CompiledModel, draws: PyTree, reference: PyTree) -> list[Row]:
    """The function-space rows: the kernel's predictive against NUTS's on the model's evaluation
    inputs (class probabilities for a classifier, predictive means and variances for a
    regression), with thresholds that allow for both runs' Monte Carlo error.

    Args:
        target: the compiled model both were drawn from.
        draws: the kernel's draws, ``(chain, draw, ...)`` per leaf.
        reference: NUTS's draws, ``(chain, draw, ...)`` per leaf.

    Returns:
        The rows of the comparison.
    """
    _, y = evaluation_inputs(target, 500)
    if target.likelihood.task == "classification":
        p = _by_chain(predictive_per_sample(target, draws), draws)
        q = _by_chain(predictive_per_sample(target, reference), reference)
        return compare_class_probabilities(p, q, np.asarray(y))
    k_means, k_vars = (_by_chain(a, draws) for a in _per_draw_moments(target, draws))
    r_means, r_vars = (_by_chain(a, reference) for a in _per_draw_moments(target, reference))
    return compare_predictive_moments((k_means, k_vars), (r_means, r_vars), np.asarray(y))


def compare_class_probabilities(p: np.ndarray, q: np.ndarray, y: np.ndarray) -> list[Row]:
    """Classifier rows from per-draw predictive probabilities ``(chain, draw, n, K)`` of the
    kernel (``p``) and NUTS (``q``) on the inputs labelled ``y``."""
    pbar, qbar = p.mean((0, 1)), q.mean((0, 1))
    var_p = _mc_variance(p)
    var_q = _mc_variance(q)
    sigma2 = var_p + var_q  # (n, K): the variance of p̄ − q̄ entrywise
    quantile = mc.normal_quantile()
    agree = float(metrics.top1_agreement(pbar, qbar))
    tv = float(metrics.total_variation(pbar, qbar))
    skl = float(metrics.symmetrised_kl(pbar, qbar))
    tv_limit = TOTAL_VARIATION_TOLERANCE + quantile * float(np.mean(0.5 * np.sqrt(sigma2).sum(-1)))
    pooled = np.clip(0.5 * (pbar + qbar), 1e-12, None)
    kl_mc = float(np.mean(0.5 * (sigma2 / pooled).sum(-1)))
    kl_limit = SYMMETRISED_KL_TOLERANCE + quantile**2 * kl_mc
    agree_limit = 1.0 - AGREEMENT_TOLERANCE - _disagreement_allowance(p, q, pooled, quantile)
    scores = (
        ("accuracy", metrics.accuracy),
        ("NLL", metrics.nll),
        ("ECE", metrics.expected_calibration_error),
    )
    return [
        _gated(
            "top-1 agreement with NUTS",
            agree,
            ">=",
            agree_limit,
            f">= {1 - AGREEMENT_TOLERANCE:g} − MC",
        ),
        _gated(
            "total variation to NUTS", tv, "<=", tv_limit, f"<= {TOTAL_VARIATION_TOLERANCE} + MC"
        ),
        _gated(
            "symmetrised KL to NUTS", skl, "<=", kl_limit, f"<= {SYMMETRISED_KL_TOLERANCE} + MC"
        ),
        *(
            _reported(f"BMA {label}", float(score(pbar, y)), float(score(qbar, y)))
            for label, score in scores
        ),
    ]


def _mc_variance(values: np.ndarray) -> np.ndarray:
    """The Monte Carlo variance of the mean of ``(chain, draw, ...)`` values, per entry:
    Var/(f·S) with f = :func:`~bdl.validation.monte_carlo.ess_fraction` and S the draws."""
    draws = values.shape[0] * values.shape[1]
    fraction = mc.ess_fraction(values.reshape(values.shape[0], values.shape[1], -1))
    return values.reshape(draws, *values.shape[2:]).var(0) / (fraction * draws)


def _disagreement_allowance(
    p: np.ndarray, q: np.ndarray, pooled: np.ndarray, quantile: float
) -> float:
    """The fraction of inputs whose top class may differ between two runs of one distribution:
    per input, the two leading classes a, b of the pooled predictive, the margin p̄_a − p̄_b of
    each run with its Monte Carlo sd s, the true margin μ estimated by the pooled margin, and
    the flip probability π = Φ(μ/s_p)Φ(−μ/s_q) + Φ(−μ/s_p)Φ(μ/s_q). The disagreement has mean
    mean(π); the inputs share the draws, so its sd is bounded by that of perfectly correlated
    flips, mean(√(π(1 − π))): the allowance is mean(π) + quantile·that.
    """
    order = np.argsort(pooled, axis=-1)
    a, b = order[:, -1], order[:, -2]
    rows = np.arange(pooled.shape[0])
    margin = pooled[rows, a] - pooled[rows, b]
    s_p = np.sqrt(_mc_variance(p[..., rows, a] - p[..., rows, b]))
    s_q = np.sqrt(_mc_variance(q[..., rows, a] - q[..., rows, b]))
    mu = margin
    with np.errstate(divide="ignore", invalid="ignore"):
        u_p = np.where(s_p > 0, mu / s_p, np.inf)
        u_q = np.where(s_q > 0, mu / s_q, np.inf)
        u_p = np.where((s_p == 0) & (mu == 0), 0.0, u_p)
        u_q = np.where((s_q == 0) & (mu == 0), 0.0, u_q)
    flip = ndtr(u_p) * ndtr(-u_q) + ndtr(-u_p) * ndtr(u_q)
    return float(np.mean(flip) + quantile * np.mean(np.sqrt(flip * (1.0 - flip))))


def compare_predictive_moments(
    kernel: tuple[np.ndarray, np.ndarray], reference: tuple[np.ndarray, np.ndarray], y: np.ndarray
) -> list[Row]:
    """Regression-network rows from per-draw predictive means and variances ``(chain, draw, n)``
    of the kernel and NUTS on the inputs with targets ``y``."""
    (k_mean, k_sd), (r_mean, r_sd) = _mixture(*kernel), _mixture(*reference)
    quantile = mc.normal_quantile()
    err = float(np.mean(np.abs(k_mean - r_mean) / r_sd))
    mean_se = np.sqrt(_mc_variance(kernel[0]) + _mc_variance(reference[0])) / r_sd
    err_limit = PREDICTIVE_MEAN_TOLERANCE + quantile * float(np.mean(mean_se))
    ratios = k_sd / r_sd
    ratio = float(np.median(ratios))
    log_se = np.sqrt(_log_sd_variance(*kernel) + _log_sd_variance(*reference))
    log_limit = math.log1p(PREDICTIVE_SD_TOLERANCE) + quantile * float(np.median(log_se))
    low, high = math.exp(-log_limit), math.exp(log_limit)
    return [
        _gated(
            "mean |Δ predictive mean| / sd_ref",
            err,
            "<=",
            err_limit,
            f"<= {PREDICTIVE_MEAN_TOLERANCE} + MC",
        ),
        Row(
            "median predictive sd ratio",
            ratio,
            None,
            f"in [{low:.3g}, {high:.3g}]",
            bool(low <= ratio <= high),
            f"within ×(1+{PREDICTIVE_SD_TOLERANCE})·e^(z·se)",
        ),
        _reported("min predictive sd ratio", float(np.min(ratios))),
        _reported(
            "RMSE of predictive mean",
            float(metrics.rmse(k_mean, y)),
            float(metrics.rmse(r_mean, y)),
        ),
    ]


def _gated(
    name: str,
    value: float,
    bound: str,
    limit: float,
    rule: str,
    *,
    passed: bool | None = None,
    nonnegative: bool = False,
) -> Row:
    """The row of a kernel's ``value`` gated by ``value <= limit`` (``bound`` ``"<="``) or
    ``value >= limit`` (``">="``); ``passed`` where the test is made on another scale."""
    if passed is None:
        passed = value <= limit if bound == "<=" else value >= limit
    return Row(
        name, value, None, f"{bound} {limit:.3g}", bool(passed), rule, nonnegative=nonnegative
    )


def _reported(name: str, value: float, reference: float | None = None) -> Row:
    """The row of a quantity reported but not gated (``reference``: NUTS's own value)."""
    return Row(name, value, reference, "reported", None)


def _mixture(means: np.ndarray, variances: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd of the BMA predictive from per-draw ``(chain, draw, n)`` moments (law of
    total variance over draws)."""
    m = means.reshape(-1, means.shape[-1])
    v = variances.reshape(-1, variances.shape[-1])
    return m.mean(0), np.sqrt(v.mean(0) + m.var(0))


def _log_sd_variance(means: np.ndarray, variances: np.ndarray) -> np.ndarray:
    """The Monte Carlo variance of log sd of the BMA predictive per input: its variance
    V = E[v] + Var[μ] is the mean of w = v + (μ − μ̄)², so Var(log sd) ≈ Var(w̄)/(4V²)."""
    centre = means.reshape(-1, means.shape[-1]).mean(0)
    w = variances + (means - centre) ** 2
    total = w.reshape(-1, w.shape[-1]).mean(0)
    return _mc_variance(w) / (4.0 * total**2)


def _per_draw_moments(target: CompiledModel, positions: PyTree) -> tuple[jax.Array, jax.Array]:
    """Per-draw predictive means and variances on held-out inputs, ``(samples, n)``."""
    x, _ = evaluation_inputs(target, 500)
    flat = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), positions)

    def one(position: PyTree) -> tuple[jax.Array, jax.Array]:
        net, lik = target.constrain(position)
        d = target.likelihood.distribution(
            target.adapter.apply(net, x).reshape(x.shape[0], -1)[:, 0], lik
        )
        return d.mean, d.variance

    return jax.lax.map(one, flat)


def _mixture_moments(target: CompiledModel, positions: PyTree) -> tuple[jax.Array, jax.Array]:
    """Mean and sd of the BMA predictive (law of total variance over draws)."""
    means, variances = _per_draw_moments(target, positions)
    return means.mean(0), jnp.sqrt(variances.mean(0) + means.var(0))

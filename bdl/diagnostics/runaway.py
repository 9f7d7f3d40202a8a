r"""Run-away and hot chains: a chain that stays finite but does not sample π_T.

A chain can fail without a single non-finite number: its energy and parameter norm keep growing
through the sampling phase (a step that is stable but whose noise outpaces the drift, a learned
kernel outside its training range), or it settles at a stationary law much wider than π_T (a
sampler that is too hot). One-sided tests per chain, each against a bound on the
statistic's sampling error; docs/sampling.md ("Run-away and hot chains") derives them.

**Growth** of the energy. At the tested draws (evenly spaced over the kept ones) the full-data
energy over the temperature, u_t = U(θ_t)/T_t, split into thirds F, M, L: the chain is flagged
when the means rise through the thirds by more than a stationary chain's energy can move,

    ū_F < ū_M < ū_L   and   Δ = ū_L − ū_F > q·√(2d),

and its configurational temperature (below) is above T. The scale needs no estimate from the
chain: for a log-concave π_T ∝ exp(−U/T) on ℝ^d, Var_{π_T}(U/T) ≤ d (Bobkov & Madiman 2011;
sharp, Nguyen 2014, Wang 2014) — d/2 for a Gaussian, whatever its covariance — so a stationary
chain's third-means, each an average of draws of U/T, have variance at most d however
correlated the draws are, and their difference at most 2d. An estimate of the spread from the
chain itself would not do: over a third of a slow chain, the sample variance and Geyer's ESS
are both far off (on 20 draws of an AR(1) series with φ = 0.9, ESS ≈ 7 estimated for 1 true),
and a test built on them fired on 8 % of stationary series. Networks' posteriors are not
log-concave; their energy fluctuations at a mode are those of its quadratic approximation, d/2.
The condition on the configurational temperature separates a run-away from a chain that is
still warming up: under the Langevin dynamics, d/dt E‖θ − c‖² = 2(T·d − E[(θ − c)·∇U]) per
unit mobility, so a chain whose spread grows while its configurational temperature is above T
is not being carried there by the dynamics it simulates; a chain that starts near a mode and
spreads into its typical set has its configurational temperature below T (0.64–0.69 for SGHMC
on the MNIST-1D CNN in its first 4,000 steps) while its energy rises.

**Heat** from the configurational temperature (Wenzel et al. 2020, App. I, eq. 43–44, after
Leimkuhler & Matthews 2016): integration by parts against exp(−U/T) gives, for any constant c,

    E_{π_T}[ (θ − c)·∇U(θ) ] = T·d,

so v_t = (θ_t − θ̄)·∇U(θ_t) / (d·T_t), with the **full-data** gradient (no minibatch noise) and
θ̄ the mean of the draws tested (which removes the term c·∇U, of mean zero but large variance
when the posterior sits far from the origin), has mean 1 under π_T. A Gaussian posterior sampled at
temperature T' has E[v] = T'/T, and its standard deviations are √(T'/T) times too large. The
chain is flagged hot when

    v̄ > ρ² + q·se(v̄),   se(v̄) = max(s_v/√ESS_v, ρ²·√(2/d)),   ρ = :data:`SD_TOLERANCE`,

ρ = 1.25 being the widest spread ``bdl validate`` accepts (the median predictive sd ratio in
function space, docs/validation.md): discretisation and minibatch noise make every SG-MCMC
kernel with a finite step slightly hot — for SGLD's Euler step the discrete chain's stationary
law satisfies exactly E[θ·∇U] = T·d + (h/2)·E‖∇Ũ‖² — and such a chain is flagged only when its
heat, read as a Gaussian's, would widen the posterior beyond that tolerance, by more than its
sampling error. The floor of se(v̄) is that error at the boundary whatever the correlation of
the draws: for a Gaussian sampled at ρ²·T, d·v/ρ² ~ χ²(d), so v has sd ρ²·√(2/d), and so has
any average of its draws at most (the chain's own s_v/√ESS_v would be too small where Geyer's
ESS is overestimated on few draws).

A chain whose temperature swings too widely for its mean to be judged on few draws (a chain
far out, still cooling or heating) is hot as well when **every** draw read is above the limit
one draw could reach at the boundary,

    min_t v_t > ρ²·(1 + q·√(2/d)),

under which a draw of a Gaussian sampled at ρ²·T falls with probability about α/(3C), and all
of them with less.

**The quantile** q is the standard normal's at level 1 − α/(3·C) for C chains: a Bonferroni
split of the run's false-alarm rate α = :data:`FALSE_ALARM` over its 3·C one-sided tests
(growth, the mean and every draw of the heat).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

from bdl.diagnostics.chains import effective_sample_size

__all__ = [
    "DETAILED",
    "FALSE_ALARM",
    "MIN_DRAWS",
    "SD_TOLERANCE",
    "ChainTest",
    "chain_ranges",
    "flagged_report",
    "growth",
    "heat",
    "quantile",
]

#: the run's false-alarm rate, split over its tests (Bonferroni)
FALSE_ALARM = 1e-3
#: the widest sd ratio bdl validate accepts (docs/validation.md, median predictive sd ratio)
SD_TOLERANCE = 1.25
#: fewest tested draws per chain for the growth test (four per third)
MIN_DRAWS = 12
#: flagged chains whose reason a report spells out, at most (the rest are counted by kind)
DETAILED = 3
#: the kinds of reason a report counts: (what the reason says, how the count names it)
KINDS = (
    ("not finite", "a non-finite temperature"),
    ("ran hot", "ran hot"),
    ("kept growing", "energy kept growing"),
)


@dataclasses.dataclass(frozen=True)
class ChainTest:
    """One test of one chain.

    Attributes:
        flagged: whether the chain failed the test.
        statistic: Δ (growth) or v̄, the configurational temperature in units of T (heat).
        limit: what ``statistic`` had to exceed: q·√(2d) (growth), ρ² + q·se (heat).
        index: the draw (0-based, in the series tested) from which the chain is counted as failed:
            the first after the first third above ū_F + limit (growth), the first tested
            (heat); −1 when not flagged.
        detail: one line saying what was seen.
    """

    flagged: bool
    statistic: float
    limit: float
    index: int
    detail: str


def quantile(tests: int, alpha: float = FALSE_ALARM) -> float:
    """q: the standard normal quantile at 1 − α/tests (Bonferroni over the run's tests), by
    Python's own inverse CDF (``scipy.stats`` takes about a second to import)."""
    return NormalDist().inv_cdf(1.0 - alpha / max(tests, 1))


def _ess(x: np.ndarray) -> float:
    if x.size < 4 or not np.all(np.isfinite(x)) or np.ptp(x) == 0:
        return float(x.size)
    return float(min(max(effective_sample_size(x[None])[()], 1.0), x.size))


def growth(energy: Sequence[float], num_params: int, tests: int) -> ChainTest:
    """The growth test of one chain's energies u_t = U(θ_t)/T_t at its tested draws, in order
    (module docstring).

    Args:
        energy: u_t, the full-data energy over the temperature, at least :data:`MIN_DRAWS`
            values (float64 inside); a non-finite value is not a trend (the caller decides).
        num_params: d, the number of sampled coordinates.
        tests: the number of tests the run's false-alarm rate is split over.
    """
    u = np.asarray(energy, dtype=np.float64)
    if u.size < MIN_DRAWS:
        raise ValueError(f"growth: needs at least {MIN_DRAWS} draws; got {u.size}.")
    third = u.size // 3
    first, middle, last = u[:third], u[third:-third], u[-third:]
    with np.errstate(over="ignore", invalid="ignore"):
        mean_f, mean_m, mean_l = float(first.mean()), float(middle.mean()), float(last.mean())
        rise = mean_l - mean_f
    q = quantile(tests)
    limit = q * math.sqrt(2.0 * num_params)
    flagged = bool(np.isfinite(rise) and mean_f < mean_m < mean_l and rise > limit)
    index = -1
    if flagged:
        above = np.flatnonzero(u[third:] > mean_f + limit)
        index = third + int(above[0]) if above.size else u.size - third
    detail = (
        f"its energy kept growing, U/T from {mean_f:.4g} (first third of the draws) through "
        f"{mean_m:.4g} to {mean_l:.4g} (last third): a rise of {rise:.3g}, above "
        f"{q:.2f}·√(2d) = {limit:.3g} (d = {num_params})"
    )
    return ChainTest(flagged, rise, limit, index, detail)


def heat(virial: Sequence[float], num_params: int, tests: int) -> ChainTest:
    """The heat test of one chain's v_t = (θ_t − θ̄)·∇U(θ_t)/(d·T_t) (module docstring).

    Args:
        virial: v_t at the tested draws, in order (a non-finite value counts as hot).
        num_params: d, the number of sampled coordinates.
        tests: the number of tests the run's false-alarm rate is split over.
    """
    v = np.asarray(virial, dtype=np.float64)
    if v.size < 2:
        raise ValueError(f"heat: needs at least 2 draws; got {v.size}.")
    if not np.all(np.isfinite(v)):
        return ChainTest(
            True, math.inf, SD_TOLERANCE**2, 0,
            "its configurational temperature is not finite: the full-data gradient overflows "
            "at its draws",
        )  # fmt: skip
    ess = _ess(v)
    mean = float(v.mean())
    se = max(float(v.std(ddof=1)) / math.sqrt(ess), SD_TOLERANCE**2 * math.sqrt(2.0 / num_params))
    q = quantile(tests)
    limit = SD_TOLERANCE**2 + q * se
    every = SD_TOLERANCE**2 * (1.0 + q * math.sqrt(2.0 / num_params))
    low = float(v.min())
    wide = f"sds ≈ {math.sqrt(max(mean, 0.0)):.3g}× too wide"
    if mean > limit:
        detail = (
            f"it ran hot: configurational temperature {mean:.4g}·T ± {se:.3g}, above "
            f"{SD_TOLERANCE}²·T + {q:.2f} standard errors = {limit:.4g}·T; its draws spread "
            f"like a posterior at {mean:.3g}·T, {wide}"
        )
    elif low > every:
        detail = (
            f"it ran hot: configurational temperature {low:.4g}·T to {float(v.max()):.4g}·T "
            f"(mean {mean:.4g}·T) at each of its {v.size} draws tested, every one above "
            f"{SD_TOLERANCE}²·T·(1 + {q:.2f}·√(2/d)) = {every:.4g}·T; its draws spread like a "
            f"posterior at {mean:.3g}·T, {wide}"
        )
    else:
        detail = f"configurational temperature {mean:.4g}·T ± {se:.3g}"
    flagged = mean > limit or low > every
    return ChainTest(bool(flagged), mean, limit, 0 if flagged else -1, detail)


def chain_ranges(chains: Sequence[int]) -> str:
    """Chain numbers as ranges: ``[0, 1, 2, 3, 5, 8, 9]`` → ``"0–3, 5, 8–9"``.

    Args:
        chains: the chains' numbers.

    Returns:
        the text.
    """
    numbers = sorted({int(c) for c in chains})
    parts, start = [], None
    for i, c in enumerate(numbers):
        start = c if start is None else start
        if i + 1 == len(numbers) or numbers[i + 1] != c + 1:
            parts.append(str(c) if start == c else f"{start}–{c}")
            start = None
    return ", ".join(parts)


def flagged_report(
    flags: Sequence[bool], steps: Sequence[int], reasons: Sequence[str], detailed: int = DETAILED
) -> str:
    """The run-away and hot chains of a run, for a warning: one summary line, then the reasons
    of at most ``detailed`` chains (the earliest to fail), then the others counted by kind.

    Args:
        flags: per chain, whether it ran away or ran hot.
        steps: per chain, the step from which (−1: never).
        reasons: per chain, what was seen.
        detailed: chains whose reason is spelt out, at most.

    Returns:
        The report (``""`` when no chain is flagged); every chain's reason stays in
        ``samples.runaway_reason``.
    """
    bad = [c for c, flagged in enumerate(flags) if flagged]
    if not bad:
        return ""
    first = min(int(steps[c]) for c in bad)
    which = f"chain{'s' if len(bad) > 1 else ''} {chain_ranges(bad)}"
    since = f"from step {first}" + (" on" if len(bad) > 1 else "")
    lines = [
        f"{len(bad)} of {len(flags)} chains ran away or ran hot while staying finite ({which}, "
        f"{since}); their draws are not draws of the posterior."
    ]
    shown = sorted(bad, key=lambda c: (int(steps[c]), c))[:detailed]
    lines += [f"  chain {c} from step {int(steps[c])}: {reasons[c]}" for c in sorted(shown)]
    rest = [c for c in bad if c not in shown]
    if rest:
        counts = [
            f"{label} {n}" for key, label in KINDS if (n := sum(key in reasons[c] for c in rest))
        ]
        lines.append(
            f"  and {len(rest)} more (chain{'s' if len(rest) > 1 else ''} {chain_ranges(rest)}: "
            f"{', '.join(counts) or 'flagged'}); each chain's reason is in "
            "samples.runaway_reason."
        )
    return "\n".join(lines)

r"""The bias verdict of a run: do the draws follow π_T, as far as the Stein identities can tell?

R̂ and ESS say whether chains mix; they cannot see the error that SG-MCMC makes by design, a
stationary law q that differs from π_T because of the finite step and the minibatch noise (SGLD
with step h on a standard Gaussian is stationary at N(0, 1/(1 − h/2)): sds 15 % too wide at
h = 0.5, with R̂ 1.000). :mod:`bdl.diagnostics.stein` estimates, for each sampled coordinate, the
mean error ℓ_i (in the target's sds) and the ratio s_i of the draws' spread to the target's, with
standard errors from their own effective sample sizes; this module turns them into a verdict.

**The tests.** A run is flagged when some statistic is off by more than a tolerance, beyond its
Monte Carlo error:

    |s_i − 1| > τ_s + q·se(s_i)   (spread, per coordinate and family, and pooled over them),
    |ℓ_i|     > τ_ℓ + q·se(ℓ_i)   (location, per coordinate).

The tolerances, :data:`SCALE_TOLERANCE` τ_s and :data:`LOCATION_TOLERANCE` τ_ℓ, are the errors a
run may have and still be called accurate: SG-MCMC is never exact, and a check that flagged every
detectable error would flag every long run. The quantile q controls the false alarms of the whole
run at the tolerance's edge: the run's rate :data:`FALSE_ALARM` α is split evenly between the
pooled tests (two families, two-sided) and the per-coordinate ones (three per coordinate,
two-sided; Bonferroni, so that a run with 1,000 coordinates is no likelier to be flagged than one
with 2). A run whose every error is within the tolerance is flagged with probability at most α;
one whose error exceeds the tolerance by (q + 1.28) standard errors is flagged with probability
at least 90 %. [The draws are biased](../troubleshooting.md#the-draws-are-biased) shows the
measured power curve.

**What it cannot see.** The identities hold for π_T only up to the draws' Monte Carlo error: a
run too short to resolve an error says so (:attr:`Bias.resolution`, the smallest spread error the
check would catch with 90 % power) rather than vouch for it; and errors in directions the
per-coordinate statistics do not weigh (the stiff directions of a correlated posterior, which
hardly move the marginals) are not what it reports.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from bdl.diagnostics.chains import effective_sample_size
from bdl.diagnostics.stein import FAMILIES, SteinEstimates

__all__ = [
    "FALSE_ALARM",
    "LOCATION_TOLERANCE",
    "SCALE_TOLERANCE",
    "Bias",
    "Finding",
    "assess_bias",
]

#: the relative spread error a run may have and still be called accurate
SCALE_TOLERANCE = 0.05
#: the mean error, in the target's sds, a run may have and still be called accurate
LOCATION_TOLERANCE = 0.1
#: the run's false-alarm rate at the tolerances' edge
FALSE_ALARM = 0.05
#: the power :attr:`Bias.resolution` is stated for
POWER = 0.9
#: findings kept in a verdict (the largest first)
SHOWN = 5
#: findings named in the warning
REPORTED = 3
#: where the remedies are explained
TROUBLESHOOTING = "docs/troubleshooting.md, section 'The draws are biased'"


@dataclasses.dataclass(frozen=True)
class Finding:
    """One failed test.

    Attributes:
        kind: ``"spread"`` (the ratio of the draws' spread to the target's), ``"pooled spread"``
            (its geometric mean over the coordinates), ``"mean"`` (the mean's error in sds) or
            ``"temperature"`` (a chain's configurational temperature, read as the ratio of
            spreads √(T̂_C/T)).
        at: the coordinate or the chain (``""`` for a pooled test).
        family: the spread test function (``"bulk"``, ``"wide"``; ``""`` for the mean).
        value: the estimate: a ratio (1: right) or an error in sds (0: right).
        se: its standard error.
        limit: how far from 1 (spread) or 0 (mean) it had to be to fail: the tolerance plus q
            standard errors.
        note: what else was seen (a chain's temperature trend).
    """

    kind: str
    at: str
    family: str
    value: float
    se: float
    limit: float
    note: str = ""

    @property
    def excess(self) -> float:
        """How far beyond the limit, in standard errors."""
        target = 0.0 if self.kind == "mean" else 1.0
        return (abs(self.value - target) - self.limit) / max(self.se, 1e-300)

    def __str__(self) -> str:
        if self.kind == "temperature":
            state = "runs hot" if self.value > 1 else "has not reached the posterior's typical set"
            return (
                f"{self.at}'s configurational temperature is {self.value**2:.3g}·T (1 at "
                f"equilibrium; spread {self.value:.3f} ± {self.se:.3f} × the target's, limit "
                f"1 ± {self.limit:.3f}){', ' + self.note if self.note else ''}: it {state}"
            )
        if self.kind == "mean":
            return (
                f"the mean of {self.at} is off by {self.value:+.3f} ± {self.se:.3f} of the "
                f"target's sd (limit ±{self.limit:.3f})"
            )
        where = "pooled over the coordinates" if self.kind == "pooled spread" else f"of {self.at}"
        return (
            f"the spread {where} is {self.value:.3f} ± {self.se:.3f} × the target's "
            f"({_percent(self.value)}; limit 1 ± {self.limit:.3f}, {self.family} Stein statistic)"
        )


@dataclasses.dataclass(frozen=True)
class Bias:
    """Whether the draws follow π_T as far as the Stein identities can tell (module docstring).

    Attributes:
        ok: no test failed.
        findings: the failed tests, the largest excess first (at most :data:`SHOWN`).
        failed: how many statistics failed (a coordinate's spread counts once, whichever of
            its test functions failed).
        coordinates: coordinates checked; of: coordinates the model has.
        draws: draws read (chains × draws); with_gradients: those with a full-data gradient.
        spread, spread_se: the pooled ratio of spreads (geometric mean over coordinates of the
            bulk statistic) and its standard error: 1 when the draws are as wide as π_T.
        worst_spread, worst_spread_se, worst_spread_at: the coordinate whose spread ratio is
            furthest from 1 relative to its standard error, and where.
        worst_mean, worst_mean_se, worst_mean_at: likewise for the mean's error in sds.
        resolution: the smallest spread error (relative) a coordinate's test would catch with 90 %
            power at the median standard error; above 10 %, the run is too short to vouch for its
            spread.
        preconditioned: whether the marginal statistics were preconditioned by the full
            regression (:mod:`bdl.diagnostics.stein`).
        temperature, temperature_se, temperature_first, temperature_last: per chain, its
            configurational temperature (θ − θ̄)·∇U/(d·T) over every coordinate at the draws
            with gradients (1 at equilibrium), its standard error, and its mean over the first
            and the last third of them (the trend: a chain still spreading into π_T's typical
            set rises towards 1); empty when not computed.
        temperatures_tested: whether the temperatures were tested (networks, where the
            per-coordinate statistics do not say whether the chains reached π_T) or only
            reported.
        kinetic: per chain, the mean kinetic temperature 2K/(d·T) of a momentum kernel
            (empty for others). Reported, never tested: minibatch noise heats the momentum
            more than the positions (SGHMC on a conjugate regression, minibatches of 20:
            1.13·T while every marginal sd is within 2.4 %).
        scale_tolerance, location_tolerance, false_alarm: the thresholds applied.
    """

    ok: bool
    findings: tuple[Finding, ...]
    failed: int
    coordinates: int
    of: int
    draws: int
    with_gradients: int
    spread: float
    spread_se: float
    worst_spread: float
    worst_spread_se: float
    worst_spread_at: str
    worst_mean: float
    worst_mean_se: float
    worst_mean_at: str
    resolution: float
    preconditioned: bool
    temperature: tuple[float, ...] = ()
    temperature_se: tuple[float, ...] = ()
    temperature_first: tuple[float, ...] = ()
    temperature_last: tuple[float, ...] = ()
    temperatures_tested: bool = False
    kinetic: tuple[float, ...] = ()
    scale_tolerance: float = SCALE_TOLERANCE
    location_tolerance: float = LOCATION_TOLERANCE
    false_alarm: float = FALSE_ALARM

    def equilibration(self) -> str:
        """One line on the chains' configurational temperatures and their trend.

        Returns:
            The line ('' when they were not computed).
        """
        if not self.temperature:
            return ""
        span = _span(self.temperature)
        trends = [
            _trend(*t)
            for t in zip(
                self.temperature_first, self.temperature_last, self.temperature_se, strict=True
            )
        ]
        common = max(set(trends), key=trends.count)
        count = trends.count(common)
        trend = common if count == len(trends) else f"{common} in {count} of {len(trends)} chains"
        return (
            f"configurational temperature {span} over {len(self.temperature)} chain"
            f"{'s' if len(self.temperature) != 1 else ''} (1 at equilibrium), {trend}"
        )

    def kinetic_line(self) -> str:
        """The chains' kinetic temperatures, e.g. 'kinetic temperature 1.03–1.09·T'.

        Returns:
            The phrase ('' for a kernel without momentum).
        """
        if not self.kinetic:
            return ""
        return f"kinetic temperature {_span(self.kinetic)} (reported, not tested)"

    def summary(self) -> str:
        """One line: the verdict, the pooled spread ratio, the worst coordinate's, the worst
        mean error, and what was read (a network's: its chains' configurational
        temperatures).

        Returns:
            The line.
        """
        state = "ok" if self.ok else "BIASED"
        heat = self.equilibration()
        if self.temperatures_tested:
            return (
                f"bias: {state}: {heat}; needs it within {self.scale_tolerance:.0%} of T in "
                f"spread (√(T̂_C/T)); from {self.with_gradients} of {self.draws} draws with "
                f"full-data gradients over all {self.of} coordinates"
                + (f"; {self.kinetic_line()}" if self.kinetic else "")
            )
        return (
            f"bias: {state}: spread {self.spread:.3f} ± {self.spread_se:.3f} × the target's "
            f"(pooled), worst {self.worst_spread:.3f} ± {self.worst_spread_se:.3f} "
            f"({self.worst_spread_at}); worst mean error {self.worst_mean:+.3f} ± "
            f"{self.worst_mean_se:.3f} sd ({self.worst_mean_at}); Stein identities over "
            f"{self.coordinates} of {self.of} coordinates, {self.with_gradients} of "
            f"{self.draws} draws with full-data gradients; needs spreads within "
            f"{self.scale_tolerance:.0%} and means within {self.location_tolerance:g} sd"
            + (
                f"; with these draws it resolves only spread errors ≥ {self.resolution:.0%}"
                if self.ok and self.resolution > 0.1
                else ""
            )
        )

    def report(self) -> str:
        """The warning's text: what failed and what to do.

        Returns:
            The text ('' when :attr:`ok`).
        """
        if self.ok:
            return ""
        shown = "; ".join(str(f) for f in self.findings[:REPORTED])
        more = self.failed - min(len(self.findings), REPORTED)
        return (
            "the draws do not follow the target π_T (the Stein identities of π_T fail beyond "
            f"their Monte Carlo error): {shown}"
            + (f"; and {more} more" if more > 0 else "")
            + ". Mixing diagnostics cannot see this: it is the bias of the sampler's stationary "
            "law, from its finite step and noisy gradients. To do: a smaller step size (the "
            "bias shrinks with it), or let warm-up adapt it (bdl.kernels.get(name) with no step "
            f"size); with minibatches, a larger batch_size. See {TROUBLESHOOTING}."
        )

    def as_dict(self) -> dict[str, Any]:
        """The verdict as JSON values (a non-finite number as its string).

        Returns:
            A dict that :meth:`from_dict` reads back.
        """
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "findings":
                value = [{k: _json(v) for k, v in dataclasses.asdict(f).items()} for f in value]
            out[field.name] = _json(value)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Bias:
        """The inverse of :meth:`as_dict`.

        Args:
            data: what :meth:`as_dict` returned (read back from JSON).

        Returns:
            The verdict.
        """
        names = {f.name: f for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values["findings"] = tuple(
            Finding(**{k: float(v) if k in ("value", "se", "limit") else v for k, v in f.items()})
            for f in data.get("findings", [])
        )
        for key, value in values.items():
            if isinstance(value, str) and names[key].type == "float":
                values[key] = float(value)
            elif isinstance(value, list):
                values[key] = tuple(float(v) for v in value)
        return cls(**values)


def assess_bias(
    estimates: SteinEstimates,
    *,
    of: int | None = None,
    temperatures: Any = None,
    test_temperatures: bool = False,
    kinetic: Any = None,
    scale_tolerance: float = SCALE_TOLERANCE,
    location_tolerance: float = LOCATION_TOLERANCE,
    false_alarm: float = FALSE_ALARM,
) -> Bias:
    """The verdict on ``estimates`` (module docstring).

    Args:
        estimates: the Stein statistics of the draws
            (:func:`bdl.diagnostics.stein.stein_estimates`).
        of: how many coordinates the model has (default: those estimated).
        temperatures: per chain, the configurational temperature (θ − θ̄)·∇U/(d·T) over every
            coordinate at the draws with gradients, ``(chains, draws)``, in order.
        test_temperatures: a network's verdict: test each chain's √(T̂_C/T) against 1, as a
            spread, *instead of* the per-coordinate statistics. A network's single weights
            mix slowly within their mode (hidden units trade roles), so a chain's draws of one
            weight span less than its marginal and its Stein statistics read "too narrow"
            whatever the sampler's bias, while the temperature, summed over every coordinate,
            stays at T once the chain is in π_T's typical set (the README's digits MLP: 1.04–1.10
            after 10,000 SGHMC steps from a prior draw, where single weights read 0.5). For
            other models the temperatures are only reported: unpreconditioned, they weigh stiff
            directions that hardly move the marginals (:mod:`bdl.diagnostics.stein`).
        kinetic: per chain, the mean kinetic temperature 2K/(d·T) (reported only).
        scale_tolerance: τ_s, the relative spread error accepted.
        location_tolerance: τ_ℓ, the mean error accepted, in the target's sds.
        false_alarm: α, the run's false-alarm rate at the tolerances' edge.

    Returns:
        The verdict (:class:`Bias`).
    """
    from scipy.special import ndtri

    names = estimates.names
    k = len(names)
    total = k if of is None else int(of)
    heat = _temperatures(temperatures, total)
    network = test_temperatures and bool(heat[0])
    tested = network
    tests = len(heat[0]) if network else 3 * k
    per_test = false_alarm / 2.0 / max(tests, 1)  # two-sided
    q_each = float(ndtri(1.0 - per_test / 2.0))
    q_pooled = float(ndtri(1.0 - false_alarm / 2.0 / len(FAMILIES) / 2.0))
    findings: list[Finding] = []

    def test(kind: str, at: str, family: str, value: float, se: float, q: float, tol: float):
        if not (math.isfinite(value) and math.isfinite(se)):
            return
        target = 0.0 if kind == "mean" else 1.0
        limit = tol + q * se
        if abs(value - target) > limit:
            findings.append(Finding(kind, at, family, float(value), float(se), float(limit)))

    for i, name in enumerate(names if not network else ()):
        test(
            "mean", name, "", estimates.location[i], estimates.location_se[i], q_each,
            location_tolerance,
        )  # fmt: skip
        for family in FAMILIES:
            test(
                "spread", name, family, estimates.spread[family][i],
                estimates.spread_se[family][i], q_each, scale_tolerance,
            )  # fmt: skip
    for family, pooled in estimates.pooled.items() if not network else ():
        test("pooled spread", "", family, pooled.value, pooled.se, q_pooled, scale_tolerance)
    if tested:
        for c, (value, se, first, last) in enumerate(zip(*heat, strict=True)):
            spread = math.sqrt(max(value, 0.0))
            spread_se = se / (2.0 * max(spread, 1e-12))
            before = len(findings)
            test("temperature", f"chain {c}", "", spread, spread_se, q_each, scale_tolerance)
            if len(findings) > before:
                trend = _trend(first, last, se)
                findings[-1] = dataclasses.replace(
                    findings[-1], note=f"{trend} ({first:.3g}·T to {last:.3g}·T over the draws)"
                )
    # one finding per statistic and coordinate: the family that fails it most
    best: dict[tuple[str, str], Finding] = {}
    for f in findings:
        if (f.kind, f.at) not in best or f.excess > best[(f.kind, f.at)].excess:
            best[(f.kind, f.at)] = f
    findings = sorted(best.values(), key=lambda f: -f.excess)

    spread = estimates.spread["bulk"]
    spread_se = estimates.spread_se["bulk"]
    with np.errstate(all="ignore"):
        z_spread = np.abs(spread - 1.0) / spread_se
        z_mean = np.abs(estimates.location) / estimates.location_se
    s_at = _argmax(z_spread)
    m_at = _argmax(z_mean)
    median_se = float(np.nanmedian(spread_se)) if k else math.nan
    resolution = scale_tolerance + (q_each + float(ndtri(POWER))) * median_se
    pooled = estimates.pooled["bulk"]
    return Bias(
        ok=not findings,
        findings=tuple(findings[:SHOWN]),
        failed=len(findings),
        coordinates=k,
        of=total,
        draws=estimates.draws,
        with_gradients=estimates.with_gradients,
        spread=pooled.value,
        spread_se=pooled.se,
        worst_spread=float(spread[s_at]) if k else math.nan,
        worst_spread_se=float(spread_se[s_at]) if k else math.nan,
        worst_spread_at=names[s_at] if k else "",
        worst_mean=float(estimates.location[m_at]) if k else math.nan,
        worst_mean_se=float(estimates.location_se[m_at]) if k else math.nan,
        worst_mean_at=names[m_at] if k else "",
        resolution=resolution,
        preconditioned=estimates.preconditioned,
        temperature=heat[0],
        temperature_se=heat[1],
        temperature_first=heat[2],
        temperature_last=heat[3],
        temperatures_tested=tested,
        kinetic=() if kinetic is None else tuple(float(x) for x in kinetic),
        scale_tolerance=scale_tolerance,
        location_tolerance=location_tolerance,
        false_alarm=false_alarm,
    )


def _temperatures(
    values: Any, d: int
) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """Per chain: the mean of its configurational temperatures, its standard error (from the
    chain's ESS, and never below the sd √(2/d)·T̂ of one draw of a Gaussian at equilibrium: few
    draws of a slow chain overstate their ESS), and the means of the first and last thirds."""
    if values is None:
        return (), (), (), ()
    v = np.asarray(values, np.float64)
    if v.ndim != 2 or v.shape[1] < 3 or not np.all(np.isfinite(v)):
        return (), (), (), ()
    means = v.mean(axis=1)
    ess = np.asarray(effective_sample_size(v[:, None, :].transpose(1, 2, 0)), np.float64)
    ess = np.clip(np.nan_to_num(ess, nan=1.0), 1.0, v.shape[1])
    se = np.maximum(v.std(axis=1, ddof=1) / np.sqrt(ess), np.sqrt(2.0 / max(d, 1)) * np.abs(means))
    third = v.shape[1] // 3
    first, last = v[:, :third].mean(axis=1), v[:, -third:].mean(axis=1)
    as_tuple = lambda a: tuple(float(x) for x in a)  # noqa: E731
    return as_tuple(means), as_tuple(se), as_tuple(first), as_tuple(last)


def _span(values: tuple[float, ...]) -> str:
    """'1.04·T' or '1.04–1.1·T': the range of per-chain temperatures."""
    low, high = min(values), max(values)
    if math.isclose(low, high, rel_tol=5e-3):
        return f"{low:.3g}·T"
    return f"{low:.3g}–{high:.3g}·T"


def _trend(first: float, last: float, se: float) -> str:
    """'rising', 'falling' or 'flat': the last third against the first, beyond twice the standard
    error of a third's mean (√3 times the chain's: each third has a third of its draws); a
    description, not a test."""
    if last - first > 2.0 * math.sqrt(3.0) * se:
        return "rising"
    if first - last > 2.0 * math.sqrt(3.0) * se:
        return "falling"
    return "flat"


def _argmax(z: np.ndarray) -> int:
    if z.size == 0 or not np.any(np.isfinite(z)):
        return 0
    return int(np.nanargmax(np.where(np.isfinite(z), z, -np.inf)))


def _percent(ratio: float) -> str:
    """'41 % too wide' / '12 % too narrow' / 'right'."""
    if not math.isfinite(ratio):
        return "undefined"
    error = ratio - 1.0
    if abs(error) < 0.005:
        return "right"
    return f"{abs(error):.0%} too {'wide' if error > 0 else 'narrow'}"


def _json(value: Any) -> Any:
    if isinstance(value, float | np.floating) and not math.isfinite(value):
        return str(float(value))
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.integer | np.bool_):
        return value.item()
    return value

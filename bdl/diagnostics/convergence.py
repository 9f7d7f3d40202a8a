"""The convergence verdict of a run: rank-normalised R̂, bulk and tail ESS, and stuck chains.

Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021) recommend trusting MCMC estimates only when
the rank-normalised split R̂ is below 1.01 and the bulk and tail ESS are at least 100 per chain
(400 for four chains). bdl applies exactly that to the quantities a run monitors (chosen by
:mod:`bdl.sampling.verdict.convergence_check`: a model's sampled coordinates, or a network's
predictions on held-out inputs):

* **R̂:** max over the quantities of max(bulk R̂, tail R̂) < :data:`RHAT_MAX` (1.01). With a
  single chain R̂ compares the chain's two halves (Stan's split R̂): it still catches a chain
  that drifts, but no run with one chain can reveal a second mode.
* **ESS:** min over the quantities of the bulk ESS and of the tail ESS ≥
  :data:`ESS_PER_CHAIN` (100) × the number of chains checked. Fewer than 100 kept draws per
  chain can rarely pass (an ESS exceeds the number of draws only for antithetic chains).
* **Too few draws:** with fewer than 4 draws per chain R̂ and ESS are undefined, and the run
  fails the check.
* **Stuck chains** (:mod:`bdl.diagnostics.stuck`) fail it whatever R̂ and ESS say.
* A monitored quantity that is not finite in some draw fails it (one that is NaN in every draw
  is undefined by construction, as the mean of a Student-t with ν ≤ 1, and is left out).

Those criteria are the verdict's *mixing* part (:attr:`Convergence.mixing_ok`). Its *bias* part,
:attr:`Convergence.bias`, asks whether the draws follow π_T at all (:mod:`bdl.diagnostics.bias`):
chains can mix perfectly around the wrong law. :attr:`Convergence.ok` needs both.

Quantities that are constant over every draw of every chain have no R̂ and are left out (a
predicted probability saturated at 1.0); whether a chain is frozen is the stuck-chain rule's
question. :func:`assess` returns the verdict, a :class:`Convergence`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from bdl.diagnostics.bias import Bias
from bdl.diagnostics.rank_normalised import MIN_DRAWS, rank_diagnostics
from bdl.diagnostics.stability import Stability
from bdl.diagnostics.stuck import StuckChain

__all__ = ["ESS_PER_CHAIN", "RHAT_MAX", "Convergence", "assess"]

#: the largest rank-normalised R̂ accepted (exclusive)
RHAT_MAX = 1.01
#: bulk and tail ESS required per chain checked
ESS_PER_CHAIN = 100.0
#: where the remedies are explained
TROUBLESHOOTING = "docs/troubleshooting.md, section 'The run has not converged'"


@dataclasses.dataclass(frozen=True)
class Convergence:
    """Whether a run's draws can be trusted, and why not.

    Attributes:
        ok: every criterion holds: the chains mixed (:attr:`mixing_ok`) and the bias check, when
            it ran, found nothing (:attr:`bias`).
        space: ``"parameter"`` (the sampled coordinates) or ``"function"`` (a network's
            predictions on held-out inputs): what was monitored.
        chains: chains checked (those that never diverged); draws: draws per chain.
        quantities: quantities monitored; of: quantities there were to choose from.
        max_rhat, max_rhat_at: the largest rank-normalised R̂ and the quantity's name (NaN and
            ``""`` when undefined).
        min_ess_bulk, min_ess_bulk_at, min_ess_tail, min_ess_tail_at: the smallest bulk and tail
            ESS, and where.
        stuck: the chains that stopped moving (:class:`bdl.diagnostics.stuck.StuckChain`).
        nonfinite: monitored quantities with a non-finite draw; nonfinite_at: the first.
        rhat_max, ess_per_chain: the thresholds applied.
        bias: the bias check of the draws (:class:`bdl.diagnostics.bias.Bias`), or ``None`` when
            it did not run (no target to take gradients of, a verdict made before it existed).
        saturated: a classifier's held-out points left out because their probability of the
            label hardly moves (:data:`bdl.sampling.verdict.monitored.SATURATED`).
        stability: a classifier's BMA, first half of the draws against the second
            (:class:`bdl.diagnostics.stability.Stability`); reported, not a criterion.
    """

    ok: bool
    space: str
    chains: int
    draws: int
    quantities: int
    of: int
    max_rhat: float
    max_rhat_at: str
    min_ess_bulk: float
    min_ess_bulk_at: str
    min_ess_tail: float
    min_ess_tail_at: str
    stuck: tuple[StuckChain, ...] = ()
    nonfinite: int = 0
    nonfinite_at: str = ""
    rhat_max: float = RHAT_MAX
    ess_per_chain: float = ESS_PER_CHAIN
    bias: Bias | None = None
    saturated: int = 0
    stability: Stability | None = None

    @property
    def mixing_ok(self) -> bool:
        """R̂, the bulk and tail ESS, the stuck-chain rules and finiteness hold."""
        return not self.problems()

    @property
    def biased(self) -> bool:
        """The bias check ran and failed."""
        return self.bias is not None and not self.bias.ok

    def with_bias(self, bias: Bias | None) -> Convergence:
        """This verdict with its bias part set (and :attr:`ok` updated)."""
        return dataclasses.replace(self, bias=bias, ok=self.mixing_ok and (bias is None or bias.ok))

    @property
    def min_ess(self) -> float:
        """The bulk and tail ESS required: :attr:`ess_per_chain` × :attr:`chains`."""
        return self.ess_per_chain * self.chains

    def problems(self) -> list[str]:
        """The failed mixing criteria, one line each (empty when :attr:`mixing_ok`)."""
        out = []
        if self.draws < MIN_DRAWS:
            out.append(
                f"too few draws ({self.draws} per chain): R̂ and ESS need at least {MIN_DRAWS}"
            )
        if not self.max_rhat < self.rhat_max and not math.isnan(self.max_rhat):
            out.append(f"R̂ {self.max_rhat:.4f} at {self.max_rhat_at} (needs < {self.rhat_max})")
        for kind, ess, at in (
            ("bulk", self.min_ess_bulk, self.min_ess_bulk_at),
            ("tail", self.min_ess_tail, self.min_ess_tail_at),
        ):
            if ess < self.min_ess:
                out.append(
                    f"{kind} ESS {ess:.0f} at {at} (needs ≥ {self.min_ess:.0f}, "
                    f"{self.ess_per_chain:.0f} per chain)"
                )
        if self.nonfinite:
            out.append(
                f"{self.nonfinite} monitored quantit{'ies are' if self.nonfinite > 1 else 'y is'} "
                f"not finite in some draw ({self.nonfinite_at})"
            )
        out += [str(s) for s in self.stuck]
        return out

    def advice(self) -> str:
        """What to change, for the criteria that failed."""
        steps = []
        if (
            self.draws < MIN_DRAWS
            or self.min_ess_bulk < self.min_ess
            or (self.min_ess_tail < self.min_ess)
        ):
            if self.draws < self.ess_per_chain:
                steps.append(
                    f"keep at least {self.ess_per_chain:.0f} draws per chain (more steps or a "
                    "smaller thin)"
                )
            else:
                steps.append("run more steps (the ESS grows with them)")
        if self.max_rhat >= self.rhat_max:
            steps.append("run longer with a longer burn-in, so that the chains forget their starts")
        if self.stuck:
            steps.append(
                "look at the stuck chains' starts and the named parameters' priors; a longer "
                "burn-in lets warm-up adapt them"
            )
        if self.chains < 2:
            steps.append("run more chains (one chain cannot reveal a second mode)")
        return "; ".join(steps)

    def summary(self) -> str:
        """One line: the mixing verdict, the worst R̂ and ESS, and what was checked (the bias
        part has its own line, :meth:`bdl.diagnostics.bias.Bias.summary`)."""
        worst = [
            f"max R̂ {_fmt(self.max_rhat, '.4f')} ({self.max_rhat_at or '-'})",
            f"min bulk ESS {_fmt(self.min_ess_bulk, '.0f')} ({self.min_ess_bulk_at or '-'})",
            f"min tail ESS {_fmt(self.min_ess_tail, '.0f')} ({self.min_ess_tail_at or '-'})",
        ]
        what = "coordinates" if self.space == "parameter" else "predictions"
        if self.space == "function" and self.saturated:
            what = f"predictions ({self.saturated} saturated test points left out)"
        return (
            f"convergence: {'ok' if self.mixing_ok else 'NOT CONVERGED'}: "
            + ", ".join(worst)
            + f"; over {self.quantities} of {self.of} {what} ({self.space} space), "
            f"{self.chains} chain{'s' if self.chains != 1 else ''} × {self.draws} draws; "
            f"needs R̂ < {self.rhat_max} and ESS ≥ {self.min_ess:.0f}"
        )

    def lines(self) -> list[str]:
        """The verdict as printed. For a network, the evidence that says most first: whether the
        chains reached π_T (the bias line, which leads with their configurational temperature),
        then how the predictions mix, then the BMA's stability; otherwise the mixing line, then
        the bias line."""
        bias = [self.bias.summary()] if self.bias is not None else []
        stability = [self.stability.summary()] if self.stability is not None else []
        if self.space == "function":
            return [*bias, self.summary(), *stability]
        return [self.summary(), *bias, *stability]

    def report(self) -> str:
        """The convergence warning's text: what failed in mixing and what to do ('' when
        :attr:`mixing_ok`; the bias part has :meth:`bdl.diagnostics.bias.Bias.report`)."""
        if self.mixing_ok:
            return ""
        return (
            "the draws have not converged: "
            + "; ".join(self.problems())
            + f" ({self.chains} chain{'s' if self.chains != 1 else ''} × {self.draws} draws, "
            f"{self.quantities} {self.space}-space quantities checked). To do: {self.advice()}. "
            f"See {TROUBLESHOOTING}."
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON values (a non-finite number as its string, ``"nan"`` or ``"inf"``)."""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "stuck":
                value = [[s.chain, s.detail] for s in value]
            elif field.name in ("bias", "stability"):
                value = None if value is None else value.as_dict()
            elif isinstance(value, float) and not math.isfinite(value):
                value = str(value)
            out[field.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Convergence:
        """The inverse of :meth:`as_dict`."""
        names = {f.name: f for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values["stuck"] = tuple(StuckChain(int(c), str(d)) for c, d in data.get("stuck", []))
        bias, stability = data.get("bias"), data.get("stability")
        values["bias"] = None if bias is None else Bias.from_dict(bias)
        values["stability"] = None if stability is None else Stability.from_dict(stability)
        for key, value in values.items():
            if isinstance(value, str) and names[key].type == "float":
                values[key] = float(value)
        return cls(**values)


def assess(
    values: Any,
    names: Sequence[str],
    *,
    space: str,
    of: int | None = None,
    stuck: Sequence[StuckChain] = (),
    saturated: int = 0,
    stability: Stability | None = None,
) -> Convergence:
    """The verdict on monitored quantities ``values`` ``(chains, draws, k)`` named ``names``.

    Args:
        values: the monitored quantities of the chains checked.
        names: one name per quantity.
        space: what they are, ``"parameter"`` or ``"function"``.
        of: how many quantities there were to choose from (default ``k``).
        stuck: the stuck chains found (:mod:`bdl.diagnostics.stuck`).
        saturated: quantities left out before as saturated (reported).
        stability: the BMA's stability (reported).
    """
    x = np.asarray(values, dtype=np.float64)
    chains, draws, k = x.shape
    if len(names) != k:
        raise ValueError(f"assess: {len(names)} names for {k} quantities.")
    finite = np.isfinite(x).all(axis=(0, 1))
    with np.errstate(invalid="ignore"):  # the spread of a non-finite quantity is not used
        varying = finite & (x.reshape(chains * draws, k).std(axis=0) > 0)
    rhat, bulk, tail = rank_diagnostics(x[..., varying], single_chain=True)
    kept = [n for n, v in zip(names, varying, strict=True) if v]
    max_rhat, max_rhat_at = _extreme(rhat, kept, np.nanargmax)
    min_bulk, min_bulk_at = _extreme(bulk, kept, np.nanargmin)
    min_tail, min_tail_at = _extreme(tail, kept, np.nanargmin)
    bad = np.flatnonzero(~finite & ~np.isnan(x).all(axis=(0, 1)))  # NaN everywhere: undefined
    verdict = Convergence(
        ok=False,
        space=space,
        chains=chains,
        draws=draws,
        quantities=k,
        of=k if of is None else int(of),
        max_rhat=max_rhat,
        max_rhat_at=max_rhat_at,
        min_ess_bulk=min_bulk,
        min_ess_bulk_at=min_bulk_at,
        min_ess_tail=min_tail,
        min_ess_tail_at=min_tail_at,
        stuck=tuple(stuck),
        nonfinite=int(bad.size),
        nonfinite_at=names[bad[0]] if bad.size else "",
        saturated=int(saturated),
        stability=stability,
    )
    return dataclasses.replace(verdict, ok=not verdict.problems())


def _extreme(values: np.ndarray, names: list[str], pick: Any) -> tuple[float, str]:
    """The value ``pick`` selects (nanargmax, nanargmin) and its name; (NaN, '') if none."""
    if values.size == 0 or not np.any(~np.isnan(values)):
        return float("nan"), ""
    i = int(pick(values))
    return float(values[i]), names[i]


def _fmt(value: float, spec: str) -> str:
    return "-" if math.isnan(value) else format(value, spec)

"""The vendored posteriordb files, and each posterior's declaration, data and reference draws."""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bdl.compile.target import Target
from bdl.data.dataset import Dataset
from bdl.dsl.model import Model
from bdl.spec import ModelSpec
from bdl.validation.posteriordb import ode, processes, regressions
from bdl.validation.reference import Reference, gate, parameter_summaries

VENDORED = Path(__file__).resolve().parent / "vendored"
#: the run every posterior's ModelSpec suggests (and the suite uses), the same for all of them
NUM_STEPS, BURN_IN, THIN = 40_000, 10_000, 10

Builder = Callable[[dict[str, Any]], tuple[Model, Dataset]]
_REGRESSION = {"beta": "net/beta", "sigma": "lik/scale"}
_ACCEL = (
    "Intercept",
    "sdgp_1",
    "lscale_1",
    "zgp_1",
    "Intercept_sigma",
    "sdgp_sigma_1",
    "lscale_sigma_1",
    "zgp_sigma_1",
)
#: posterior → (its declaration, Stan's parameter → bdl's parameter name)
DECLARATIONS: dict[str, tuple[Builder, dict[str, str]]] = {
    "arma-arma11": (
        regressions.arma11,
        {"mu": "net/mu", "phi": "net/phi", "theta": "net/theta", "sigma": "lik/scale"},
    ),
    "gp_pois_regr-gp_regr": (
        processes.gp_regr,
        {"rho": "net/rho", "alpha": "net/alpha", "sigma": "net/sigma"},
    ),
    **{
        name: (functools.partial(regressions.regression, name), _REGRESSION)
        for name in regressions.REGRESSIONS
    },
    "mcycle_gp-accel_gp": (processes.accel_gp, {name: f"net/{name}" for name in _ACCEL}),
    "hudson_lynx_hare-lotka_volterra": (
        ode.lotka_volterra,
        {"theta": "net/theta", "z_init": "net/z_init", "sigma": "lik/scale"},
    ),
    "one_comp_mm_elim_abs-one_comp_mm_elim_abs": (
        ode.one_comp_mm_elim_abs,
        {"k_a": "net/k_a", "K_m": "net/K_m", "V_m": "net/V_m", "sigma": "lik/scale"},
    ),
}


@functools.cache
def _manifest() -> dict[str, Any]:
    return json.loads((VENDORED / "posteriors.json").read_text(encoding="utf-8"))


def names() -> list[str]:
    """The posteriors of the suite, by their posteriordb names.

    Returns:
        The names, in posteriordb's ``data-model`` form (``"arma-arma11"``, …).
    """
    return list(DECLARATIONS)


def load(name: str) -> Posterior:
    """One posterior of the suite.

    Args:
        name: its posteriordb name (:func:`names`).

    Returns:
        The :class:`Posterior`.

    Raises:
        ValueError: an unknown name (the message lists the names).
    """
    if name not in DECLARATIONS:
        raise ValueError(
            f"unknown posteriordb posterior {name!r}; the suite has: {', '.join(names())}."
        )
    builder, parameters = DECLARATIONS[name]
    return Posterior(name, _manifest()[name], builder, dict(parameters))


@dataclasses.dataclass(frozen=True, eq=False)
class Posterior:
    """A posteriordb posterior: its Stan program and data, its declaration in bdl's DSL and
    Stan's reference draws.

    Attributes:
        name: the posteriordb name, ``data-model``.
        info: posteriordb's description of it (model and data names and titles, dimensions,
            keywords, references) and of its reference run (``info["reference"]``: Stan's
            settings, per-parameter bulk and tail ESS and R̂).
        builder: ``data -> (model, data set)``, the declaration.
        parameters: Stan's parameter name → bdl's (``"beta"`` → ``"net/beta"``, ``"sigma"`` →
            ``"lik/scale"``).
    """

    name: str
    info: dict[str, Any]
    builder: Builder
    parameters: dict[str, str]

    @property
    def has_draws(self) -> bool:
        """Whether the reference draws are vendored (all but ``mcycle_gp-accel_gp``, whose
        means and mean squares alone are)."""
        return self.info.get("draws") is not None

    def stan_code(self) -> str:
        """The Stan program, verbatim.

        Returns:
            Its text.
        """
        return (VENDORED / "stan" / f"{self.info['model']}.stan").read_text(encoding="utf-8")

    def data(self) -> dict[str, Any]:
        """posteriordb's data, as its JSON holds them.

        Returns:
            The data by the Stan program's names.
        """
        with gzip.open(VENDORED / "data" / f"{self.info['data']}.json.gz", "rt") as f:
            return json.load(f)

    def spec(self) -> ModelSpec:
        """The posterior declared in bdl's DSL, with its data and the suite's run lengths.

        Returns:
            A :class:`bdl.ModelSpec` (full batch; ``spec.compile()`` compiles it).

        Raises:
            ImportError: an ODE posterior without the optional solver (``pip install
                'bdl-sgmcmc[ode]'``).
        """
        model, data = self.builder(self.data())
        return ModelSpec(
            model,
            data,
            batch_size=None,
            num_steps=NUM_STEPS,
            burn_in=BURN_IN,
            thin=THIN,
            description=f"posteriordb {self.name}: {self.info['model_title']}",
        )

    def draws(self) -> dict[str, np.ndarray]:
        """Stan's reference draws by Stan's parameter names, ``(chains, draws, *shape)``.

        Returns:
            The draws (float32).

        Raises:
            LookupError: the posterior has no vendored draws (:attr:`has_draws`).
        """
        if not self.has_draws:
            raise LookupError(
                f"{self.name}: posteriordb's draws file is not in its git history; only the "
                "reference means and mean squares are vendored (moments())."
            )
        with np.load(VENDORED / self.info["draws"]) as archive:
            return {k: archive[k] for k in self.parameters}

    def moments(self) -> dict[str, dict[str, np.ndarray]]:
        """The reference's mean, sd, Monte Carlo error of the mean and bulk ESS per Stan
        parameter, from the draws or, without them, from posteriordb's summary statistics.

        Returns:
            ``{parameter: {"mean", "sd", "mcse_mean", "ess_bulk"}}``, arrays of the parameter's
            shape (from the summary statistics also ``"mcse_mean_squared"``, the Monte Carlo
            error of the mean of x²).
        """
        ref = self.info["reference"]
        ess = _grouped(ref["names"], np.asarray(ref["ess_bulk"]))
        if self.has_draws:
            out = {}
            for k, v in self.draws().items():
                v = v.astype(np.float64)
                mean, sd = v.mean(axis=(0, 1)), v.std(axis=(0, 1))
                out[k] = {
                    "mean": mean,
                    "sd": sd,
                    "mcse_mean": sd / np.sqrt(ess[k]),
                    "ess_bulk": ess[k],
                }
            return out
        summary = self.info["summary"]
        mean = _grouped(ref["names"], np.asarray(summary["mean"]))
        square = _grouped(ref["names"], np.asarray(summary["mean_squared"]))
        mcse = _grouped(ref["names"], np.asarray(summary["mcse_mean"]))
        mcse_square = _grouped(ref["names"], np.asarray(summary["mcse_mean_squared"]))
        return {
            k: {
                "mean": mean[k],
                "sd": np.sqrt(np.maximum(square[k] - mean[k] ** 2, 0.0)),
                "mcse_mean": mcse[k],
                "ess_bulk": ess[k],
                "mcse_mean_squared": mcse_square[k],
            }
            for k in self.parameters
        }

    def positions(self, target: Target, values: dict[str, Any]) -> Any:
        """Positions in ``target``'s sampled space from values by Stan's parameter names.

        Args:
            target: this posterior compiled (``spec().compile()``).
            values: Stan parameter → constrained values with the same leading axes for all,
                e.g. ``(chains, draws, *shape)`` from :meth:`draws`.

        Returns:
            The positions, with those leading axes.
        """
        first = next(iter(values))
        lead = np.shape(values[first])[: np.ndim(values[first]) - self._event_ndim(first)]
        flat = {k: jnp.asarray(v).reshape(-1, *np.shape(v)[len(lead) :]) for k, v in values.items()}

        def one(entry: dict[str, jax.Array]) -> Any:
            net = {
                p.split("/", 1)[1]: entry[s] for s, p in self.parameters.items() if p[:4] == "net/"
            }
            lik = {
                p.split("/", 1)[1]: entry[s] for s, p in self.parameters.items() if p[:4] == "lik/"
            }
            return target.unconstrain(net, lik or None)

        batched = jax.vmap(one)(flat)
        return jax.tree.map(lambda a: np.asarray(a).reshape(*lead, *a.shape[1:]), batched)

    def reference(self, target: Target) -> Reference:
        """Stan's reference draws as a :class:`bdl.validation.Reference` of ``target``, for
        ``bdl.validate(..., reference=...)``: in the sampled space, with their own R̂ and bulk
        ESS (10 chains of 1,000 draws).

        Args:
            target: this posterior compiled (``spec().compile()``).

        Returns:
            The reference, in parameter space.

        Raises:
            LookupError: the posterior has no vendored draws (:attr:`has_draws`).
        """
        positions = self.positions(target, self.draws())
        monitored = parameter_summaries(positions)
        max_rhat, min_ess = gate(monitored)
        args = self.info["reference"]["method_arguments"]
        settings = {
            "chains": int(monitored.shape[0]),
            "warmup": int(args.get("warmup", 0)),
            "samples": int(monitored.shape[1]),
            "seed": int(args.get("seed", 0)),
            "space": "parameter",
            "temperature": 1.0,
            "source": f"posteriordb {self.name} ({self.info['reference']['method']})",
        }
        return Reference(positions, "parameter", monitored, max_rhat, min_ess, settings)

    def _event_ndim(self, stan_name: str) -> int:
        return 0 if self.info["dimensions"].get(stan_name, 1) == 1 else 1


def _grouped(names: list[str], values: np.ndarray) -> dict[str, np.ndarray]:
    """Values of Stan's scalar names (``zgp_1[3]``) as one array per parameter."""
    parts: dict[str, list[float]] = {}
    for name, value in zip(names, values, strict=True):
        parts.setdefault(re.sub(r"\[.*\]$", "", name), []).append(float(value))
    return {k: np.asarray(v) if len(v) > 1 else np.asarray(v[0]) for k, v in parts.items()}

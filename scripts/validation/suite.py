"""The validation suite: every registered kernel on the small shipped models (``bdl/models/``),
against NUTS.

A :class:`Case` is a model (with its ``build()`` options, e.g. depth and temperature) and one
:class:`KernelRun` per kernel: the hyper-parameters and run lengths chosen for that model. The
settings follow the energy convention (docs/design.md, *Energy*): kernels
consume the full-scale gradient ∇Ũ, so stable step sizes shrink as the posterior sharpens
(≈ 1/n for a fixed model); SGLD takes h ≲ σ_min²/10 and momentum kernels h·ω_max ≲ 0.2 with a
friction near critical damping of the slowest direction, so that every exact kernel's
discretisation and minibatch-noise bias sits below the thresholds within a run of a few minutes
on 2 CPU cores.

:func:`run_case` runs ``bdl.validate`` for each kernel against one cached NUTS reference and
collects JSON-ready results; :mod:`report` (``scripts/validation/report.py``) turns them into
docs/validation.md (``scripts/validation_suite.py`` does both).

Kernels the checker classifies as approximate (``bdl.kernels.check``: pSGLD, L2E) run with the
same care, and their distances are reported, never gated. Learned kernels use the meta-parameters
shipped in ``bdl/kernels/meta_params/`` when present, else random ones from ``seed=0``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bdl.kernels import preconditioners, registry
from bdl.kernels.elementwise_mlp import shipped_meta_params_path
from bdl.model_files import load_spec
from bdl.validation.compare import (
    Row,
    compare_closed_form,
    compare_functions,
    compare_parameters,
)
from bdl.validation.reference import nuts_reference

#: kernels with a learned part (meta-parameters)
LEARNED = ("nnsghmc", "l2e", "kinetic-l2e")

#: Wenzel et al. (2020, Sec. 4.2 and App. O): symmetrised KL between the predictives of
#: their SG-MCMC and HMC on MLPs fitted to prior-drawn data
WENZEL_SKL = {1: 1e-5, 2: 1e-3, 3: 1e-3}


@dataclasses.dataclass(frozen=True)
class KernelRun:
    """How one kernel runs on one model: hyper-parameters and run lengths (per chain)."""

    hyper: Mapping[str, Any]
    num_steps: int
    burn_in: int
    thin: int

    def scaled(self, factor: float) -> KernelRun:
        """A shorter run (``factor`` < 1) for the smoke version, with at least 40 draws."""
        if factor >= 1:
            return self
        steps = max(int(self.num_steps * factor), self.burn_in // 4 + 40 * self.thin)
        burn_in = min(self.burn_in, steps // 4)
        hyper = dict(self.hyper)
        if "sampling_start" in hyper and self.burn_in > 0:  # Wenzel et al.: epochs before sampling
            hyper["sampling_start"] = max(1, hyper["sampling_start"] * burn_in // self.burn_in)
        return dataclasses.replace(self, hyper=hyper, num_steps=steps, burn_in=burn_in)


@dataclasses.dataclass(frozen=True)
class Case:
    """One model (with options) and the run of every kernel on it.

    Attributes:
        key: identifier, also the plot's file name.
        model: name of a file in ``bdl/models/``.
        options: ``build()`` options.
        title: the heading in docs/validation.md.
        runs: kernel name → :class:`KernelRun`.
        closed_form: also compare with ``spec.reference`` (exact Gaussian posterior).
        literature_skl: a published symmetrised KL to HMC, reported beside bdl's.
        quick: part of the ``--quick`` smoke version, with steps multiplied by ``quick_factor``.
        nuts: keyword arguments of :func:`bdl.validation.nuts_reference`.
        note: a paragraph printed under the case's heading (what its results mean).
    """

    key: str
    model: str
    options: Mapping[str, Any]
    title: str
    runs: Mapping[str, KernelRun]
    closed_form: bool = False
    literature_skl: float | None = None
    quick: bool = False
    quick_factor: float = 1.0
    nuts: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    note: str = ""


def _sghmc_family(
    h: float,
    friction: float,
    steps: int,
    burn_in: int,
    thin: int,
    *,
    n: int,
    epoch: int,
    sgld_step: float,
    sgld_steps: int,
    sgld_thin: int,
    psgld_step: float,
    entropy_eta: float,
    wenzel_cycle: int,
    sgnht_diffusion: float | None = None,
) -> dict[str, KernelRun]:
    """Per-kernel settings derived from one tuned SGHMC (h, C) and one tuned SGLD step.

    Momentum kernels share (h, C): SGNHT with diffusion A = C (its thermostat settles at A
    plus the minibatch noise), Kinetic-L2E and L2E with the same friction. The shipped NNSGHMC
    raises f_Q to 4–5, so its effective step is h·f_Q and its friction α·f_Q²: it runs at h/2
    with α = C/2 for twice the steps (at α = C it can pass the explicit-Euler limit h·D < 2).
    Cyclical SGHMC uses a peak step 1.6·h (the cosine averages h₀/2) and collects
    from the whole cycle (exploration 0). Entropy-MCMC couples to its guide with variance η,
    chosen near the smallest posterior variance, and runs at 0.8·h. Wenzel et al.'s kernel takes
    the deep-learning parameterisation ℓ = h²n, β = 1 − C·h (docs/design.md,
    *The deep-learning parameterisation*), one draw per cycle of ``wenzel_cycle`` epochs of
    ``epoch`` steps, and a
    layerwise mass re-estimated every 1,000 steps (exact between updates).
    """
    mom = {"step_size": h, "friction": friction}
    wenzel_steps = max(steps, burn_in + 300 * wenzel_cycle * epoch)
    return {
        "sgld": KernelRun({"step_size": sgld_step}, sgld_steps, burn_in, sgld_thin),
        "sghmc": KernelRun(mom, steps, burn_in, thin),
        "sgnht": KernelRun(
            {"step_size": h, "diffusion": sgnht_diffusion or friction}, steps, burn_in, thin
        ),
        "cyclical": KernelRun(
            {
                "base": "sghmc",
                "step_size": 1.6 * h,
                "friction": friction,
                "cycle_length": 1000,
                "exploration": 0.0,
            },
            steps,
            burn_in,
            thin,
        ),
        "entropy": KernelRun(
            {"base": "sghmc", "eta": entropy_eta, "step_size": 0.8 * h, "friction": friction},
            steps,
            burn_in,
            thin,
        ),
        "wenzel": KernelRun(
            {
                "learning_rate": h * h * n,
                "momentum": 1.0 - friction * h,
                "cycle_length": wenzel_cycle,
                "sampling_start": math.ceil(burn_in / epoch),
                "preconditioner": preconditioners.layerwise(update_every=1000),
            },
            wenzel_steps,
            burn_in,
            1,
        ),
        "nnsghmc": KernelRun(
            {"step_size": h / 2, "alpha": friction / 2, "c": 0.01}, 2 * steps, 2 * burn_in, 2 * thin
        ),
        "kinetic-l2e": KernelRun(mom, steps, burn_in, thin),
        "psgld": KernelRun({"step_size": psgld_step}, sgld_steps, burn_in, sgld_thin),
        "l2e": KernelRun(mom, steps, burn_in, thin),
    }


def _prior_mlp_case(depth: int, temperature: float) -> Case:
    """MLPs on prior-drawn data (n = 100, full batch): no minibatch noise, so the distance to
    NUTS measures discretisation bias and mixing only (Wenzel et al. 2020, Sec. 4.2)."""
    # the model file's suggested SGHMC (h = 0.02, C = 5) and SGLD (h = 5e-4) settings, run twice
    # as long; T only scales the noise, so the same steps are stable at T = 0.1
    runs = _sghmc_family(
        0.02,
        5.0,
        40_000,
        5_000,
        50,
        n=100,
        epoch=1,
        sgld_step=5e-4,
        sgld_steps=80_000,
        sgld_thin=100,
        psgld_step=5e-6,  # G ≈ n/|∇Ũ| (Li et al.'s statistic on ∇Ũ/n): 5e-4 / n
        entropy_eta=0.05,
        wenzel_cycle=100,
    )
    return Case(
        key=f"mlp_prior_data_depth{depth}_T{temperature:g}",
        model="mlp_prior_data",
        options={"depth": depth, "temperature": temperature},
        title=f"MLP depth {depth} on prior-drawn data, T = {temperature:g}",
        runs=runs,
        literature_skl=WENZEL_SKL[depth],
        quick=depth == 1 and temperature == 1.0,
        quick_factor=0.1,
    )


def suite() -> list[Case]:
    """The full suite, in the order of docs/validation.md."""
    # the settings of the statistical battery (tests/battery_settings.py, "conjugate")
    linear = {
        **_sghmc_family(
            5e-3,
            20.0,
            40_000,
            2_000,
            10,
            n=100,
            epoch=5,
            sgld_step=1e-4,
            sgld_steps=40_000,
            sgld_thin=10,
            psgld_step=5e-5,
            entropy_eta=3e-3,
            wenzel_cycle=20,
            sgnht_diffusion=100.0,
        ),
        "cyclical": KernelRun(
            {
                "base": "sghmc",
                "step_size": 8e-3,
                "friction": 20.0,
                "cycle_length": 1000,
                "exploration": 0.0,
            },
            40_000,
            2_000,
            10,
        ),
        "entropy": KernelRun(
            {"base": "sghmc", "eta": 3e-3, "step_size": 4e-3, "friction": 20.0}, 40_000, 2_000, 10
        ),
        "wenzel": KernelRun(
            {
                "learning_rate": 0.003,
                "momentum": 0.9,
                "cycle_length": 20,
                "sampling_start": 20,
                "preconditioner": preconditioners.layerwise(update_every=1000),
            },
            40_000,
            2_000,
            1,
        ),
    }
    # NUTS posterior sds along the principal axes run from 0.14 to 1.06: SGLD at h = 3e-3
    # (≈ σ_min²/7) needs ≈ 2e5 steps for ESS ≈ 1000 along the flat axis; SGHMC at h = 0.015
    # (h·ω_max ≈ 0.1) with C = 1.5 (near critical damping of the flat axis) needs 8e4. Larger
    # steps (h = 0.03–0.04) leave a mean bias of 0.15–0.2 sd from the minibatch noise.
    logistic = _sghmc_family(
        0.015,
        1.5,
        80_000,
        2_000,
        20,
        n=455,
        epoch=7,
        sgld_step=3e-3,
        sgld_steps=200_000,
        sgld_thin=50,
        psgld_step=6.6e-6,
        entropy_eta=0.02,
        wenzel_cycle=25,
    )
    # width 16 (d = 321): NUTS on the model file's 2 × 50 network (d = 2,701) does not finish in
    # an hour on 2 cores. The Hessian's largest eigenvalue at a NUTS draw is 7.6e5 (ω_max ≈ 870:
    # noise sd 0.1), so momentum kernels take h = 2.5e-4 (h·ω_max ≈ 0.2) and SGLD h = 2e-6
    # (stability needs h < 2/λ_max = 2.6e-6), which mixes slowly along the prior-dominated
    # directions (posterior sd ≈ 1)
    regression = _sghmc_family(
        2.5e-4,
        20.0,
        320_000,  # 80,000 steps: SGHMC's band in mid-gap 0.71 of NUTS's
        40_000,
        400,
        n=100,
        epoch=5,
        sgld_step=2e-6,
        sgld_steps=640_000,  # at 80,000 steps SGLD's predictive mean was 0.21 sd from NUTS's
        sgld_thin=800,
        psgld_step=2e-8,
        entropy_eta=0.01,
        wenzel_cycle=20,
    )
    cases = [
        Case(
            "linear_regression",
            "linear_regression",
            {},
            "Conjugate linear regression (n = 100, d = 5, batch 20), T = 1",
            linear,
            closed_form=True,
            quick=True,
        ),
        Case(
            "logistic_breast_cancer",
            "logistic_breast_cancer",
            {},
            "Logistic regression, breast cancer (n = 455, d = 31, batch 64), T = 1",
            logistic,
            quick=True,
            quick_factor=0.1,
        ),
    ]
    # NUTS posterior sds: 0.043 for the coefficients, 0.16 for log φ. SGHMC at h = 5e-3
    # (h·ω_max ≈ 0.12) with C = 10 (near critical damping of log φ); SGLD at h = 1.5e-4
    # (≈ σ_min²/12)
    cases.append(
        Case(
            "negbin_regression",
            "negbin_regression",
            {},
            "Negative-binomial regression, learned concentration (n = 400, d = 5, batch 50), T = 1",
            {
                "sghmc": KernelRun({"step_size": 5e-3, "friction": 10.0}, 40_000, 4_000, 10),
                "sgld": KernelRun({"step_size": 1.5e-4}, 80_000, 4_000, 20),
            },
        )
    )
    cases += [_prior_mlp_case(d, t) for d in (1, 2, 3) for t in (1.0, 0.1)]
    cases += hierarchical_cases()
    cases.append(
        Case(
            "regression_1d",
            "regression_1d",
            {"width": 16},
            "1-D regression with a gap (tanh MLP 2 × 16, n = 100, batch 20), T = 1",
            regression,
            note=(
                "The noise sd 0.1 makes this energy stiff (largest Hessian eigenvalue 7.6·10⁵), "
                "so every step is small, and at these run lengths (320,000 to 640,000 steps) only "
                "NNSGHMC's chains mix by the convergence check every run gets; the others are not "
                "compared. The model file's longer runs pass: 1.6 million steps of SGHMC and 10 "
                "million of SGLD ([model files](model-files.md))."
            ),
        )
    )
    return cases


def hierarchical_cases() -> list[Case]:
    """Hierarchical priors: eight schools in both forms, ARD regression, a BNN with per-layer
    precisions (the conjugate ones also with the ``gibbs`` wrapper)."""
    # eight schools, full batch (n = 8): non-centred posterior sds 0.6–3.4 (μ the widest), the
    # largest curvature ≈ 1 + τ²/σ_j² ≈ 5 (ω ≈ 2.2): SGHMC h = 0.05 (h·ω ≈ 0.1), C = 1
    schools = {
        "sgld": KernelRun({"step_size": 0.01}, 400_000, 10_000, 100),
        "sghmc": KernelRun({"step_size": 0.05, "friction": 1.0}, 100_000, 5_000, 25),
    }
    # ARD on diabetes (n = 353, full batch): weight sds ≈ 0.04 (ω ≈ 25), log λ_j prior-dominated
    # (sd ≈ 1): SGHMC h = 5e-3 (h·ω ≈ 0.13) with C = 5; Gibbs draws of the λ_j every 10 steps
    ard = {
        "sghmc": KernelRun({"step_size": 5e-3, "friction": 5.0}, 80_000, 5_000, 20),
        "gibbs": KernelRun(
            {"base": "sghmc", "every": 10, "step_size": 5e-3, "friction": 5.0},
            80_000,
            5_000,
            20,
        ),
    }
    # digits MLP 64-4-10 (d = 310 + 2 precisions) on the first 300 training images, full batch:
    # NUTS on the whole set and a wider network takes hours on 2 CPU cores; function space
    bnn = {
        "sghmc": KernelRun({"step_size": 2e-3, "friction": 5.0}, 100_000, 10_000, 100),
        "gibbs": KernelRun(
            {"base": "sghmc", "every": 10, "step_size": 2e-3, "friction": 5.0},
            100_000,
            10_000,
            100,
        ),
    }
    return [
        Case(
            "mlp_digits_hierarchical",
            "mlp_digits_hierarchical",
            {"width": 4, "depth": 1, "n_train": 300, "batch_size": 300},
            "Digits MLP 64-4-10 with a Gamma precision per layer (n = 300, full batch), T = 1",
            bnn,
        ),
        Case(
            "eight_schools_noncentred",
            "eight_schools",
            {"centred": False},
            "Eight schools, non-centred (J = 8, full batch), T = 1",
            schools,
        ),
        Case(
            "eight_schools_centred",
            "eight_schools",
            {"centred": True},
            "Eight schools, centred (J = 8, full batch), T = 1: NUTS fails the trust gate",
            schools,
            note=(
                "The same model as above in centred coordinates (θ_j sampled directly). Its "
                "posterior has a funnel: small τ forces every θ_j near μ, and no fixed step size "
                "serves both ends. NUTS's own reference fails the trust gate (split R̂ above "
                "1.01, bulk ESS far below 400), so `bdl validate` refuses to judge kernels here "
                "(exit status 2), and the kernels below, which also mix badly, are shown for the "
                "record only. The cure is the non-centred form, `HierarchicalNormal(..., "
                "centred=False)`."
            ),
        ),
        Case(
            "ard_diabetes",
            "ard_diabetes",
            {},
            "ARD linear regression, diabetes (n = 353, d = 22, full batch), T = 1",
            ard,
            note=(
                "SGHMC alone moves the ten log-precisions slowly (their posterior is wide and "
                "prior-dominated): min ESS 43 in 80,000 steps. With exact Gibbs draws of the λ_j "
                "every 10 steps the same SGHMC reaches ESS ≈ 2,200 and meets every threshold. "
                "Full batch: with minibatches of 32 the gradient of the learned noise scale is "
                "dominated by minibatch noise (its variance ≈ 2n²/B against a posterior "
                "curvature ≈ 2n), which inflates log σ under SGHMC at h = 5e-3 (standardised "
                "mean error 0.74, sd ratio 1.44, with or without Gibbs draws); full batch "
                "isolates the hierarchical prior."
            ),
        ),
    ]


def select(
    cases: list[Case], *, quick: bool = False, models: list[str] | None = None
) -> list[Case]:
    """The cases to run: the ``--quick`` subset (steps scaled down) and/or a list of model names
    or case keys."""
    if models:
        known = {c.model for c in cases} | {c.key for c in cases}
        unknown = sorted(set(models) - known)
        if unknown:
            raise ValueError(f"unknown suite model(s) {unknown}; choose from {sorted(known)}.")
        cases = [c for c in cases if c.model in models or c.key in models]
    if quick:
        cases = [
            dataclasses.replace(c, runs={k: r.scaled(c.quick_factor) for k, r in c.runs.items()})
            for c in cases
            if c.quick
        ]
    return cases


def kernel_class(name: str) -> tuple[str, list[str]]:
    """The checker's verdict for kernel ``name`` (``"exact"`` or ``"approximate"``, reasons)."""
    from bdl.kernels.verdicts import verdict

    return verdict(name)


def build_kernel(name: str, hyper: Mapping[str, Any]) -> tuple[Any, str]:
    """The kernel and a note on its meta-parameters (learned kernels: shipped, else seed 0)."""
    hyper = dict(hyper)
    note = ""
    if name in LEARNED and "meta_params" not in hyper and "seed" not in hyper:
        if shipped_meta_params_path(name) is not None:
            note = "shipped meta-parameters"
        else:
            hyper["seed"] = 0
            note = "random meta-parameters (seed 0)"
    return registry.get(name, **hyper), note


def describe_hyper(hyper: Mapping[str, Any]) -> str:
    """Hyper-parameters as one short line (preconditioners by their repr)."""
    parts = []
    for key, value in hyper.items():
        text = f"{value:.4g}" if isinstance(value, float) else repr(value)
        parts.append(f"{key}={text}")
    return ", ".join(parts)


def _rows_json(rows: list[Row]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(r) for r in rows if not r.name.startswith(" ")]


def _split_half(target: Any, reference: Any, seed: int) -> list[Row]:
    """NUTS chains 1–2 against chains 3–4: the Monte Carlo floor of every metric."""
    import jax

    half = reference.positions
    c = jax.tree.leaves(half)[0].shape[0] // 2
    first = jax.tree.map(lambda a: a[:c], half)
    second = jax.tree.map(lambda a: a[c:], half)
    if reference.space == "function":
        return compare_functions(target, first, second)
    return compare_parameters(first, second, seed=seed)


def _leaf(tree: Any, path: str) -> np.ndarray:
    for part in path.split("/"):
        tree = tree[part]
    return np.asarray(tree)


def run_case(
    case: Case,
    *,
    kernels: list[str] | None = None,
    seed: int = 0,
    plot_dir: Path | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Validate every kernel of ``case`` (or those in ``kernels``) against NUTS.

    Returns a JSON-ready dict: the NUTS reference's diagnostics, one entry per kernel (class,
    settings, comparison rows, closed-form rows, verdict, seconds) and the plot's path.
    The reference is computed untrusted-tolerant: an untrusted reference is recorded as such
    (its verdicts then bind nothing) instead of stopping the suite.
    """
    from bdl.validation.validate import validate

    spec = load_spec(case.model, **case.options)
    target = spec.compile()
    start = time.perf_counter()
    reference = nuts_reference(target, require_trusted=False, **case.nuts)
    nuts_seconds = time.perf_counter() - start
    log(
        f"[{case.key}] NUTS: max R̂ {reference.max_rhat:.4f}, min ESS {reference.min_ess:.0f}, "
        f"{'trusted' if reference.trusted else 'UNTRUSTED'} ({nuts_seconds:.0f} s)"
    )
    result: dict[str, Any] = {
        "key": case.key,
        "title": case.title,
        "model": case.model,
        "options": dict(case.options),
        "space": reference.space,
        "task": getattr(getattr(target, "likelihood", None), "task", None),
        "literature_skl": case.literature_skl,
        "note": case.note,
        "nuts": {
            "max_rhat": reference.max_rhat,
            "min_ess": reference.min_ess,
            "trusted": reference.trusted,
            "seconds": nuts_seconds,
            "settings": reference.settings,
        },
        "kernels": [],
    }
    result["nuts_split"] = _rows_json(_split_half(target, reference, seed))
    closed = None
    if case.closed_form and spec.reference is not None:
        closed = spec.reference
        nuts_draws = _leaf(reference.positions, closed["path"])
        result["nuts_closed_form"] = _rows_json(
            compare_closed_form(nuts_draws, closed["mean"], closed["cov"], seed=seed)
        )
    drawn: dict[str, Any] = {}
    names = [k for k in case.runs if kernels is None or k in kernels]
    for name in names:
        run = case.runs[name]
        klass, reasons = kernel_class(name)
        entry: dict[str, Any] = {
            "kernel": name,
            "class": klass,
            "reasons": reasons,
            "hyper": describe_hyper(run.hyper),
            "num_steps": run.num_steps,
            "burn_in": run.burn_in,
            "thin": run.thin,
        }
        start = time.perf_counter()
        try:
            kernel, note = build_kernel(name, run.hyper)
            entry["note"] = note
            report = validate(
                target,
                kernel,
                num_steps=run.num_steps,
                burn_in=run.burn_in,
                thin=run.thin,
                num_chains=4,
                seed=seed,
                reference=reference,
            )
        except Exception as err:  # a kernel that cannot run is a result, not a crash
            entry.update(error=f"{type(err).__name__}: {err}", passed=False, rows=[])
            entry["seconds"] = time.perf_counter() - start
            result["kernels"].append(entry)
            log(f"[{case.key}] {name}: ERROR {entry['error']}")
            continue
        rows = report.rows
        entry["rows"] = _rows_json(rows)
        entry["draws"] = int(report.samples.num_chains * report.samples.num_draws)
        gated = [r.passed for r in rows]
        if closed is not None:
            closed_rows = compare_closed_form(
                _leaf(report.samples.positions, closed["path"]),
                closed["mean"],
                closed["cov"],
                seed=seed,
            )
            entry["closed_form"] = _rows_json(closed_rows)
            gated += [r.passed for r in closed_rows]
        within = all(p is not False for p in gated)
        entry["within_thresholds"] = within
        entry["passed"] = within if klass == "exact" else None
        entry["seconds"] = time.perf_counter() - start
        result["kernels"].append(entry)
        drawn[name] = report.samples
        verdict = {True: "PASS", False: "FAIL", None: "reported"}[entry["passed"]]
        log(f"[{case.key}] {name} ({klass}): {verdict} ({entry['seconds']:.0f} s)")
    if plot_dir is not None and drawn:
        from bdl.validation.plots import plot_case

        path = plot_case(
            Path(plot_dir) / f"{case.key}.png",
            target,
            reference,
            drawn,
            f"{case.title}: kernels vs NUTS",
        )
        result["plot"] = str(path)
    return result

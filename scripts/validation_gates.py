"""How often bdl's validation gates fail an exact sampler, and what they still catch.

The gates of ``bdl/validation/compare.py`` allow a systematic tolerance plus the Monte Carlo
error of both runs (docs/validation.md, "How the thresholds account for Monte Carlo error").
This script measures them without running a sampler: exact draws from a known Gaussian stand in
for both NUTS (4 chains x 1,000 independent draws, ESS ~ 4,000) and the kernel (4 chains x
2,000 draws of an AR(1) process whose autocorrelation gives a chosen ESS), and the public
comparison functions judge them as ``bdl validate`` would. It reports

1. the false-fail rate of each gate, and of the verdict, at kernel ESS 100 to 5,000 (the gates
   that do not depend on the energy distance with many repetitions and the energy distance on
   fewer: it costs ~0.5 s per comparison), beside the rate of the fixed thresholds bdl had
   before (SME <= 0.1, sd ratio in [0.9, 1.1], energy distance <= 0.05);
2. the power: how often a sampler whose sd is 10 % too large in every coordinate fails at ESS
   >= 1,000, and how often a bias in the mean of one coordinate fails at ESS 400;
3. the same false-fail rate for the function-space gates, on a synthetic classifier and a
   synthetic regression network whose predictions depend on a Gaussian latent;
4. one real kernel: SGHMC on the conjugate linear regression against its closed-form
   posterior, over 20 seeds of short runs (ESS ~ 300), with the old and the new gates.

    .venv/bin/python scripts/validation_gates.py                  # ~ 40 min on 2 cores
    .venv/bin/python scripts/validation_gates.py --reps 50 --energy-reps 20   # a smoke run

Prints markdown tables (docs/validation.md quotes them).
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import numpy as np
from scipy.signal import lfilter

CHAINS, KERNEL_DRAWS, REFERENCE_DRAWS = 4, 2_000, 1_000
#: draws per chain of the function-space cases
DRAWS = 500
#: the old fixed thresholds, for comparison
OLD = {"sme": 0.1, "sd": (0.9, 1.1), "ed": 0.05}
GATES = ("sme", "sd", "ed")


def ar1(rng: np.random.Generator, shape: tuple[int, int, int], ess: float) -> np.ndarray:
    """Standard normal AR(1) chains ``(chain, draw, d)`` whose ESS over all draws is ~ ``ess``:
    ESS = S(1 − ρ)/(1 + ρ) for S draws, so ρ = (S − ess)/(S + ess)."""
    chains, draws, d = shape
    total = chains * draws
    rho = max(0.0, (total - ess) / (total + ess))
    burn = int(20 / (1 - rho)) + 1
    noise = rng.standard_normal((chains, draws + burn, d))
    x = lfilter([np.sqrt(1 - rho**2)], [1.0, -rho], noise, axis=1)
    return x[:, burn:]


def correlation(d: int) -> np.ndarray:
    """Σ_ij = 0.5^|i − j|: correlated coordinates, so that the energy distance sees a joint law."""
    i = np.arange(d)
    return 0.5 ** np.abs(i[:, None] - i[None, :])


def parameter_case(
    rng: np.random.Generator,
    d: int,
    ess: float,
    *,
    sd_scale: float = 1.0,
    bias: float = 0.0,
    energy_draws: int = 2_000,
    seed: int = 0,
) -> dict[str, Any]:
    """One comparison of AR(1) kernel draws (sd × ``sd_scale``, coordinate 0 shifted by
    ``bias`` sds) with independent reference draws; which gates fail, new and old."""
    from bdl.validation.compare import COMPARED_ESS, compare_parameters

    chol = np.linalg.cholesky(correlation(d))
    kernel = sd_scale * ar1(rng, (CHAINS, KERNEL_DRAWS, d), ess) @ chol.T
    kernel[..., 0] += bias
    reference = rng.standard_normal((CHAINS, REFERENCE_DRAWS, d)) @ chol.T
    rows = {
        r.name: r
        for r in compare_parameters(
            {"w": kernel}, {"w": reference}, seed=seed, energy_draws=energy_draws
        )
    }
    sme = rows["max |standardised mean error|"]
    low, high = rows["min sd ratio"], rows["max sd ratio"]
    ed = rows["energy distance (sd units)"]
    return {
        "new": {"sme": not sme.passed, "sd": not (low.passed and high.passed), "ed": not ed.passed},
        "old": {
            "sme": sme.value > OLD["sme"],
            "sd": low.value < OLD["sd"][0] or high.value > OLD["sd"][1],
            "ed": ed.value > OLD["ed"],
        },
        "ess": rows[COMPARED_ESS].value,
    }


def rate(flags: list[bool]) -> str:
    """A failure rate with its 95 % upper bound when none failed (rule of three)."""
    k, n = int(np.sum(flags)), len(flags)
    if k == 0:
        return f"0/{n} (< {3 / n:.1%})"
    return f"{k}/{n} ({k / n:.1%})"


def false_fails(reps: int, energy_reps: int, seed: int) -> None:
    print("\n## 1. False fails on exact draws (parameter space)\n")
    print(
        "| d | kernel ESS | measured min bulk ESS | SME | sd ratio | energy distance | verdict "
        "(SME or sd) | old SME | old sd ratio | old energy distance |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(seed)
    for d, esses in ((1, (100, 400, 1000, 5000)), (5, (100, 400, 1000, 5000)), (20, (100, 1000))):
        for ess in esses:
            # the energy distance needs no many draws for the other gates: a small one is fast
            cheap = [parameter_case(rng, d, ess, energy_draws=50, seed=i) for i in range(reps)]
            full = [parameter_case(rng, d, ess, seed=i) for i in range(energy_reps)]
            got = {g: [c["new"][g] for c in cheap] for g in ("sme", "sd")}
            old = {g: [c["old"][g] for c in cheap] for g in ("sme", "sd")}
            verdict = [a or b for a, b in zip(got["sme"], got["sd"], strict=True)]
            print(
                f"| {d} | {ess:,} | {np.median([c['ess'] for c in cheap]):,.0f} | "
                f"{rate(got['sme'])} | {rate(got['sd'])} | {rate([c['new']['ed'] for c in full])}"
                f" | {rate(verdict)} | {rate(old['sme'])} | {rate(old['sd'])} | "
                f"{rate([c['old']['ed'] for c in full])} |",
                flush=True,
            )


def power(reps: int, seed: int) -> None:
    rng = np.random.default_rng(seed + 1)
    print("\n## 2. Power\n")
    print("A sampler whose sd is 10 % too large in every coordinate:\n")
    print("| d | kernel ESS | fails (any gate) | fails the sd-ratio gate |")
    print("|---|---|---|---|")
    for d in (1, 5):
        for ess in (1000, 2000, 5000):
            cases = [parameter_case(rng, d, ess, sd_scale=1.1, seed=i) for i in range(reps)]
            anyfail = [any(c["new"].values()) for c in cases]
            print(f"| {d} | {ess:,} | {rate(anyfail)} | {rate([c['new']['sd'] for c in cases])} |")
    print("\nA bias in the mean of one coordinate (in its posterior sd), kernel ESS 400:\n")
    print("| d | bias | fails (any gate) | fails the SME gate |")
    print("|---|---|---|---|")
    for d in (1, 5):
        for bias in (0.1, 0.2, 0.25, 0.3, 0.4):
            cases = [parameter_case(rng, d, 400, bias=bias, seed=i) for i in range(reps)]
            anyfail = [any(c["new"].values()) for c in cases]
            print(f"| {d} | {bias} | {rate(anyfail)} | {rate([c['new']['sme'] for c in cases])} |")


def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def function_space(reps: int, seed: int) -> None:
    """A classifier p_θ(x_i) = softmax(A_i θ + c_i) and a regression with mean a_i·θ and
    variance 0.25·exp(0.2 b_i·θ), θ ~ N(0, I₄), on 200 inputs: 4 chains × 500 draws of θ each,
    the kernel's as AR(1) chains (ESS 2,000: independent), the reference's independent."""
    from bdl.validation.compare import compare_class_probabilities, compare_predictive_moments

    rng = np.random.default_rng(seed + 2)
    n, k, q = 200, 3, 4
    a = rng.normal(0, 0.7, (n, k, q))
    c = rng.normal(0, 1.0, (n, k))
    w = rng.normal(0, 0.5, (n, q))
    b = rng.normal(0, 1.0, (n, q))
    y_class = rng.integers(0, k, n)
    y_reg = rng.normal(size=n)
    print("\n## 3. False fails on exact draws (function space)\n")
    print("| kernel ESS | agreement | TV | sym. KL | mean error | median sd ratio | TV <= 0.05 |")
    print("|---|---|---|---|---|---|---|")
    for ess in (100, 400, 1000, 2000):
        fails: dict[str, list[bool]] = {g: [] for g in ("agree", "tv", "kl", "mean", "sd", "old")}
        for _ in range(reps):
            theta_k = ar1(rng, (CHAINS, DRAWS, q), ess)
            theta_r = rng.standard_normal((CHAINS, DRAWS, q))
            p = softmax(np.einsum("nkq,cdq->cdnk", a, theta_k) + c)
            pr = softmax(np.einsum("nkq,cdq->cdnk", a, theta_r) + c)
            rows = {r.name: r for r in compare_class_probabilities(p, pr, y_class)}
            fails["agree"].append(not rows["top-1 agreement with NUTS"].passed)
            fails["tv"].append(not rows["total variation to NUTS"].passed)
            fails["kl"].append(not rows["symmetrised KL to NUTS"].passed)
            fails["old"].append(rows["total variation to NUTS"].value > 0.05)
            moments = [
                (
                    np.einsum("nq,cdq->cdn", w, t),
                    0.25 * np.exp(0.2 * np.einsum("nq,cdq->cdn", b, t)),
                )
                for t in (theta_k, theta_r)
            ]
            rows = {r.name: r for r in compare_predictive_moments(*moments, y_reg)}
            fails["mean"].append(not rows["mean |Δ predictive mean| / sd_ref"].passed)
            fails["sd"].append(not rows["median predictive sd ratio"].passed)
        cells = " | ".join(rate(fails[g]) for g in ("agree", "tv", "kl", "mean", "sd", "old"))
        print(f"| {ess:,} | {cells} |", flush=True)


def real_kernel(seeds: int) -> None:
    """SGHMC with the suite's settings on the conjugate linear regression, short runs."""
    import bdl
    from bdl.model_files import load_spec
    from bdl.validation.compare import COMPARED_ESS, compare_closed_form

    spec = load_spec("linear_regression")
    target = spec.compile()
    mean, cov = spec.reference["mean"], spec.reference["cov"]
    kernel = bdl.kernels.get("sghmc", step_size=5e-3, friction=20.0)
    print("\n## 4. One real kernel: SGHMC on the conjugate regression (d = 5), closed form\n")
    print("| seed | min bulk ESS | max \\|SME\\| | new SME limit | new verdict | old verdict |")
    print("|---|---|---|---|---|---|")
    new_fails, old_fails = 0, 0
    for seed in range(seeds):
        with warnings.catch_warnings():  # short runs: their convergence is not the point here
            warnings.simplefilter("ignore")
            samples = bdl.sample(
                target, kernel, num_steps=3_000, burn_in=1_000, thin=2, num_chains=4, seed=seed,
                progress=False,
            )  # fmt: skip
        draws = np.asarray(samples.positions["net"]["w"], np.float64)
        rows = {r.name: r for r in compare_closed_form(draws, mean, cov, seed=seed)}
        gated = [r for r in rows.values() if r.passed is not None and "ESS" not in r.name]
        new = all(r.passed for r in gated)
        old = (
            rows["max |standardised mean error|"].value <= OLD["sme"]
            and rows["min sd ratio"].value >= OLD["sd"][0]
            and rows["max sd ratio"].value <= OLD["sd"][1]
            and rows["energy distance (sd units)"].value <= OLD["ed"]
        )
        new_fails += not new
        old_fails += not old
        sme = rows["max |standardised mean error|"]
        print(
            f"| {seed} | {rows[COMPARED_ESS].value:,.0f} | {sme.value:.3g} | "
            f"{sme.threshold} | {'PASS' if new else 'FAIL'} | {'PASS' if old else 'FAIL'} |",
            flush=True,
        )
    print(f"\nfailed: {new_fails}/{seeds} with the new gates, {old_fails}/{seeds} with the old")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=300, help="comparisons per case")
    parser.add_argument(
        "--energy-reps",
        type=int,
        default=60,
        help="comparisons per case with the full energy distance",
    )
    parser.add_argument("--power-reps", type=int, default=50, help="comparisons per power case")
    parser.add_argument("--seeds", type=int, default=20, help="runs of the real kernel")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from bdl.validation import monte_carlo

    start = time.time()
    print(
        f"False-fail target per gate: {monte_carlo.FALSE_FAIL}; command: "
        f"python scripts/validation_gates.py --reps {args.reps} --energy-reps {args.energy_reps} "
        f"--power-reps {args.power_reps} --seeds {args.seeds} --seed {args.seed}"
    )
    false_fails(args.reps, args.energy_reps, args.seed)
    power(args.power_reps, args.seed)
    function_space(args.reps // 2, args.seed)
    real_kernel(args.seeds)
    print(f"\n({time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()

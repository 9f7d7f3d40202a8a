"""Run-away and hot chains on the runs of the validation and untuned suites: which chains the
check flags (docs/sampling.md, "Run-away and hot chains"). No NUTS: the kernel runs only, with
the suites' settings (4 chains, seed 0), and the check's statistics per chain.

    python scripts/runaway_false_alarms.py --validation linear_regression_t1 --kernels sgld,sghmc
    python scripts/runaway_false_alarms.py --untuned poisson_glm --kernels sghmc
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import bdl
from bdl.model_files import load_spec


def flagged(model: str, options: dict, kernel, steps: int, burn_in: int, thin: int) -> str:
    target = load_spec(model, **options).compile()
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = bdl.sample(target, kernel, num_steps=steps, burn_in=burn_in, thin=thin,
                           num_chains=4, seed=0)  # fmt: skip
    except ValueError as err:  # a run refused at its start is a result, not a crash
        return f"{model} {options} {kernel.name} {steps}/{burn_in}/{thin}: refused: {err}"
    seconds = time.perf_counter() - start
    reasons = "; ".join(f"chain {c}: {s.runaway_reason[c]}" for c in np.flatnonzero(s.runaway))
    return (
        f"{model} {options} {s.kernel} {steps}/{burn_in}/{thin}: diverged "
        f"{int(s.diverged.sum())}, runaway {int(s.runaway.sum())} of 4 ({seconds:.0f} s)"
        + (f" — {reasons}" if reasons else "")
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--validation", default="", help="comma-separated case keys of the suite")
    p.add_argument("--untuned", default="", help="comma-separated cases of untuned_suite.py")
    p.add_argument("--kernels", default=None, help="comma-separated kernel names (default all)")
    args = p.parse_args()
    wanted = None if args.kernels is None else set(args.kernels.split(","))
    if args.validation:
        from validation.suite import build_kernel, suite

        cases = {c.key: c for c in suite()}
        for key in args.validation.split(","):
            case = cases[key]
            for name, run in case.runs.items():
                if wanted is None or name in wanted:
                    kernel, _ = build_kernel(name, run.hyper)
                    print(flagged(case.model, dict(case.options), kernel, run.num_steps,
                                  run.burn_in, run.thin), flush=True)  # fmt: skip
    if args.untuned:
        from untuned_suite import CASES, KERNELS

        for key in args.untuned.split(","):
            model, options, _ = CASES[key]
            spec = load_spec(model, **options)
            for label, hyper in KERNELS.items():
                if wanted is None or label in wanted:
                    hyper = dict(hyper)
                    kernel = bdl.kernels.get(hyper.pop("name", label), **hyper)
                    print(flagged(model, options, kernel, spec.num_steps, spec.burn_in,
                                  spec.thin), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

"""L2E's output forms on the Gaussian toy of Gong, Li & Hernández-Lobato (2019), Sec. 5.1.

The target, the chains and every reported number are :mod:`gong_toy`'s (a 20-D Gaussian with a
dense covariance and unit Gaussian noise on every gradient, 50 chains from θ ~ μ + U(−3, 3)²⁰ with
r = 0, 12,000 steps at h = 0.025; moment-matched KL against the step, ESS, wall time). The
samplers, all at h = 0.025, friction C = 1, T = 1:

* ``SGHMC``;
* ``L2E``: the residual form (the default) with its shipped meta-parameters;
* ``L2E-paper``: the paper form (Kim et al. 2024, Eq. 6) with its shipped meta-parameters;
* ``L2E-v1``: the residual form with the parameters trained on the first eight task families
  (``experiments/meta_params/l2e-families-v1.npz``).

No L2E was meta-trained on a Gaussian: the toy measures how far the learned fields transfer to a
target whose exact answer is known, and whether they bias it (L2E is approximate).

Run: ``python benchmarks/gong_toy_l2e.py [--seeds 1] [--steps 12000] [--samplers ...]
[--out DIR]``; prints the table and writes ``gong_toy_l2e.json`` and ``gong_toy_l2e.png`` to
``--out`` (default ``bdl-output/benchmarks/gong_toy_l2e``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment
from gong_toy import CHAINS, DIM, STEP_SIZE, STEPS, make_target, plot, run_one, summarise

import bdl

FRICTION = 1.0
L2E_V1 = Path(__file__).resolve().parents[1] / "experiments/meta_params/l2e-families-v1.npz"
SAMPLERS = ("SGHMC", "L2E", "L2E-paper", "L2E-v1")


def kernel_for(name: str) -> Any:
    """The sampler called ``name`` at h = 0.025, C = 1."""
    hyper = {"step_size": STEP_SIZE, "friction": FRICTION}
    if name == "SGHMC":
        return bdl.kernels.get("sghmc", **hyper)
    if name == "L2E":
        return bdl.kernels.get("l2e", **hyper)
    if name == "L2E-paper":
        return bdl.kernels.get("l2e", form="paper", **hyper)
    return bdl.kernels.get("l2e", meta_params=L2E_V1, **hyper)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=1, help="independent repetitions")
    p.add_argument("--steps", type=int, default=STEPS)
    p.add_argument("--task-seed", type=int, default=0, help="seed of the 20-D target")
    p.add_argument("--samplers", default=",".join(SAMPLERS), help="comma-separated")
    p.add_argument("--out", default="bdl-output/benchmarks/gong_toy_l2e")
    args = p.parse_args(argv)
    names = [n for n in args.samplers.split(",") if n]
    unknown = [n for n in names if n not in SAMPLERS]
    if unknown or not names:
        p.error(f"--samplers: unknown {unknown}; choose from {', '.join(SAMPLERS)}.")

    print(environment())
    target, mean, cov = make_target(args.task_seed)
    print(
        f"target: {DIM}-D correlated Gaussian (task seed {args.task_seed}), grad noise N(0, I);"
        f" {CHAINS} chains x {args.steps} steps, h = {STEP_SIZE}, C = {FRICTION}"
    )
    kernels = {name: kernel_for(name) for name in names}
    results = []
    for seed in range(args.seeds):
        for name, kernel in kernels.items():
            res = run_one(name, kernel, target, mean, cov, seed, args.steps)
            results.append(res)
            print(f"  seed {seed} {name:9s} done in {res['wall_s']:.1f} s", flush=True)

    table = summarise(results)
    print()
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gong_toy_l2e.json").write_text(json.dumps({"results": results}, indent=1))
    plot(results, out / "gong_toy_l2e.png")
    print(f"\nwrote {out / 'gong_toy_l2e.json'} and {out / 'gong_toy_l2e.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

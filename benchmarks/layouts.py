"""How far apart a shipped model's runs on 1, 2 and 4 CPU devices are (docs/scaling.md).

Runs SGHMC on a model of bdl/models/ in one process of 4 host devices, once per layout, and prints,
for each layout against the first, the fraction of values that differ and the largest relative
and absolute difference of the positions, of every ``Info`` field and of the adapted values:

    python benchmarks/layouts.py MODEL [--adapt] [--in-turn] [--steps 400 --burn-in 200
        --thin 10 --chains 4 --seed 7 --devices 1,2,4]

``--adapt``: the kernel without a step size (adapted in warm-up); otherwise the model's tuned
SGHMC settings (or learning rate 0.01, momentum 0.9). ``--in-turn``: the chains in turn
(``LoopOptions(chains_in_turn=True)``).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import jax
import numpy as np

import bdl
from bdl.kernels import registry
from bdl.model_files import load_spec


def flat(tree) -> np.ndarray:
    return np.concatenate([np.ravel(np.asarray(v, np.float64)) for v in jax.tree.leaves(tree)])


def difference(x: np.ndarray, y: np.ndarray) -> str:
    if not x.size:
        return "empty"
    rel = np.abs(x - y) / np.maximum(np.abs(x), 1e-30)
    return (
        f"differ {np.mean(x != y):.3f}  max rel {np.nanmax(rel):.3g}  "
        f"max abs {np.nanmax(np.abs(x - y)):.3g}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--burn-in", type=int, default=200)
    p.add_argument("--thin", type=int, default=10)
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--adapt", action="store_true")
    p.add_argument("--in-turn", action="store_true")
    p.add_argument("--devices", default="1,2,4")
    a = p.parse_args()
    spec = load_spec(a.model)
    hyper = {} if a.adapt else dict(spec.kernels.get("sghmc") or {})
    if not a.adapt and not hyper:
        hyper = {"learning_rate": 0.01, "momentum": 0.9}
    kernel = registry.get("sghmc", **hyper)
    target = spec.compile()
    loop = bdl.sampling.LoopOptions(chains_in_turn=True) if a.in_turn else None
    runs = []
    for devices in (int(d) for d in a.devices.split(",")):
        start = time.perf_counter()
        samples = bdl.sample(
            target, kernel, num_steps=a.steps, burn_in=a.burn_in, thin=a.thin,
            num_chains=a.chains, seed=a.seed, init=spec.init, progress=False,
            devices=devices, loop=loop,
        )  # fmt: skip
        print(f"devices={devices}: {time.perf_counter() - start:.1f} s", flush=True)
        runs.append((devices, samples))
    (first, base), form = runs[0], "in turn" if a.in_turn else "vmap"
    for devices, samples in runs[1:]:
        mode = "adapted" if a.adapt else "fixed step"
        print(f"--- {a.model}, {mode}, {form}: devices={first} against devices={devices}")
        print("  positions:", difference(flat(base.positions), flat(samples.positions)))
        for name in base.info:
            print(f"  info/{name}:", difference(flat(base.info[name]), flat(samples.info[name])))
        for name in base.adapted or {}:
            x, y = flat(base.adapted[name]), flat(samples.adapted[name])
            print(f"  adapted/{name}:", difference(x, y))
        if base.adapted is not None:
            print("  step sizes:", base.adapted["step_size"], samples.adapted["step_size"])


if __name__ == "__main__":
    main()

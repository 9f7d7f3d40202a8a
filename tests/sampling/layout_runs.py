"""Runs of shipped models (bdl/models/) on 1, 2 and 4 CPU devices with the chains in turn, for
tests/sampling/test_layout.py.

XLA fixes the number of CPU devices when a process starts, so the test runs this file as a
script in a process of 4 host devices:

    python layout_runs.py quick OUT      # linear_regression, a fixed step (the default suite)
    python layout_runs.py models OUT     # the models and layouts of MODELS (slow tests)

Each run's ``Samples`` is saved to OUT as ``MODEL-MODE-DEVICES.npz``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __name__ == "__main__":  # imported by the test for MODELS, run as the script
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import bdl
from bdl.kernels import registry
from bdl.model_files import load_spec

LAYOUTS = (1, 2, 4)
IN_TURN = bdl.sampling.LoopOptions(chains_in_turn=True)
FIXED = dict(num_steps=60, burn_in=20, thin=4, num_chains=4, seed=7, progress=False)
ADAPTED = dict(FIXED, num_steps=200, burn_in=150)  # warm-up's shortest schedule
#: model → (fixed, adapted): the layouts (devices) whose runs the slow test compares, bitwise,
#: with the chains in turn. On a mesh of chains only, each device runs the one-device program
#: on its block of chains (bdl/sampling/run/dispatch.py), so every model is bitwise on 1, 2 and 4
#: devices, adapted too (docs/scaling.md)
MODELS = {
    name: (LAYOUTS, LAYOUTS)
    for name in (
        "linear_regression",
        "gaussian_noise",
        "eight_schools",
        "logistic_breast_cancer",
        "mlp_digits",
        "two_mode",
    )
}


def runs(name: str, out: Path, fixed: tuple = LAYOUTS, adapted: tuple = LAYOUTS) -> None:
    """``name``'s runs on the ``fixed`` and ``adapted`` layouts, saved as MODEL-MODE-DEVICES."""
    spec = load_spec(name)
    target = spec.compile()
    hyper = spec.kernels.get("sghmc") or {"learning_rate": 0.01, "momentum": 0.9}
    modes = [
        ("fixed", registry.get("sghmc", **hyper), FIXED, fixed),
        ("adapted", registry.get("sghmc"), ADAPTED, adapted),
    ]
    for mode, kernel, lengths, layouts in modes:
        for devices in layouts:
            samples = bdl.sample(
                target, kernel, **lengths, init=spec.init, devices=devices, loop=IN_TURN
            )
            samples.save(out / f"{name}-{mode}-{devices}.npz")


if __name__ == "__main__":
    out = Path(sys.argv[2])
    if sys.argv[1] == "quick":
        runs("linear_regression", out, adapted=())
    else:
        for name, (fixed, adapted) in MODELS.items():
            runs(name, out, fixed, adapted)

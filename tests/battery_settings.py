"""Per-kernel settings of the shared statistical battery (tests/test_battery.py).

Every registered kernel must have an entry: the battery parametrises over the registry, so a new
kernel is tested as soon as it is registered, and fails the coverage test until it has settings.
``gaussian`` is used on the 3-D correlated Gaussian (exact gradients), ``conjugate`` on the
conjugate linear regression (minibatch gradients), ``hierarchical`` on the normal–gamma
hierarchical model of tests/normal_gamma.py (a kernel with only this entry, the Gibbs wrapper,
needs a conjugate precision and runs on it alone). ``None`` marks a kernel the checker classifies
as approximate: it is not held to exact moments (its checker reasons are asserted instead, in
tests/test_checker.py). Kernels that collect one draw per cycle (wenzel) take ``thin`` = 1.
"""

from bdl.kernels import preconditioners


def _sghmc_like(gaussian_step: float, conjugate_step: float, **extra) -> dict:
    return {
        "gaussian": {
            "hyper": {"step_size": gaussian_step, "friction": 2.0, **extra},
            "steps": 30_000,
            "thin": 10,
        },
        "conjugate": {
            "hyper": {"step_size": conjugate_step, "friction": 20.0, **extra},
            "steps": 40_000,
            "thin": 10,
        },
    }


SETTINGS: dict[str, dict | None] = {
    "sgld": {
        "gaussian": {"hyper": {"step_size": 5e-3}, "steps": 60_000, "thin": 20},
        "conjugate": {"hyper": {"step_size": 1e-4}, "steps": 40_000, "thin": 10},
    },
    "sghmc": _sghmc_like(5e-2, 5e-3),
    "kinetic-l2e": _sghmc_like(5e-2, 5e-3),
    "sgnht": {
        "gaussian": {"hyper": {"step_size": 4e-2, "diffusion": 1.0}, "steps": 30_000, "thin": 10},
        "conjugate": {
            "hyper": {"step_size": 5e-3, "diffusion": 100.0},
            "steps": 40_000,
            "thin": 10,
        },
    },
    "cyclical": {
        "gaussian": {
            "hyper": {
                "base": "sghmc",
                "step_size": 8e-2,
                "friction": 2.0,
                "cycle_length": 1000,
                "exploration": 0.0,
            },
            "steps": 40_000,
            "thin": 10,
        },
        "conjugate": {
            "hyper": {
                "base": "sghmc",
                "step_size": 8e-3,
                "friction": 20.0,
                "cycle_length": 1000,
                "exploration": 0.0,
            },
            "steps": 40_000,
            "thin": 10,
        },
    },
    "entropy": {
        "gaussian": {
            "hyper": {"base": "sghmc", "eta": 1.0, "step_size": 4e-2, "friction": 2.0},
            "steps": 30_000,
            "thin": 10,
        },
        "conjugate": {
            "hyper": {"base": "sghmc", "eta": 3e-3, "step_size": 4e-3, "friction": 20.0},
            "steps": 40_000,
            "thin": 10,
        },
    },
    # the shipped meta-trained networks (training hyper-parameters α = 1, c = 0.01, q_bound = 4);
    # f_Q ≈ 4–5 raises the effective step to h·f_Q: the discretisation bias is -3 % in sd at
    # h = 0.025 and -1.5 % at 0.0125 (exact gradients), and under minibatch noise the conjugate
    # model needs a smaller h and a larger α (docs/meta-learning-nnsghmc.md)
    "nnsghmc": {
        "gaussian": {
            "hyper": {"step_size": 1.25e-2, "alpha": 1.0, "c": 0.01},
            "steps": 60_000,
            "thin": 10,
        },
        "conjugate": {
            "hyper": {"step_size": 2.5e-3, "alpha": 10.0, "c": 0.01},
            "steps": 80_000,
            "thin": 20,
        },
    },
    "wenzel": {
        "gaussian": {
            "hyper": {
                "learning_rate": 0.01,
                "momentum": 0.8,
                "epoch_length": 10,
                "cycle_length": 1,
                "sampling_start": 2,
                "preconditioner": preconditioners.layerwise(update_every=1000),
            },
            "steps": 20_000,
            "thin": 1,
        },
        "conjugate": {
            "hyper": {
                "learning_rate": 0.003,
                "momentum": 0.9,
                "cycle_length": 20,
                "sampling_start": 20,
                "preconditioner": preconditioners.layerwise(update_every=1000),
            },
            "steps": 40_000,
            "thin": 1,
        },
    },
    # Gibbs draws of the Gamma precision every `every` SGHMC steps: its target needs a
    # hierarchical prior, so it is held to the closed-form hierarchical posterior
    "gibbs": {
        "hierarchical": {
            "hyper": {"base": "sghmc", "every": 10, "step_size": 2e-2, "friction": 2.0},
            "steps": 60_000,
            "thin": 10,
        },
    },
    "psgld": None,
    "l2e": None,
}

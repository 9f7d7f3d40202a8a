"""Per-kernel settings of the shared statistical battery (tests/test_battery.py).

Every registered kernel must have an entry: the battery parametrises over the registry, so a new
kernel is tested as soon as it is registered, and fails the coverage test until it has settings.
``gaussian`` is used on the 3-D correlated Gaussian (exact gradients), ``conjugate`` on the
conjugate linear regression (minibatch gradients). ``None`` marks a kernel the checker classifies
as approximate: it is not held to exact moments (its checker reasons are asserted instead).
"""

SETTINGS: dict[str, dict | None] = {
    "sgld": {
        "gaussian": {"hyper": {"step_size": 5e-3}, "steps": 60_000, "thin": 20},
        "conjugate": {"hyper": {"step_size": 1e-4}, "steps": 40_000, "thin": 10},
    },
    "sghmc": {
        "gaussian": {"hyper": {"step_size": 5e-2, "friction": 2.0}, "steps": 30_000, "thin": 10},
        "conjugate": {"hyper": {"step_size": 5e-3, "friction": 20.0}, "steps": 40_000, "thin": 10},
    },
}

"""Meta-training of the learned samplers (L2E and Kinetic-L2E by evolution strategies, NNSGHMC
by the KL(q‖π) loss through truncated back-propagation), and their shipped configurations.

Each trainer module exposes ``train(config, out_dir, *, resume=False, progress=True)`` returning a
:class:`bdl.meta.driver.TrainingRun`; :data:`TRAINERS` maps the kernel name to that module. The
outer loop, checkpoints and run directory they share are :mod:`bdl.meta.driver`'s, their
configurations frozen dataclasses parsed by :func:`bdl.meta.config.parse_config`.
"""

from __future__ import annotations

import importlib
from typing import Any

#: kernel name -> module with ``train(config, out_dir, *, resume, progress)``
TRAINERS: dict[str, str] = {
    "l2e": "bdl.meta.l2e_training",
    "kinetic-l2e": "bdl.meta.l2e_training",
    "nnsghmc": "bdl.meta.nnsghmc_training",
}


def trainer(kernel: str) -> Any:
    """The ``train`` function for ``kernel`` (a key of :data:`TRAINERS`)."""
    if kernel not in TRAINERS:
        raise ValueError(
            f"kernel must be one of {sorted(TRAINERS)} for meta-training; got {kernel!r}."
        )
    try:
        module = importlib.import_module(TRAINERS[kernel])
    except ModuleNotFoundError as err:
        if err.name != TRAINERS[kernel]:
            raise
        message = f"kernel: meta-training of {kernel!r} is not part of this build."
        raise ValueError(message) from None
    return module.train

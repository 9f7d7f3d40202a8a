"""Where draws came from: the record ``bdl.sample`` keeps in ``Samples.meta``.

The record is JSON-able so that a saved file carries it (``Samples.save``): the model's name, the
kernel described by :func:`bdl.kernels.describe`, bdl's version and the run's settings.
"""

from __future__ import annotations

from typing import Any

from bdl.kernels.base import Kernel
from bdl.kernels.describe import describe


def run_meta(
    target: Any,
    kernel: Kernel,
    *,
    num_steps: int,
    burn_in: int,
    thin: int,
    num_chains: int,
    seed: int,
    init: Any,
) -> dict[str, Any]:
    """``{"model", "kernel", "bdl_version", "settings"}`` for a run of ``kernel`` on ``target``.

    ``kernel`` is the kernel as run (bound to the target: a learning rate is already a step size
    and a friction). ``settings["init"]`` is the start's name, or ``"<positions>"`` when starting
    positions were given. ``settings["augment"]`` names the data augmentation of an augmented
    model (absent otherwise).
    """
    from bdl import __version__  # bdl/__init__ imports this package

    augment = getattr(target, "augment", None)
    meta = {
        "model": str(getattr(target, "name", type(target).__name__)),
        "kernel": describe(kernel),
        "bdl_version": __version__,
        "settings": {
            "seed": int(seed),
            "num_steps": int(num_steps),
            "burn_in": int(burn_in),
            "thin": int(thin),
            "num_chains": int(num_chains),
            "init": init if isinstance(init, str) else "<positions>",
        },
    }
    if augment is not None:
        meta["settings"]["augment"] = repr(augment)
    return meta

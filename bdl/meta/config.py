"""Meta-training configuration files (TOML).

A config file is a TOML table; ``kernel`` names the learned kernel and the other keys are the
trainer's settings. The shipped configurations live in ``bdl/meta/configs/<kernel>.toml``;
``bdl meta-train KERNEL`` uses the shipped one unless ``--config FILE`` is given. A trainer
validates its own keys (:func:`merge` rejects unknown ones, naming them).
"""

from __future__ import annotations

import os
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any


def shipped_config_path(kernel: str) -> Path:
    """The package's configuration file for ``kernel``."""
    return Path(str(resources.files("bdl.meta").joinpath("configs", f"{kernel}.toml")))


def load_config(path: str | os.PathLike | None, kernel: str) -> dict[str, Any]:
    """Read a TOML config (the shipped one for ``kernel`` if ``path`` is None)."""
    path = shipped_config_path(kernel) if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config: no file at {path}.")
    with open(path, "rb") as f:
        config = tomllib.load(f)
    named = config.get("kernel", kernel)
    if named != kernel:
        raise ValueError(f"config: {path} is for kernel {named!r}, not {kernel!r}.")
    config["kernel"] = kernel
    return config


def merge(defaults: dict[str, Any], config: dict[str, Any], *, where: str) -> dict[str, Any]:
    """``defaults`` updated by ``config``; unknown keys raise ``ValueError`` naming them."""
    unknown = sorted(set(config) - set(defaults) - {"kernel"})
    if unknown:
        raise ValueError(
            f"{where}: unknown config keys {unknown}; known keys are {sorted(defaults)}."
        )
    return {**defaults, **{k: v for k, v in config.items() if k != "kernel"}}

"""Find and load model files: ``models/NAME.py`` or any path, each defining ``build()``."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path
from typing import Any

from bdl.spec import ModelSpec


def model_dirs() -> list[Path]:
    """Where named models are looked up: ``./models`` and the ``models/`` beside the package."""
    here = Path(__file__).resolve().parent.parent / "models"
    dirs = [Path.cwd() / "models", here]
    return [d for i, d in enumerate(dirs) if d.is_dir() and d not in dirs[:i]]


def model_names() -> list[str]:
    """Names of the models found in :func:`model_dirs`."""
    names = {p.stem for d in model_dirs() for p in d.glob("*.py") if not p.stem.startswith("_")}
    return sorted(names)


def resolve(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix == ".py":
        if not path.is_file():
            raise FileNotFoundError(f"model file {name_or_path!r} does not exist.")
        return path
    for d in model_dirs():
        candidate = d / f"{name_or_path}.py"
        if candidate.is_file():
            return candidate
    raise ValueError(
        f"unknown model {name_or_path!r}: give a name from models/ "
        f"({', '.join(model_names())}) or a path to a .py file defining build()."
    )


def load_spec(name_or_path: str, **options: Any) -> ModelSpec:
    """Import the model file and call its ``build(**options)``."""
    path = resolve(name_or_path)
    module_spec = importlib.util.spec_from_file_location(f"bdl_model_{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    build = getattr(module, "build", None)
    if build is None:
        raise ValueError(f"model file {path} must define build(**options) -> bdl.ModelSpec.")
    accepted = inspect.signature(build).parameters
    unknown = [k for k in options if k not in accepted]
    if unknown:
        raise ValueError(
            f"model {path.stem!r} has no option(s) {unknown}; it accepts {list(accepted)}."
        )
    spec = build(**options)
    if not isinstance(spec, ModelSpec):
        raise TypeError(f"{path}: build() must return a bdl.ModelSpec; got {type(spec).__name__}.")
    return spec

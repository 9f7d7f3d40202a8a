"""Find and load model files: ``./models/NAME.py``, the shipped ``bdl/models/NAME.py`` or any
path, each defining ``build()``."""

from __future__ import annotations

import importlib.util
import inspect
import traceback
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bdl.spec import ModelSpec


class ModelFileError(ValueError):
    """An error in a user's model file: a syntax error, or an exception raised while the file is
    imported or its ``build()`` runs. The message names the file, the line and the error in one
    line; the original exception is the ``__cause__`` (with its full traceback)."""


#: the model files loaded in this process (resolved paths), to locate errors in their code
_LOADED: set[Path] = set()


#: the model files shipped inside the package (bdl/models/), found wherever bdl is installed
SHIPPED = Path(__file__).resolve().parent / "models"


def model_dirs() -> list[Path]:
    """Where named models are looked up, in order: the working directory's ``./models``, then the
    shipped models (``bdl/models/`` inside the installed package).

    Returns:
        The directories that exist, the working directory's first: a user's
            ``./models/NAME.py`` takes precedence over the shipped model of that name.
    """
    dirs = [Path.cwd() / "models", SHIPPED]
    return [d for i, d in enumerate(dirs) if d.is_dir() and d not in dirs[:i]]


def model_names() -> list[str]:
    """Names of the models found in :func:`model_dirs`.

    Returns:
        The sorted names (file stems, those starting with ``_`` left out) of every directory.
    """
    names = {p.stem for d in model_dirs() for p in d.glob("*.py") if not p.stem.startswith("_")}
    return sorted(names)


def resolve(name_or_path: str) -> Path:
    """The model file of a name or a path.

    Args:
        name_or_path: a path ending in ``.py``, or a model name looked up in :func:`model_dirs`
            (the working directory's ``./models`` first, then the shipped models).

    Returns:
        The path of the model file.

    Raises:
        FileNotFoundError: a ``.py`` path that is not a file.
        ValueError: a name found in no directory, with the names that are.
    """
    path = Path(name_or_path)
    if path.suffix == ".py":
        if path.is_dir():
            raise FileNotFoundError(f"model file {name_or_path!r} is a directory, not a file.")
        if not path.is_file():
            raise FileNotFoundError(f"model file {name_or_path!r} does not exist.")
        return path
    for d in model_dirs():
        candidate = d / f"{name_or_path}.py"
        if candidate.is_file() and not name_or_path.startswith("_"):
            return candidate
    raise ValueError(
        f"unknown model {name_or_path!r}: give the name of a shipped model or of a file in "
        f"./models/ ({', '.join(model_names())}) or a path to a .py file defining build()."
    )


def load_spec(name_or_path: str, **options: Any) -> ModelSpec:
    """Import the model file and call its ``build(**options)``.

    Raises :class:`ModelFileError` naming the file and line when the file does not parse or
    raises while it is imported or built; ``ValueError`` for a missing ``build`` or an unknown
    option, ``TypeError`` when ``build`` returns something other than a :class:`bdl.ModelSpec`.
    """
    from bdl.spec import ModelSpec

    path = resolve(name_or_path)
    _LOADED.add(path.resolve())
    module_spec = importlib.util.spec_from_file_location(f"bdl_model_{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except SyntaxError as err:
        where = f"{err.filename or path}:{err.lineno}" if err.lineno else str(path)
        text = f": {err.text.strip()}" if err.text and err.text.strip() else ""
        raise ModelFileError(f"{where}: {type(err).__name__}: {err.msg}{text}") from err
    except Exception as err:
        raise ModelFileError(describe(err, path)) from err
    build = getattr(module, "build", None)
    if build is None:
        raise ValueError(f"model file {path} must define build(**options) -> bdl.ModelSpec.")
    accepted = inspect.signature(build).parameters
    unknown = [k for k in options if k not in accepted]
    if unknown:
        raise ValueError(
            f"model {path.stem!r} has no option(s) {unknown}; it accepts {list(accepted)}."
        )
    try:
        spec = build(**options)
    except Exception as err:
        raise ModelFileError(describe(err, path)) from err
    if not isinstance(spec, ModelSpec):
        raise TypeError(f"{path}: build() must return a bdl.ModelSpec; got {type(spec).__name__}.")
    return spec


def user_frame(tb: TracebackType | None) -> traceback.FrameSummary | None:
    """The innermost frame of ``tb`` in a model file loaded by :func:`load_spec`, if any: where
    the user's code was when the error happened (e.g. inside a network traced at compilation)."""
    found = None
    for frame in traceback.extract_tb(tb):
        try:
            if Path(frame.filename).resolve() in _LOADED:
                found = frame
        except (OSError, ValueError):
            continue
    return found


def locate(err: BaseException) -> traceback.FrameSummary | None:
    """The model-file frame of ``err`` or, when the library re-raised it with a message of its
    own, of the error it was raised from (``__cause__``, ``__context__``)."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        frame = user_frame(err.__traceback__)
        if frame is not None:
            return frame
        err = err.__cause__ or err.__context__
    return None


def describe(err: BaseException, path: Path | None = None) -> str:
    """``FILE:LINE (in FUNCTION): Type: message`` for an error raised through a model file, the
    line the user wrote rather than the library's internals; without a model-file frame,
    ``FILE: Type: message`` (``path``) or just ``Type: message``."""
    frame = user_frame(err.__traceback__)
    message = f"{type(err).__name__}: {err}"
    if frame is not None:
        where = f"{frame.filename}:{frame.lineno}"
        if frame.name != "<module>":
            where += f" (in {frame.name})"
        code = f"\n    {frame.line.strip()}" if frame.line else ""
        return f"{where}: {message}{code}"
    return f"{path}: {message}" if path is not None else message

"""Saving :class:`Samples`: ``samples.save(path)`` writes a samples file; the file format.

Two formats, chosen by the suffix, hold the same things — every array of a ``Samples`` bit for bit
with its dtype, and a JSON header with the format version, the pytree structure of every field
and the run's ``meta``:

* ``.npz`` (NumPy): one array per leaf under a readable key (``position/net/Dense_0/kernel``,
  ``extra/guide/…``, ``info/energy``, ``adapted/step_size``, ``steps``, …) and the header as the
  string array ``bdl_header``. Read without pickle.
* ``.nc`` (NetCDF-4, written by ArviZ through h5netcdf): an ArviZ ``InferenceData`` — posterior
  (positions and ``extra``, named as :meth:`Samples.posterior_names` says, e.g.
  ``net.Dense_0.kernel``) and sample_stats (``info``, ``diverging``) — plus a group ``bdl`` with
  the remaining arrays (``steps``, ``diverged``, ``divergence_step``, ``adapted.*``) and the
  header as the root attribute ``bdl_header``. ``arviz.from_netcdf`` reads it as any other file.

Keys escape ``%``, ``.`` and ``/`` inside a pytree key (:mod:`bdl.sampling.kept.names`), so names
are unambiguous. Writes go to a temporary file in the same directory, renamed over ``path`` when
complete: a failed write leaves no partial file and an earlier file intact. Reading a file back
(:mod:`bdl.sampling.kept.reading`; ``bdl.load_samples``, :mod:`bdl.sampling.kept.loading`, which
also reads streamed directories) checks the format version and turns every failure (missing,
truncated, corrupt, foreign file) into a :class:`SamplesFileError` naming the file and the
problem. docs/saving.md has the layout.

This module does not import :class:`Samples`, whose ``save`` calls it: ``samples`` below is a
:class:`Samples`.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import jax
import numpy as np

from bdl import __version__
from bdl.sampling.kept.names import join_name, key_name, posterior_name, split_name
from bdl.utils.files import atomic_path, can_create_in

PyTree = Any
FORMAT = "bdl.Samples"
FORMAT_VERSION = 1  # raise when a file written now could be misread by an older bdl
SUFFIXES = (".npz", ".nc")
HEADER_KEY = "bdl_header"
NC_GROUP = "bdl"  # the NetCDF group holding what ArviZ's groups do not


class SamplesFileError(ValueError):
    """A samples file that cannot be read: truncated, corrupt, not written by bdl, or of a newer
    format. The message names the file and what to do."""


class LikeMismatchError(ValueError):
    """``load_samples(like=...)`` was given a pytree whose leaves are not the saved positions'."""


def check_output_path(path: str | os.PathLike) -> Path:
    """``path`` as a :class:`~pathlib.Path` if draws can be written there, else ``ValueError``.

    Checked before any work (``bdl sample --out`` calls it before compiling the model): the
    suffix is ``.npz`` or ``.nc``, the parent directory exists and is writable, and ``path`` is
    not a directory.

    Args:
        path: where the draws are to be written.

    Returns:
        The path as a :class:`~pathlib.Path`.

    Raises:
        ValueError: a suffix other than ``.npz`` or ``.nc``, a parent that does not exist, is a
            file or is not writable, or a path that is a directory.
        TypeError: ``path`` is neither a string nor a path.
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or a path; got {type(path).__name__}.")
    out = Path(path)
    if out.suffix not in SUFFIXES:
        raise ValueError(
            f"{str(path)!r}: unknown suffix {out.suffix or '(none)'!r}; draws are saved as .npz "
            "(NumPy) or .nc (NetCDF, readable by ArviZ): rename it, e.g. draws.npz."
        )
    parent = out.parent
    if parent.exists() and not parent.is_dir():
        raise ValueError(f"{str(path)!r}: {str(parent)!r} is a file, not a directory.")
    if not parent.is_dir():
        raise ValueError(
            f"{str(path)!r}: directory {str(parent)!r} does not exist; create it first "
            f"(mkdir -p {parent}) or choose another path."
        )
    if not (os.access(parent, os.W_OK | os.X_OK) and can_create_in(parent)):
        raise ValueError(
            f"{str(path)!r}: directory {str(parent)!r} is not writable; choose a directory you "
            "can write to."
        )
    if out.is_dir():
        raise ValueError(f"{str(path)!r} is a directory; give a file name ending in .npz or .nc.")
    return out


def save_samples(samples: Any, path: str | os.PathLike) -> Path:
    """Write ``samples`` to ``path`` (``.npz`` or ``.nc``) atomically; returns the path.

    Called as ``samples.save(path)``. Everything a ``Samples`` holds is written, and
    :func:`bdl.load_samples` gives it back with identical arrays and ``meta``.
    """
    out = check_output_path(path)
    header, arrays = _record(samples)
    if out.suffix == ".nc":
        samples.posterior_names()  # raises, before writing, when two leaves would share a name
    with atomic_path(out) as tmp:
        if out.suffix == ".npz":
            _write_npz(tmp, header, arrays)
        else:
            _write_nc(tmp, samples, header, arrays)
    return out


def save_npz(samples: Any, path: Path, **header: Any) -> None:
    """``samples`` written atomically as the ``.npz`` samples file ``path``, with the entries of
    ``header`` added to its header: :func:`save_samples` without the check of ``path`` (a
    stream's parts and index, :mod:`bdl.sampling.kept.stream`)."""
    full, arrays = _record(samples)
    full.update(header)
    with atomic_path(path) as tmp:
        _write_npz(tmp, full, arrays)


# ------------------------------------------------------------------------- record: header + arrays
def _record(samples: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The JSON header and the arrays by ``/``-joined key."""
    arrays: dict[str, np.ndarray] = {}

    def tree(value: PyTree, *prefix: str) -> Any:
        return _encode(value, list(prefix), arrays)

    trees = {
        "position": tree(samples.positions, "position"),
        "extra": {k: tree(v, "extra", k) for k, v in samples.extra.items()},
        "info": {k: tree(v, "info", k) for k, v in samples.info.items()},
        "adapted": None
        if samples.adapted is None
        else {k: tree(v, "adapted", k) for k, v in samples.adapted.items()},
        "steps": tree(np.asarray(samples.steps), "steps"),
        "diverged": tree(np.asarray(samples.diverged), "diverged"),
        "divergence_step": tree(np.asarray(samples.divergence_step), "divergence_step"),
    }
    if samples.evaluation is not None:
        trees["evaluation"] = tree(samples.evaluation.as_dict(), "evaluation")
    header = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "bdl_version": __version__,
        "kernel": samples.kernel,
        "steps_done": int(samples.steps_done),
        "interrupted": bool(samples.interrupted),
        "kept_draws": bool(samples.kept_draws),
        "meta": samples.meta,
        # the convergence verdict (bdl.diagnostics.convergence.Convergence.as_dict); None when
        # unchecked. Files written before it existed lack the entry, and load with None.
        "convergence": None
        if getattr(samples, "convergence", None) is None
        else samples.convergence.as_dict(),
        # run-away and hot chains (bdl.sampling.verdict.runaway_check): per chain, flag, step and
        # reason; files written before the check lack the entry, and load with nothing flagged
        "runaway": {
            "flags": [bool(f) for f in np.asarray(samples.runaway)],
            "steps": [int(t) for t in np.asarray(samples.runaway_step)],
            "reasons": [str(r) for r in samples.runaway_reason],
        },
        "trees": trees,
    }
    try:
        json.dumps(header, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"Samples.save: meta must hold only JSON values (dicts with string keys, lists, "
            f"strings, finite numbers, booleans, None); {err}."
        ) from None
    return header, arrays


def _encode(node: PyTree, keys: list[str], arrays: dict[str, np.ndarray]) -> Any:
    """The structure of ``node`` as JSON; its leaves go into ``arrays`` under their keys."""
    if node is None:
        return None
    if type(node) is dict:
        for k in node:
            if not isinstance(k, str | int) or isinstance(k, bool):
                raise ValueError(
                    f"Samples.save: dict key {k!r} at {'/'.join(keys)!r} is not a string or an "
                    "integer; only those can be written."
                )
        items = sorted(node.items())  # JAX's order
        return {"dict": [[k, _encode(v, [*keys, str(k)], arrays)] for k, v in items]}
    if type(node) in (list, tuple):
        kind = "list" if type(node) is list else "tuple"
        return {kind: [_encode(v, [*keys, str(i)], arrays) for i, v in enumerate(node)]}
    if isinstance(node, tuple) and hasattr(node, "_fields"):
        return {
            "namedtuple": type(node).__qualname__,
            "module": type(node).__module__,
            "fields": list(node._fields),
            "items": [
                _encode(v, [*keys, f], arrays) for f, v in zip(node._fields, node, strict=True)
            ],
        }
    if isinstance(node, np.ndarray | np.generic | jax.Array | bool | int | float):
        array = np.asarray(node)
        key = join_name(keys, "/")
        arrays[key] = _storable(array)
        return {"array": key, "dtype": str(array.dtype), "shape": list(array.shape)}
    children, _ = jax.tree_util.tree_flatten_with_path(node, is_leaf=lambda x: x is not node)
    if len(children) == 1 and children[0][1] is node:
        raise ValueError(
            f"Samples.save: the leaf at {'/'.join(keys)!r} is a {type(node).__name__}, not an "
            "array; only arrays can be written."
        )
    names = [key_name(path[0]) for path, _ in children]
    return {
        "node": f"{type(node).__module__}.{type(node).__qualname__}",
        "keys": names,
        "items": [
            _encode(v, [*keys, n], arrays) for n, (_, v) in zip(names, children, strict=True)
        ],
    }


def _storable(array: np.ndarray) -> np.ndarray:
    """The array, or its bits as unsigned integers for dtypes NumPy files and NetCDF lack
    (bfloat16 and the other ``ml_dtypes``)."""
    if array.dtype.kind in "biufc":
        return array
    return array.view(f"u{array.dtype.itemsize}")


# ------------------------------------------------------------------------- writing
def _write_npz(file: Path, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    with open(file, "wb") as f:  # a file object: np.savez would append .npz to a name
        np.savez(f, **{HEADER_KEY: np.asarray(json.dumps(header))}, **arrays)


def nc_location(key: str) -> tuple[str, str]:
    """(group, variable) of the array ``key`` in a ``.nc`` file."""
    parts = split_name(key, "/")
    if parts[0] == "position":
        return "posterior", posterior_name("position", parts[1:])
    if parts[0] == "extra":
        return "posterior", posterior_name(parts[1], parts[2:])
    if parts[0] == "info":
        return "sample_stats", join_name(parts[1:])
    return NC_GROUP, join_name(parts)


def _write_nc(
    file: Path, samples: Any, header: dict[str, Any], arrays: dict[str, np.ndarray]
) -> None:
    import arviz as az
    import xarray as xr

    groups: dict[str, dict[str, np.ndarray]] = {"posterior": {}, "sample_stats": {}, NC_GROUP: {}}
    for key, array in arrays.items():
        group, name = nc_location(key)
        groups[group][name] = array
    groups["sample_stats"]["diverging"] = ~samples.valid
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="More chains")  # few draws is no error here
        idata = az.from_dict(posterior=groups["posterior"], sample_stats=groups["sample_stats"])
    rest = xr.Dataset(
        {
            name: ([f"{name}_dim_{i}" for i in range(a.ndim)], a)
            for name, a in groups[NC_GROUP].items()
        }
    )
    idata = az.InferenceData(
        attrs={HEADER_KEY: json.dumps(header)},
        posterior=idata.posterior,
        sample_stats=idata.sample_stats,
        **{NC_GROUP: rest},
    )
    idata.to_netcdf(str(file), engine="h5netcdf")

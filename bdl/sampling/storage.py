"""Saving and loading :class:`Samples`: ``samples.save(path)`` and ``bdl.load_samples(path)``.

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

Keys escape ``%``, ``.`` and ``/`` inside a pytree key (:mod:`bdl.sampling.names`), so names are
unambiguous. Writes go to a temporary file in the same directory, renamed over ``path`` when
complete: a failed write leaves no partial file and an earlier file intact. Reading checks the
format version and turns every failure (missing, truncated, corrupt, foreign file) into a
:class:`SamplesFileError` naming the file and the problem. docs/saving.md has the layout.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bdl.sampling.names import join_name, key_name, leaf_keys, posterior_name, split_name
from bdl.sampling.samples import Samples
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


def save_samples(samples: Samples, path: str | os.PathLike) -> Path:
    """Write ``samples`` to ``path`` (``.npz`` or ``.nc``) atomically; returns the path.

    Called as ``samples.save(path)``. Everything a ``Samples`` holds is written, and
    :func:`load_samples` gives it back with identical arrays and ``meta``.
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


def load_samples(path: str | os.PathLike, *, like: PyTree | None = None) -> Samples:
    """The :class:`Samples` saved at ``path`` by :meth:`Samples.save`.

    Args:
        path: a ``.npz`` or ``.nc`` file written by ``Samples.save`` (or ``bdl sample --out``),
            or a directory that ``bdl.sample(..., stream_to=DIR)`` wrote (its parts are joined;
            :func:`bdl.sampling.stream.iter_parts` reads them one at a time).
        like: a pytree with the positions' structure, e.g. ``compiled.initial_position``.
            Dicts, lists, tuples and named tuples are restored from the file alone; other pytree
            nodes (an Equinox module's parameters) cannot be rebuilt without their class and are
            restored as dicts by attribute name, unless ``like`` gives the structure: then the
            positions and every tree saved with their structure (``extra`` such as the
            Entropy-MCMC guide, an adapted mass) get ``like``'s.

    Raises:
        FileNotFoundError: no file at ``path``.
        SamplesFileError: (a ``ValueError``) the file is truncated or corrupt, not a bdl samples
            file, of a newer format than this bdl reads, or its suffix is not .npz or .nc.
    """
    file = Path(path)
    from bdl.sampling import stream

    if stream.is_stream(file):
        return stream.load_stream(file, like=like)
    if file.suffix not in SUFFIXES:
        raise SamplesFileError(
            f"{str(path)!r}: unknown suffix {file.suffix or '(none)'!r}; bdl reads samples from "
            ".npz and .nc files written by Samples.save."
        )
    if not file.is_file():
        raise FileNotFoundError(
            f"load_samples: no file {str(path)!r}"
            + (" (it is a directory)." if file.is_dir() else ".")
        )
    _sniff(file)
    reader = _read_npz if file.suffix == ".npz" else _read_nc
    try:
        header, fetch = reader(file)
        return _assemble(file, header, fetch, like)
    except (SamplesFileError, LikeMismatchError):
        raise
    except Exception as err:  # zipfile, zlib, HDF5, NumPy: all mean the file is damaged
        raise SamplesFileError(
            f"{str(file)!r}: cannot be read as a bdl samples file ({type(err).__name__}: {err}); "
            "it may be truncated or corrupt: write it again with Samples.save."
        ) from None


# ------------------------------------------------------------------------- record: header + arrays
def _record(samples: Samples) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
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
        "bdl_version": _version(),
        "kernel": samples.kernel,
        "steps_done": int(samples.steps_done),
        "interrupted": bool(samples.interrupted),
        "kept_draws": bool(samples.kept_draws),
        "meta": samples.meta,
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


def _nc_location(key: str) -> tuple[str, str]:
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
    file: Path, samples: Samples, header: dict[str, Any], arrays: dict[str, np.ndarray]
) -> None:
    import arviz as az
    import xarray as xr

    groups: dict[str, dict[str, np.ndarray]] = {"posterior": {}, "sample_stats": {}, NC_GROUP: {}}
    for key, array in arrays.items():
        group, name = _nc_location(key)
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


# ------------------------------------------------------------------------- reading
Fetch = Callable[[str], np.ndarray]
_MAGIC = {  # suffix: (first bytes, what they are)
    ".npz": (b"PK", "a zip archive, as .npz files are"),
    ".nc": (b"\x89HDF\r\n\x1a\n", "an HDF5 file, as the NetCDF-4 files bdl writes are"),
}


def _sniff(file: Path) -> None:
    """A clear error for a file that is empty or of another kind than its suffix says."""
    with open(file, "rb") as f:
        start = f.read(8)
    if not start:
        raise SamplesFileError(f"{str(file)!r} is empty; write it again with Samples.save.")
    magic, kind = _MAGIC[file.suffix]
    if start.startswith(magic):
        return
    found = {b"\x93NUMPY": "a single NumPy array (.npy)", b"CDF": "a NetCDF-3 file"}
    what = next((v for k, v in found.items() if start.startswith(k)), f"not {kind}")
    raise SamplesFileError(
        f"{str(file)!r}: not a bdl samples file ({what}); bdl reads files written by Samples.save."
    )


def _read_npz(file: Path) -> tuple[dict[str, Any], Fetch]:
    with np.load(file, allow_pickle=False) as data:
        if HEADER_KEY not in data.files:
            raise SamplesFileError(
                f"{str(file)!r}: not a bdl samples file (no {HEADER_KEY!r} entry among "
                f"{sorted(data.files)[:5]}); bdl reads .npz files written by Samples.save."
            )
        header = _parse_header(file, str(data[HEADER_KEY]))
        arrays = {key: data[key] for key in _array_keys(header["trees"]) if key in data.files}
    return header, lambda key: arrays[key]


def _read_nc(file: Path) -> tuple[dict[str, Any], Fetch]:
    import h5netcdf

    with h5netcdf.File(file, "r") as f:
        if HEADER_KEY not in f.attrs:
            raise SamplesFileError(
                f"{str(file)!r}: not a bdl samples file (no {HEADER_KEY!r} attribute; an ArviZ "
                "file from elsewhere?): read it with arviz.from_netcdf, or write it with "
                "Samples.save."
            )
        text = f.attrs[HEADER_KEY]
        header = _parse_header(file, text.decode() if isinstance(text, bytes) else str(text))
        arrays = {}
        for key in _array_keys(header["trees"]):
            group, name = _nc_location(key)
            if group in f.groups and name in f.groups[group].variables:
                arrays[key] = np.asarray(f.groups[group].variables[name][...])
    return header, lambda key: arrays[key]


def _parse_header(file: Path, text: str) -> dict[str, Any]:
    try:
        header = json.loads(text)
    except json.JSONDecodeError as err:
        raise SamplesFileError(
            f"{str(file)!r}: its header is not valid JSON ({err}); the file is corrupt: write it "
            "again with Samples.save."
        ) from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise SamplesFileError(
            f"{str(file)!r}: not a bdl samples file (its header names no {FORMAT!r} format); "
            "bdl reads files written by Samples.save."
        )
    version = header.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise SamplesFileError(
            f"{str(file)!r}: invalid format_version {version!r}; the file is corrupt: write it "
            "again with Samples.save."
        )
    if version > FORMAT_VERSION:
        raise SamplesFileError(
            f"{str(file)!r} is in samples format {version} (written by bdl "
            f"{header.get('bdl_version', '?')}); this bdl ({_version()}) reads formats up to "
            f"{FORMAT_VERSION}. Upgrade bdl (pip install --upgrade bdl) to read it."
        )
    missing = sorted(
        {"kernel", "steps_done", "interrupted", "meta", "trees"} - set(header)
        | {"position", "extra", "info", "adapted", "steps", "diverged", "divergence_step"}
        - set(header.get("trees") or {})
    )
    if missing:
        raise SamplesFileError(
            f"{str(file)!r}: its header lacks {missing}; the file is corrupt: write it again with "
            "Samples.save."
        )
    return header


def _array_keys(trees: dict[str, Any]) -> list[str]:
    """Every array key the header's trees refer to."""
    specs = [trees[k] for k in ("position", "steps", "diverged", "divergence_step")]
    for group in ("extra", "info", "adapted"):
        specs += list((trees[group] or {}).values())
    if trees.get("evaluation") is not None:
        specs.append(trees["evaluation"])
    return [leaf["array"] for spec in specs for _, leaf in _leaf_specs(spec)]


def _assemble(file: Path, header: dict[str, Any], fetch: Fetch, like: PyTree | None) -> Samples:
    def leaf(spec: dict[str, Any]) -> np.ndarray:
        key = spec["array"]
        try:
            stored = fetch(key)
        except KeyError:
            raise SamplesFileError(
                f"{str(file)!r}: its header lists an array {key!r} the file lacks; the file is "
                "corrupt: write it again with Samples.save."
            ) from None
        array = _restore(stored, jnp.dtype(spec["dtype"]))
        if list(array.shape) != list(spec["shape"]):
            raise SamplesFileError(
                f"{str(file)!r}: the array {key!r} has shape {array.shape}, its header says "
                f"{tuple(spec['shape'])}; the file is corrupt: write it again with Samples.save."
            )
        return array

    trees = header["trees"]
    position_shape = _skeleton(trees["position"])

    def tree(spec: Any) -> PyTree:
        if like is not None and _skeleton(spec) == position_shape:
            return _like(file, spec, like, leaf)
        return _decode(spec, leaf)

    adapted = trees["adapted"]
    evaluation = None
    if trees.get("evaluation") is not None:  # files of runs that evaluated while sampling
        from bdl.evaluation.curve import BMAEvaluation

        evaluation = BMAEvaluation.from_dict(_decode(trees["evaluation"], leaf))
    return Samples(
        positions=tree(trees["position"]),
        extra={k: tree(v) for k, v in trees["extra"].items()},
        info={k: _decode(v, leaf) for k, v in trees["info"].items()},
        steps=_decode(trees["steps"], leaf),
        kernel=str(header["kernel"]),
        steps_done=int(header["steps_done"]),
        interrupted=bool(header["interrupted"]),
        diverged=_decode(trees["diverged"], leaf),
        divergence_step=_decode(trees["divergence_step"], leaf),
        adapted=None if adapted is None else {k: tree(v) for k, v in adapted.items()},
        meta=header["meta"],
        evaluation=evaluation,
        kept_draws=bool(header.get("kept_draws", True)),
    )


def _restore(stored: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if stored.dtype == dtype:
        return stored
    if dtype.kind not in "biufc":  # kept as its bits (:func:`_storable`)
        return stored.view(dtype)
    return stored.astype(dtype)  # NetCDF keeps booleans as int8


def _decode(spec: Any, leaf: Callable[[dict[str, Any]], np.ndarray]) -> PyTree:
    if spec is None:
        return None
    if "array" in spec:
        return leaf(spec)
    if "dict" in spec:
        return {k: _decode(v, leaf) for k, v in spec["dict"]}
    if "list" in spec:
        return [_decode(v, leaf) for v in spec["list"]]
    if "tuple" in spec:
        return tuple(_decode(v, leaf) for v in spec["tuple"])
    items = [_decode(v, leaf) for v in spec["items"]]
    if "namedtuple" in spec:
        return _namedtuple(spec)(*items)
    return dict(zip(spec["keys"], items, strict=True))  # a custom node, by attribute name


def _namedtuple(spec: dict[str, Any]) -> type:
    """The saved named tuple's class when its module is already imported (none is imported
    here: a file names no code to run), else a new named tuple with the same name and fields."""
    found: Any = sys.modules.get(spec.get("module", ""))
    for part in spec["namedtuple"].split("."):
        found = getattr(found, part, None)
    if isinstance(found, type) and getattr(found, "_fields", None) == tuple(spec["fields"]):
        return found
    name = spec["namedtuple"].split(".")[-1]
    return collections.namedtuple(name if name.isidentifier() else "NamedTuple", spec["fields"])


def _skeleton(spec: Any) -> Any:
    """The structure without the leaves' keys, dtypes and shapes: equal for trees shaped alike."""
    if isinstance(spec, dict):
        if "array" in spec:
            return "*"
        return {k: _skeleton(v) for k, v in spec.items()}
    if isinstance(spec, list):
        return [_skeleton(v) for v in spec]
    return spec


def _leaf_specs(spec: Any) -> Iterator[tuple[list[str], dict[str, Any]]]:
    """(path, leaf spec) of every leaf in flattening order."""

    def walk(node: Any, path: list[str]) -> Iterator[tuple[list[str], dict[str, Any]]]:
        if node is None:
            return
        if "array" in node:
            yield path, node
        elif "dict" in node:
            for k, v in node["dict"]:
                yield from walk(v, [*path, str(k)])
        elif "list" in node or "tuple" in node:
            for i, v in enumerate(node.get("list", node.get("tuple"))):
                yield from walk(v, [*path, str(i)])
        else:
            names = node.get("keys", node.get("fields"))
            for name, v in zip(names, node["items"], strict=True):
                yield from walk(v, [*path, str(name)])

    yield from walk(spec, [])


def _like(
    file: Path, spec: Any, like: PyTree, leaf: Callable[[dict[str, Any]], np.ndarray]
) -> PyTree:
    """The saved tree ``spec`` with the structure of ``like`` (same leaves by path)."""
    saved = list(_leaf_specs(spec))
    want = leaf_keys(like)
    if [p for p, _ in saved] != want:
        raise LikeMismatchError(
            f"load_samples({str(file)!r}, like=...): like's leaves {want[:4]} do not match the "
            f"saved positions' {[p for p, _ in saved][:4]}; pass the compiled model's "
            "initial_position."
        )
    return jax.tree.unflatten(jax.tree.structure(like), [leaf(s) for _, s in saved])


def _version() -> str:
    from bdl import __version__

    return __version__

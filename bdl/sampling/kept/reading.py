"""Reading a samples file back: :func:`read_samples` turns a ``.npz`` or ``.nc`` file that
:meth:`Samples.save` wrote (:mod:`bdl.sampling.kept.writing`, which also describes the format) into
the :class:`Samples` it held, with identical arrays and ``meta``.

``bdl.load_samples`` (:mod:`bdl.sampling.kept.loading`) calls it for a file, and the stream
(:mod:`bdl.sampling.kept.stream`) for each of its parts. The file is sniffed before it is parsed,
the format version is checked, and every failure (missing, truncated, corrupt, foreign file) becomes
a :class:`~bdl.sampling.kept.writing.SamplesFileError` naming the file and the problem.
"""

from __future__ import annotations

import collections
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bdl import __version__
from bdl.diagnostics.convergence import Convergence
from bdl.evaluation.curve import BMAEvaluation
from bdl.sampling.kept.names import leaf_keys
from bdl.sampling.kept.writing import (
    FORMAT,
    FORMAT_VERSION,
    HEADER_KEY,
    SUFFIXES,
    LikeMismatchError,
    SamplesFileError,
    nc_location,
)
from bdl.sampling.samples import Samples

PyTree = Any


def read_samples(path: str | os.PathLike, *, like: PyTree | None = None) -> Samples:
    """The :class:`Samples` saved in the file ``path`` by :meth:`Samples.save`.

    Args:
        path: a ``.npz`` or ``.nc`` file written by ``Samples.save`` (or ``bdl sample --out``).
        like: a pytree with the positions' structure, e.g. ``compiled.initial_position``
            (:func:`bdl.load_samples`).

    Raises:
        FileNotFoundError: no file at ``path``.
        SamplesFileError: (a ``ValueError``) the file is truncated or corrupt, not a bdl samples
            file, of a newer format than this bdl reads, or its suffix is not .npz or .nc.
    """
    file = Path(path)
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
            group, name = nc_location(key)
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
            f"{header.get('bdl_version', '?')}); this bdl ({__version__}) reads formats up to "
            f"{FORMAT_VERSION}. Upgrade bdl (pip install --upgrade bdl-sgmcmc) to read it."
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
        evaluation = BMAEvaluation.from_dict(_decode(trees["evaluation"], leaf))
    convergence = header.get("convergence")  # absent from files written before the check
    runaway = _runaway(file, header.get("runaway"))  # absent from files written before it
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
        convergence=None if convergence is None else _convergence(file, convergence),
        **runaway,
    )


def _runaway(file: Path, record: Any) -> dict[str, Any]:
    """The saved run-away flags as ``Samples`` fields ({} when the file has none), or a
    :class:`SamplesFileError`."""
    if record is None:
        return {}
    try:
        flags = np.asarray(record["flags"], bool)
        steps = np.asarray(record["steps"], np.int64)
        reasons = [str(r) for r in record["reasons"]]
        if not flags.ndim == steps.ndim == 1 or not flags.size == steps.size == len(reasons):
            raise ValueError("flags, steps and reasons differ in length")
    except (TypeError, ValueError, KeyError) as err:
        raise SamplesFileError(
            f"{str(file)!r}: its run-away record cannot be read ({err}); the file is corrupt: "
            "write it again with Samples.save."
        ) from None
    return {"runaway": flags, "runaway_step": steps, "runaway_reason": reasons}


def _convergence(file: Path, record: Any) -> Convergence:
    """The saved verdict (:meth:`Convergence.as_dict`), or a :class:`SamplesFileError`."""
    try:
        return Convergence.from_dict(record)
    except (TypeError, ValueError, AttributeError) as err:
        raise SamplesFileError(
            f"{str(file)!r}: its convergence record cannot be read ({err}); the file is corrupt: "
            "write it again with Samples.save."
        ) from None


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

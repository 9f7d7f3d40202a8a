"""Checkpoints of a running :func:`bdl.sample`: everything needed to go on, written atomically.

A checkpoint directory holds

* ``state.npz``: the loop's carry (kernel states with their momenta, thermostats and
  preconditioner statistics, minibatch streams, divergence status with the far-out limit,
  adapted values and warm-up statistics), the step counter, how many draw parts belong to it,
  and a JSON header (format, bdl's version, the model's name, a fingerprint of the kernel, one
  of the model (:mod:`bdl.compile.fingerprint`), the run's settings);
* ``draws-000001.npz``, …: the draws collected, one part per checkpoint, each written once
  (none when the run does not keep its draws);
* in ``state.npz`` too, when the run scores its draws as it goes, the running BMA's sums and
  its curve so far (``e0000``, …).

Every file is written under a temporary name and renamed into place (``os.replace`` is atomic),
the state last, so a crash at any moment leaves the previous checkpoint readable: parts newer
than the state are ignored and overwritten. No random key is stored: every key of a run is
``fold_in`` of a key derived from the seed and the step, so the carry and the step determine the
rest of the run, and a resumed run gives bitwise the draws of an uninterrupted one.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from bdl.utils.files import atomic_path, check_writable, directory_argument

#: the layout written by this version of bdl; other formats are refused (format 1 carried each
#: chain's epoch permutation in its minibatch stream, which later streams no longer hold; format
#: 2's streams drew an epoch's order from other random numbers than format 3's; format 4 adds a
#: small model's control-variate anchor to the warm-up state; format 5 adds the divergence
#: energy and the far-out reference and margin to the status)
FORMAT = 5
STATE = "state.npz"
_HEADER = "__header__"


class Checkpoint(NamedTuple):
    """A checkpoint as read back: the carry's leaves (host arrays, keys as key data), the step
    counter, the draw parts' leaves (one list per part), the header and the running
    evaluation's arrays (empty when the run did not evaluate)."""

    carry: list[np.ndarray]
    step: int
    parts: list[list[np.ndarray]]
    header: dict[str, Any]
    evaluation: tuple[np.ndarray, ...] = ()


def fingerprint(kernel: Any) -> str:
    """A digest of the kernel's structure, settings and array values (the same kernel built in
    another process gives the same digest)."""
    digest = hashlib.sha256(eqx.tree_pformat(kernel, short_arrays=True).encode())
    for leaf in jax.tree.leaves(eqx.filter(kernel, eqx.is_array)):
        digest.update(np.ascontiguousarray(np.asarray(leaf)).tobytes())
    return digest.hexdigest()[:16]


def host_leaves(tree: Any) -> list[np.ndarray]:
    """The leaves of ``tree`` as host arrays, typed PRNG keys as their key data."""
    leaves = []
    for leaf in jax.tree.leaves(tree):
        if jnp.issubdtype(jnp.result_type(leaf), jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        leaves.append(np.asarray(jax.device_get(leaf)))
    return leaves


def restore(template: Any, leaves: list[np.ndarray], directory: Path) -> Any:
    """``template``'s pytree with the stored leaves, checked leaf by leaf against its shapes and
    dtypes (a checkpoint of another model, kernel or chain count does not fit)."""
    shapes, treedef = jax.tree.flatten(template)
    if len(shapes) != len(leaves):
        raise ValueError(
            f"resume: the checkpoint in {directory} holds {len(leaves)} arrays where this model "
            f"and kernel have {len(shapes)}: it was written by another model or kernel."
        )
    out = []
    for i, (shape, leaf) in enumerate(zip(shapes, leaves, strict=True)):
        is_key = jnp.issubdtype(shape.dtype, jax.dtypes.prng_key)
        want = jax.eval_shape(jax.random.key_data, shape) if is_key else shape
        if tuple(leaf.shape) != tuple(want.shape) or leaf.dtype != want.dtype:
            raise ValueError(
                f"resume: array {i} of the checkpoint in {directory} is {leaf.dtype}"
                f"{list(leaf.shape)} where this model and kernel need {want.dtype}"
                f"{list(want.shape)}: it was written by another model, kernel or chain count."
            )
        value = jnp.asarray(leaf)
        if is_key:
            value = jax.random.wrap_key_data(value)  # keys of bdl runs use the default impl
        out.append(value)
    return jax.tree.unflatten(treedef, out)


def _write_atomic(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as f:  # a file object: no .npz appended
        np.savez(f, **arrays)


def _part(directory: Path, k: int) -> Path:
    return directory / f"draws-{k:06d}.npz"


def _encode(header: dict[str, Any]) -> np.ndarray:
    return np.frombuffer(json.dumps(header).encode(), np.uint8)


def write(
    directory: Path,
    carry: Any,
    step: int,
    new_draws: list[np.ndarray] | None,
    parts: int,
    header: dict[str, Any],
    evaluation: list[np.ndarray] | None = None,
) -> int:
    """Write a checkpoint: a new draw part (when there are new draws), then the state (with the
    running evaluation's arrays, if any). Returns the number of parts the state now lists."""
    directory.mkdir(parents=True, exist_ok=True)
    if new_draws is not None:
        parts += 1
        _write_atomic(_part(directory, parts), {f"a{i:04d}": a for i, a in enumerate(new_draws)})
    arrays = {f"a{i:04d}": a for i, a in enumerate(host_leaves(carry))}
    arrays.update({f"e{i:04d}": np.asarray(a) for i, a in enumerate(evaluation or [])})
    full = {**header, "format": FORMAT, "step": int(step), "parts": parts}
    arrays[_HEADER] = _encode(full)
    _write_atomic(directory / STATE, arrays)
    return parts


def exists(directory: Path) -> bool:
    return (Path(directory) / STATE).is_file()


def _read(path: Path, what: str) -> dict[str, np.ndarray]:
    try:
        data = np.load(path, allow_pickle=False)
        return {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise ValueError(
            f"resume: {path} ({what}) cannot be read ({err.__class__.__name__}: {err}); it is "
            "truncated or corrupt. Start the run again, or resume from a copy of the directory."
        ) from None


def read(directory: Path) -> Checkpoint:
    """Read the checkpoint in ``directory`` (clear errors for a missing, corrupt, truncated or
    newer one)."""
    directory = Path(directory)
    path = directory / STATE
    if not path.is_file():
        raise FileNotFoundError(
            f"resume: {directory} holds no checkpoint ({STATE} is missing); give the directory "
            "a run was started with checkpoint=... (--checkpoint)."
        )
    arrays = _read(path, "the sampler's state")
    if _HEADER not in arrays:
        raise ValueError(f"resume: {path} is not a bdl checkpoint (it has no header).")
    try:
        header = json.loads(bytes(arrays.pop(_HEADER)).decode())
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError(f"resume: the header of {path} is corrupt.") from None
    if not isinstance(header, dict) or "format" not in header:
        raise ValueError(f"resume: {path} is not a bdl checkpoint (its header has no format).")
    if header["format"] > FORMAT:
        raise ValueError(
            f"resume: {path} has checkpoint format {header['format']}, written by bdl "
            f"{header.get('bdl_version', '?')}; this bdl reads format {FORMAT} and older. "
            "Upgrade bdl to resume it."
        )
    if header["format"] < FORMAT:
        raise ValueError(
            f"resume: {path} has checkpoint format {header['format']}, written by bdl "
            f"{header.get('bdl_version', '?')}, whose state this bdl does not continue draw for "
            "draw (an older minibatch stream or warm-up state). Start the run again without "
            "resume=."
        )
    carry = [arrays[k] for k in sorted(arrays) if k.startswith("a")]
    evaluation = [arrays[k] for k in sorted(arrays) if k.startswith("e")]
    parts = []
    for k in range(1, int(header["parts"]) + 1):
        path = _part(directory, k)
        if not path.is_file():
            raise ValueError(
                f"resume: {path} is missing; the checkpoint in {directory} lists "
                f"{header['parts']} parts of draws."
            )
        part = _read(path, "collected draws")
        parts.append([part[key] for key in sorted(part)])
    return Checkpoint(carry, int(header["step"]), parts, header, tuple(evaluation))


def check_directory(directory: Any, name: str) -> Path:
    """``directory`` as a Path that can hold a checkpoint (created if missing), before any
    compilation."""
    path = directory_argument(directory, name, "the checkpoint")
    check_writable(path, name)
    return path

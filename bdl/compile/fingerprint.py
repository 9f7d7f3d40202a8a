"""A fingerprint of a compiled target: what a checkpoint records so that a resumed run goes on
sampling the posterior it started on.

Two kinds of record, compared in this order:

* :func:`declarations`, read without evaluating anything: for a model, its network (flavour,
  the qualified name or structure of the network object, and the parameters' paths, shapes and
  dtypes), its prior and likelihood (a stable text of the declaration objects: their classes'
  qualified names and attributes, NumPyro distributions with their parameters, functions by
  qualified name, arrays by dtype, shape and value or digest, memory addresses dropped), its
  data (a SHA-256 digest per array: training and test inputs, targets and data fields), its
  tempering and its minibatches; for a potential, its log-density and gradient noise.
* :func:`energies`: the full-data energy U(θ) and its gradient at :data:`GAINS`-many fixed
  points θ_j, drawn with NumPy's PCG64 from :data:`SEED` in the shape of the initial position
  (each network weight with sd gain/√fan-in, every other leaf with sd gain), so that they
  depend on the position's structure and shapes only, never on its values: the same network
  built with another seed has the same posterior and the same fingerprint. The gradient is
  recorded as its norm and its projections on :data:`DIRECTIONS` fixed unit directions.

U is evaluated in chunks of at most :data:`CHUNK` training examples with the target's own
minibatch estimate at full-data scale, weighted by |chunk|/n: Σ_c (|c|/n)·Ũ_c(θ) = U(θ) exactly
(docs/design.md, *Energy*), with at most two compiled programs and bounded memory; no
minibatch is drawn, so the numbers do not depend on the batch size. On one machine the same
program gives the same bits in every process; :func:`energy_changes` still compares with the
relative tolerance :data:`RTOL`, because another CPU or XLA build may sum in another order
(float32 rounding of such sums is about 1e-6 relative), while any change of the model moves
these numbers by orders of magnitude more.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import re
import types
from typing import Any

import equinox as eqx
import jax
import numpy as np

from bdl.compile.compiled_model import CompiledModel
from bdl.compile.compiled_potential import CompiledPotential
from bdl.compile.target import Target
from bdl.utils.trees import path_to_str

#: seed of the fixed points and directions (NumPy's PCG64: the same draws on every platform)
SEED = 20_150_601
#: the fixed points' scales: sd gain/√fan-in per network weight, gain for every other leaf
GAINS = (0.5, 1.5)
#: fixed unit directions the gradient is projected on, at every point
DIRECTIONS = 2
#: relative tolerance of :func:`energy_changes` (module docstring)
RTOL = 1e-4
#: training examples per evaluation of the energy
CHUNK = 4096
#: the parts of :func:`declarations`, in the order a change is reported
PARTS = ("network", "prior", "likelihood", "data", "tempering", "minibatches", "potential")
#: arrays of at most this many entries are described by their values, larger ones by a digest
SHOWN_VALUES = 8
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_MAX_DEPTH = 12


# ---------------------------------------------------------------- declarations
def declarations(target: Target) -> dict[str, Any]:
    """The target's declarations as stable text and digests, by part (:data:`PARTS`); nothing
    is traced or evaluated."""
    if isinstance(target, CompiledModel):
        model = target.model
        shapes = _shapes(target.initial_position["net"])
        network = f"{target.adapter.flavour} {describe(model.network, values=False)}"
        return {
            "network": f"{network}, batched={model.batched!r}; parameters {shapes}",
            "prior": describe(model.prior),
            "likelihood": describe(model.likelihood),
            "data": data_digests(target),
            "tempering": describe(
                {
                    "temperature": model.temperature,
                    "tempering": model.tempering,
                    "effective_size": model.effective_size,
                }
            ),
            "minibatches": describe({"batch_size": target.batch_size, "augment": target.augment}),
        }
    if isinstance(target, CompiledPotential):
        potential = target.potential
        return {
            "potential": describe(
                {
                    "log_density": potential.log_density,
                    "grad_noise": potential.grad_noise,
                    "position": _shapes(target.initial_position),
                }
            ),
            "tempering": describe({"temperature": potential.temperature}),
        }
    return {"potential": f"{_qualname(type(target))}; position {_shapes(target.initial_position)}"}


def data_digests(target: CompiledModel) -> dict[str, str]:
    """``{name: "dtype[shape] sha256…"}`` for every data array of the model: ``x_train``,
    ``y_train``, ``x_test``, ``y_test`` and ``fields_train/NAME``, ``fields_test/NAME``."""
    arrays: dict[str, Any] = {
        "x_train": target.x_train,
        "y_train": target.y_train,
        "x_test": target.x_test,
        "y_test": target.y_test,
    }
    for split in ("train", "test"):
        for name, value in sorted((getattr(target, f"fields_{split}") or {}).items()):
            arrays[f"fields_{split}/{name}"] = value
    return {name: _digest(value) for name, value in arrays.items() if value is not None}


def describe(obj: Any, *, values: bool = True) -> str:
    """A stable text of a declaration object: the same text for an equal object built in another
    process. Classes and functions by qualified name (not module: a model file's module name
    depends on how it was loaded), objects by their public attributes or dataclass fields,
    NumPyro distributions by their parameters, arrays by dtype and shape and — with ``values``
    — their values (at most :data:`SHOWN_VALUES` entries) or a digest; memory addresses are
    dropped."""
    return _describe(obj, values, 0, frozenset())


def _describe(obj: Any, values: bool, depth: int, seen: frozenset) -> str:
    if depth > _MAX_DEPTH:
        return "..."
    if obj is None or isinstance(obj, bool | int | str | float | complex):
        return repr(obj)
    if isinstance(obj, np.ndarray | np.generic | jax.Array):
        return _array(obj, values)
    if id(obj) in seen:
        return "<cycle>"
    seen = seen | {id(obj)}

    def sub(value: Any) -> str:
        return _describe(value, values, depth + 1, seen)

    if isinstance(obj, list | tuple):
        inner = ", ".join(sub(v) for v in obj)
        return f"[{inner}]" if isinstance(obj, list) else f"({inner})"
    if isinstance(obj, dict):
        items = sorted((repr(k), sub(v)) for k, v in obj.items())
        return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    if isinstance(obj, functools.partial):
        args = [sub(a) for a in obj.args] + [f"{k}={sub(v)}" for k, v in obj.keywords.items()]
        return f"partial({sub(obj.func)}, {', '.join(args)})"
    if isinstance(obj, type):
        return _qualname(obj)
    if _is_distribution(obj):
        params = [k for k in sorted(obj.arg_constraints) if k in vars(obj)]
        if not obj.arg_constraints:  # no parameters of its own (bdl.Ordered): its public fields
            params = sorted(k for k in vars(obj) if not k.startswith("_"))
        shown = [f"{k}={sub(getattr(obj, k))}" for k in params]
        return f"{_qualname(type(obj))}({', '.join(shown)}, batch_shape={obj.batch_shape})"
    if isinstance(obj, types.FunctionType | types.BuiltinFunctionType | types.MethodType):
        return f"<function {_qualname(obj)}>"
    wrapped = getattr(obj, "__wrapped__", None)
    if wrapped is not None and callable(obj) and not isinstance(obj, eqx.Module):
        return sub(wrapped)  # jax.jit and functools.wraps wrappers: what they wrap
    if dataclasses.is_dataclass(obj):
        names = [f.name for f in dataclasses.fields(obj) if f.name != "parent"]
        fields = {name: getattr(obj, name, None) for name in names}
    elif hasattr(obj, "__dict__"):
        fields = {k: v for k, v in vars(obj).items() if not k.startswith("_")}
    else:
        return f"{_qualname(type(obj))}:{_ADDRESS.sub('', repr(obj))}"
    shown = ", ".join(f"{k}={sub(v)}" for k, v in sorted(fields.items()))
    return f"{_qualname(type(obj))}({shown})"


def _is_distribution(obj: Any) -> bool:
    return (
        hasattr(obj, "arg_constraints") and hasattr(obj, "batch_shape") and hasattr(obj, "log_prob")
    )


def _qualname(obj: Any) -> str:
    return str(getattr(obj, "__qualname__", None) or getattr(obj, "__name__", type(obj).__name__))


def _array(value: Any, values: bool) -> str:
    a = np.asarray(value)
    head = f"{a.dtype}{list(a.shape)}"
    if not values:
        return head
    if a.size <= SHOWN_VALUES:
        return f"{head}={a.tolist()!r}"
    return f"{head}#{_sha(a)}"


def _digest(value: Any) -> str:
    a = np.asarray(value)
    return f"{a.dtype}{list(a.shape)} {_sha(a)}"


def _sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a)).hexdigest()[:16]


def _shapes(tree: Any) -> str:
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return ", ".join(
        f"{path_to_str(path)}: {np.asarray(leaf).dtype}{list(np.shape(leaf))}"
        for path, leaf in flat
    )


def declaration_changes(saved: dict[str, Any], current: dict[str, Any]) -> list[tuple[str, str]]:
    """``(part, what changed)`` for each part of :func:`declarations` that differs."""
    changes = []
    for part in PARTS:
        was, now = saved.get(part), current.get(part)
        if was == now:
            continue
        if isinstance(was, dict) and isinstance(now, dict):
            names = sorted(set(was) | set(now))
            shown = [
                f"{k}: {was.get(k, 'absent')} → {now.get(k, 'absent')}"
                for k in names
                if was.get(k) != now.get(k)
            ]
            changes.append((part, "; ".join(shown)))
        else:
            changes.append((part, _text_change(str(was), str(now))))
    return changes


def _text_change(was: str, now: str, context: int = 60) -> str:
    """``was X, now Y`` for short texts, else the two texts around their first difference."""
    if len(was) <= 2 * context and len(now) <= 2 * context:
        return f"was {was}, now {now}"
    i = next((k for k, (a, b) in enumerate(zip(was, now, strict=False)) if a != b), None)
    i = min(len(was), len(now)) if i is None else i
    start = max(0, i - context // 2)

    def cut(s: str) -> str:
        return (
            ("…" if start else "")
            + s[start : start + context]
            + ("…" if len(s) > start + context else "")
        )

    return f"was {cut(was)}, now {cut(now)}"


# ---------------------------------------------------------------- energies
def fixed_points(target: Target) -> list[Any]:
    """The positions the energy is evaluated at (module docstring)."""
    rng = np.random.default_rng(SEED)
    flat, treedef = jax.tree_util.tree_flatten_with_path(target.initial_position)
    adapter = getattr(target, "adapter", None)
    points = []
    for gain in GAINS:
        leaves = []
        for path, leaf in flat:
            shape, dtype = np.shape(leaf), np.asarray(leaf).dtype
            is_weight = adapter is not None and path_to_str(path).split("/")[0] == "net"
            scale = gain / math.sqrt(adapter.fan_in(leaf)) if is_weight else gain
            leaves.append((scale * rng.standard_normal(shape)).astype(dtype))
        points.append(jax.tree.unflatten(treedef, leaves))
    return points


def energies(target: Target, chunk: int = CHUNK) -> list[dict[str, Any]]:
    """At each of :func:`fixed_points`: ``{"energy": U, "grad_norm": ‖∇U‖,
    "projections": [∇U·v_k]}`` (float64 on the host; NaN and ±inf kept as they are); U summed
    over chunks of at most ``chunk`` training examples."""
    rng = np.random.default_rng(SEED + 1)
    dim = sum(int(np.size(a)) for a in jax.tree.leaves(target.initial_position))
    directions = rng.standard_normal((DIRECTIONS, dim))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    records = []
    for point in fixed_points(target):
        energy, grad = _energy_and_grad(target, point, chunk)
        records.append(
            {
                "energy": float(energy),
                "grad_norm": float(np.linalg.norm(grad)),
                "projections": [float(p) for p in directions @ grad],
            }
        )
    return records


def _energy_and_grad(target: Target, position: Any, chunk: int) -> tuple[float, np.ndarray]:
    """U(θ) and ∇U(θ) (flattened) in float64, as the module docstring says."""
    if not isinstance(target, CompiledModel):
        energy, grad = _value_and_grad(target, position)
        return float(energy), _flat(grad)
    n, total, grad_total = target.n, 0.0, None
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)

        def cut(a: jax.Array, start: int = start, stop: int = stop) -> jax.Array:
            return a if stop - start == n else a[start:stop]  # one chunk: no slicing program

        batch: tuple[Any, ...] = (cut(target.x_train), cut(target.y_train))
        if target.likelihood.fields:
            batch += ({k: cut(v) for k, v in target.fields_train.items()},)
        energy, grad = target.stochastic_energy_and_grad(position, batch)
        weight = (stop - start) / n
        total += weight * float(energy)
        flat = weight * _flat(grad)
        grad_total = flat if grad_total is None else grad_total + flat
    return total, grad_total


@eqx.filter_jit
def _value_and_grad(target: Target, position: Any) -> tuple[jax.Array, Any]:
    return target.energy_and_grad(position)


def _flat(tree: Any) -> np.ndarray:
    leaves = [np.asarray(a, np.float64).ravel() for a in jax.tree.leaves(tree)]
    return np.concatenate(leaves) if leaves else np.zeros(0)


def energy_changes(saved: list[dict[str, Any]], current: list[dict[str, Any]]) -> str | None:
    """How :func:`energies` records differ beyond :data:`RTOL` (``None``: they agree)."""
    if len(saved) != len(current):
        return f"{len(saved)} fixed points recorded, {len(current)} now"
    for j, (was, now) in enumerate(zip(saved, current, strict=True)):
        norm = max(abs(was["grad_norm"]), abs(now["grad_norm"]))
        pairs = [
            ("U", was["energy"], now["energy"], max(abs(was["energy"]), abs(now["energy"]), 1.0))
        ]
        pairs.append(("‖∇U‖", was["grad_norm"], now["grad_norm"], norm))
        pairs += [
            (f"∇U·v{k + 1}", a, b, norm)
            for k, (a, b) in enumerate(zip(was["projections"], now["projections"], strict=True))
        ]
        for name, a, b, scale in pairs:
            if not _close(a, b, scale):
                return f"{name} at fixed point {j + 1} was {a:.9g}, now {b:.9g}"
    return None


def _close(a: float, b: float, scale: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b) or math.isinf(scale):
        return a == b
    return abs(a - b) <= RTOL * scale

"""Shared pieces of the benchmark scripts: the digits MLP, timing, compile counting, HLO stats.

Benchmarks are never run by the test suite (docs/design.md, *Performance targets*): they time
things, tests must not.
"""

from __future__ import annotations

import collections
import contextlib
import os
import platform
import re
import time
from collections.abc import Callable, Iterator
from typing import Any
from unittest.mock import patch

import jax
import numpy as np

BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


# ---------------------------------------------------------------------------- model
def digits_data() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits: 1797 × 64 inputs scaled to [0, 1] (÷16), labels 0..9 (read from
    the bundled file, as ``load_digits`` reads it, without importing scikit-learn)."""
    from bdl.data.sklearn_datasets import bundled_path

    table = np.loadtxt(bundled_path("digits.csv.gz"), delimiter=",")
    return (np.asarray(table[:, :-1], np.float32) / 16.0, np.asarray(table[:, -1], np.int32))


def digits_mlp(batch_size: int = 32, hidden: int = 100) -> Any:
    """The benchmark model: a Flax linen MLP 64→100→100→10 (ReLU), Categorical, N(0, 1) prior."""
    import flax.linen as nn

    import bdl

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x: jax.Array) -> jax.Array:
            x = nn.relu(nn.Dense(hidden)(x))
            x = nn.relu(nn.Dense(hidden)(x))
            return nn.Dense(10)(x)

    model = bdl.Model(network=MLP(), likelihood=bdl.Categorical(), prior=bdl.Normal(1.0))
    return bdl.compile(model, digits_data(), batch_size=batch_size)


def cifar_shaped_cnn(batch_size: int = 128, n: int = 2048, width: int = 32) -> Any:
    """A CIFAR-shaped convolutional network on random data, where the gradient dominates a step.

    Inputs 32×32×3 drawn N(0, 1), labels uniform over 10 classes (fixed seed, ``n`` examples):
    the data only fix the shapes and costs. Flax linen: 3×3 convolutions with ``width``,
    2·``width`` (stride 2) and 2·``width`` (stride 2) channels, ReLU, global average pooling,
    dense 10; Categorical likelihood, N(0, 1) prior; d = 57,066 parameters at width 32.
    """
    import flax.linen as nn

    import bdl

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x: jax.Array) -> jax.Array:
            x = nn.relu(nn.Conv(width, (3, 3))(x))
            x = nn.relu(nn.Conv(2 * width, (3, 3), strides=2)(x))
            x = nn.relu(nn.Conv(2 * width, (3, 3), strides=2)(x))
            return nn.Dense(10)(x.mean(axis=(-3, -2)))

    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 32, 32, 3)).astype(np.float32)
    y = rng.integers(0, 10, size=n).astype(np.int32)
    model = bdl.Model(network=CNN(), likelihood=bdl.Categorical(), prior=bdl.Normal(1.0))
    return bdl.compile(model, (x, y), batch_size=batch_size)


# ---------------------------------------------------------------------------- environment
def environment() -> str:
    dev = jax.devices()[0]
    kind = getattr(dev, "device_kind", "") or dev.platform
    return (
        f"jax {jax.__version__} (jaxlib {jax.lib.__version__}), backend {jax.default_backend()}"
        f", device {dev} [{kind}], {jax.device_count()} device(s); python "
        f"{platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPU(s), "
        f"{load_average()}"
    )


def load_average() -> str:
    """The 1-minute load average: timings on a shared machine are only as quiet as this."""
    try:
        return f"load average {os.getloadavg()[0]:.2f}"
    except OSError:
        return "load average unknown"


# ---------------------------------------------------------------------------- timing
def time_interleaved(
    fns: dict[str, Callable[[], Any]], repeats: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and process-CPU times (s) of every ``fn()`` over ``repeats`` interleaved rounds.

    Interleaving (one call of each per round) puts every candidate under the same background
    load, so ratios between them stay meaningful on a busy machine even when absolute times
    drift. CPU time (all threads of this process) does not count time spent waiting for a core,
    so on an oversubscribed machine it is the steadier of the two.
    """
    wall: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            c0, w0 = time.process_time(), time.perf_counter()
            jax.block_until_ready(fn())
            wall[name].append(time.perf_counter() - w0)
            cpu[name].append(time.process_time() - c0)
    return wall, cpu


@contextlib.contextmanager
def recorded_calls(owner: Any, attribute: str) -> Iterator[list[tuple[tuple, dict]]]:
    """Inside the block, ``owner.attribute`` records each call's ``(args, kwargs)`` in the
    yielded list before running as before (e.g. the calls of bdl's compiled loop)."""
    calls: list[tuple[tuple, dict]] = []
    original = getattr(owner, attribute)

    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return original(*args, **kwargs)

    with patch.object(owner, attribute, recording):
        yield calls


class CompileCounter:
    """Counts XLA backend compilations (and their seconds) through ``jax.monitoring``."""

    _instance: CompileCounter | None = None

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0

    @classmethod
    def install(cls) -> CompileCounter:
        if cls._instance is None:
            cls._instance = cls()
            jax.monitoring.register_event_duration_secs_listener(cls._instance._listen)
        return cls._instance

    def _listen(self, event: str, duration: float, **_: Any) -> None:
        if event == BACKEND_COMPILE_EVENT:
            self.count += 1
            self.seconds += duration

    def snapshot(self) -> tuple[int, float]:
        return self.count, self.seconds


# ---------------------------------------------------------------------------- HLO statistics
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\s([a-z][\w\-]*)\(")
_HEADER = re.compile(r"^\s*(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_WHILE_BODY = re.compile(r"\bwhile\(.*body=%?([\w.\-]+)")
_CALLS = re.compile(
    r"(?:to_apply|calls|true_computation|false_computation|branch_computations|"
    r"condition|body)=\{?%?([\w.\-, %]+)\}?"
)
# bookkeeping instructions that run no kernel of their own
FREE_OPS = frozenset(
    {
        "parameter",
        "get-tuple-element",
        "tuple",
        "constant",
        "bitcast",
        "after-all",
        "partition-id",
        "replica-id",
    }
)


def hlo_computations(text: str) -> dict[str, list[str]]:
    """Optimised HLO text split into ``{computation name: instruction lines}``."""
    comps: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if current is None:
            m = _HEADER.match(line)
            if m and not line.lstrip().startswith(("HloModule", "//")):
                current = comps.setdefault(m.group(1), [])
            continue
        if line.strip() == "}":
            current = None
        elif _INSTR.match(line):
            current.append(line)
    return comps


def opcode(line: str) -> str:
    m = _INSTR.match(line)
    return m.group(1) if m else "?"


def while_loops(text: str) -> list[dict[str, Any]]:
    """Every ``while`` of optimised HLO text: the computation it is ``in``, its ``body``, whether
    XLA knows its trip count, the body's top-level instructions that do work by opcode (``ops``;
    ``thunks`` their number: fusions, dots, RNG, custom calls, … — on CPU each is one kernel
    launch per iteration), the instructions inside the computations they call (``fused``) and
    how many computations the body reaches (``reach``)."""
    comps = hlo_computations(text)
    loops = []
    for name, lines in comps.items():
        for line in lines:
            if not (m := _WHILE_BODY.search(line)):
                continue
            body = m.group(1)
            reach = _reachable(comps, body)
            top = collections.Counter(opcode(ln) for ln in comps.get(body, []))
            work = collections.Counter({k: v for k, v in top.items() if k not in FREE_OPS})
            loops.append(
                {
                    "in": name,
                    "body": body,
                    "known_trip_count": "known_trip_count" in line,
                    "ops": work,
                    "thunks": sum(work.values()),
                    "fused": sum(len(comps.get(c, [])) for c in reach if c != body),
                    "reach": len(reach),
                }
            )
    return loops


def loop_body_stats(text: str) -> dict[str, Any]:
    """:func:`while_loops`' entry for the ``while`` whose body reaches the most computations
    (the step loop)."""
    loops = while_loops(text)
    if not loops:
        return {"thunks": 0, "ops": collections.Counter(), "fused": 0}
    return max(loops, key=lambda loop: loop["reach"])


def _reachable(comps: dict[str, list[str]], root: str) -> set[str]:
    seen, todo = set(), [root]
    while todo:
        name = todo.pop()
        if name in seen or name not in comps:
            continue
        seen.add(name)
        for line in comps[name]:
            for m in _CALLS.finditer(line):
                todo.extend(x.strip().lstrip("%") for x in m.group(1).split(","))
    return seen

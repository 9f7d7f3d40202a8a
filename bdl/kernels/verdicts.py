"""Checker verdicts of the registered kernels: shipped with the package, or computed afresh.

Running the stationarity checker on every kernel takes about a minute, so ``bdl kernels`` shows
the verdicts shipped in ``bdl/kernels/verdicts.json`` (written by ``scripts/kernel_verdicts.py``
and kept true by ``tests/test_kernels_cli.py``); ``bdl kernels --check`` re-runs the checker. A
shipped verdict is for the registered defaults it records: when those change it is not used.

:func:`verdict` is the checker's verdict cached on disk, keyed by the kernel sources, the shipped
meta-parameters and the defaults (for tools that want a fresh verdict without paying twice).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from bdl.kernels import registry
from bdl.kernels.checker import check
from bdl.utils.cache import cache_dir

#: the shipped verdicts
SHIPPED_PATH = Path(__file__).with_name("verdicts.json")


def _source_hash() -> str:
    digest = hashlib.sha256()
    here = Path(__file__).parent
    for path in sorted([*here.glob("*.py"), *here.glob("meta_params/*.npz")]):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def verdict(name: str) -> tuple[str, list[str]]:
    """(``"exact"`` | ``"approximate"``, reasons) for kernel ``name`` with its defaults."""
    key = hashlib.sha256(
        f"{name}|{registry.defaults(name)!r}|{_source_hash()}".encode()
    ).hexdigest()[:24]
    path = cache_dir() / "verdicts" / f"{key}.json"
    if path.is_file():
        cached = json.loads(path.read_text())
        return cached["verdict"], cached["reasons"]
    result = fresh(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"verdict": result[0], "reasons": result[1]}))
    return result


def fresh(name: str) -> tuple[str, list[str]]:
    """The checker's verdict and reasons for kernel ``name`` with its registered defaults, now."""
    report = check(registry.get(name))
    return report.verdict, list(report.reasons)


def shipped(path: Path = SHIPPED_PATH) -> dict[str, dict[str, Any]]:
    """Every shipped entry by kernel name: ``{"defaults", "verdict", "reasons"}``."""
    return json.loads(path.read_text())["kernels"]


def shipped_verdict(name: str, path: Path = SHIPPED_PATH) -> tuple[str, list[str]] | None:
    """The shipped verdict of ``name``, or ``None`` when none was shipped for its current
    registered defaults."""
    entry = shipped(path).get(name)
    if entry is None or entry["defaults"] != _as_json(registry.defaults(name)):
        return None
    return entry["verdict"], list(entry["reasons"])


def write_shipped(path: Path = SHIPPED_PATH) -> dict[str, dict[str, Any]]:
    """Run the checker on every registered kernel and write the verdicts to ``path``."""
    entries = {}
    for name in registry.names():
        result, reasons = fresh(name)
        entries[name] = {
            "defaults": _as_json(registry.defaults(name)),
            "verdict": result,
            "reasons": reasons,
        }
    about = (
        "The stationarity checker's verdict on every registered kernel with its registered "
        "defaults (bdl.kernels.check). Written by scripts/kernel_verdicts.py; shown by "
        "`bdl kernels`; `bdl kernels --check` re-runs the checker."
    )
    path.write_text(json.dumps({"about": about, "kernels": entries}, indent=1) + "\n")
    return entries


def _as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))

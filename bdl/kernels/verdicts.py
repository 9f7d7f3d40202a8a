"""Checker verdicts of the registered kernels, cached on disk.

A verdict is recomputed whenever the kernel sources or the default hyper-parameters change: the
cache key hashes every source file of ``bdl/kernels``, the shipped meta-parameters and the
registered defaults.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from bdl.kernels import registry
from bdl.kernels.checker import check
from bdl.utils.cache import cache_dir


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
    report = check(registry.get(name))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"verdict": report.verdict, "reasons": report.reasons}))
    return report.verdict, report.reasons

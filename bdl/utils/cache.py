"""Where bdl keeps what it caches on disk (checker verdicts, NUTS references, XLA programs)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$BDL_CACHE_DIR``, else ``$XDG_CACHE_HOME/bdl``, else ``~/.cache/bdl``."""
    root = os.environ.get("BDL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "bdl"
    )
    return Path(root)

"""A one-line progress report (steps/s and ETA) on stderr for long runs."""

from __future__ import annotations

import sys
import time


class Progress:
    """Rewrites one stderr line; silent when disabled."""

    def __init__(self, total: int, enabled: bool, label: str = "sampling"):
        self.total, self.enabled, self.label = total, enabled, label
        self.start = time.perf_counter()
        self.last = 0.0

    def update(self, done: int, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self.last < 0.5:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        rate = done / elapsed
        eta = (self.total - done) / rate if rate > 0 else float("inf")
        sys.stderr.write(
            f"\r{self.label}: {done}/{self.total} steps  {rate:,.0f} steps/s  ETA {eta:,.0f} s   "
        )
        sys.stderr.flush()

    def close(self, done: int) -> None:
        if self.enabled:
            self.update(done, force=True)
            sys.stderr.write("\n")
            sys.stderr.flush()

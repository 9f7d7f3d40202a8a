"""A one-line progress report (rate and ETA) on stderr for long runs."""

from __future__ import annotations

import sys
import time


class Progress:
    """Rewrites one stderr line; silent when disabled.

    ``unit`` names what is counted, ``start`` how many were done before this meter started (a
    resumed run: the rate counts this session only), and ``newline`` ends every report with a
    newline instead of rewriting the line (for logs). ``update(done, suffix=...)`` shows free text
    such as the current loss after the count, kept until the next suffix.
    """

    def __init__(
        self,
        total: int,
        enabled: bool,
        label: str = "sampling",
        *,
        unit: str = "steps",
        start: int = 0,
        newline: bool = False,
    ):
        self.total, self.enabled, self.label, self.unit = total, enabled, label, unit
        self.done_before, self.newline = start, newline
        self.start = time.perf_counter()
        self.last = 0.0
        self.shown: int | None = None
        self.suffix = ""

    def update(self, done: int, force: bool = False, suffix: str | None = None) -> None:
        if not self.enabled:
            return
        if suffix is not None:
            self.suffix = f"  {suffix}" if suffix else ""
        now = time.perf_counter()
        if not force and now - self.last < 0.5:
            return
        self.last, self.shown = now, done
        rate = (done - self.done_before) / max(now - self.start, 1e-9)
        eta = (self.total - done) / rate if rate > 0 else float("inf")
        speed = f"{rate:,.0f}" if rate >= 10 else f"{rate:.3g}"
        line = (
            f"{self.label}: {done}/{self.total} {self.unit}{self.suffix}  "
            f"{speed} {self.unit}/s  ETA {eta:,.0f} s"
        )
        sys.stderr.write(line + "\n" if self.newline else "\r" + line + "   ")
        sys.stderr.flush()

    def close(self, done: int) -> None:
        if not self.enabled:
            return
        if done != self.shown:
            self.update(done, force=True)
        if not self.newline:
            sys.stderr.write("\n")
            sys.stderr.flush()

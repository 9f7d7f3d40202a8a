"""A progress report (count, rate and ETA) on stderr for long runs."""

from __future__ import annotations

import sys
import time

#: seconds between reports: rewriting one line on a terminal, whole lines in a log
TERMINAL_INTERVAL = 0.5
LOG_INTERVAL = 10.0


class Progress:
    """Reports ``label: done/total unit  rate unit/s  ETA s`` on stderr; silent when disabled.

    On a terminal one line is rewritten in place (``\\r``) at most every 0.5 s. Elsewhere (a log
    file, a pipe, a batch job) each report is a plain line, at most every 10 s, so a log gets a
    few readable lines instead of thousands of carriage returns. ``newline`` chooses the log style
    explicitly; ``None`` (the default) means "stderr is not a terminal".

    The rate, and so the ETA, is measured from the first update on: everything before it —
    compiling the loop, the first chunk's set-up — is excluded, so the first ETA is not inflated
    by a one-off cost, and the first update shows the count only. Later one-off costs (a second
    program compiled at the end of burn-in) fade out too: the rate is that of the most recent
    half of the time since the first update. ``start`` (the count
    already done before this meter, e.g. in a resumed run) is kept for the callers that pass it;
    the rate counts this session's work only either way. ``update(done, suffix=...)`` shows free
    text (e.g. the current loss) after the count, kept until the next suffix; ``force=True``
    reports even within the interval. :meth:`close` prints the final count once (unless it is
    already the last line shown) and ends the line; further calls do nothing.
    """

    def __init__(
        self,
        total: int,
        enabled: bool,
        label: str = "sampling",
        *,
        unit: str = "steps",
        start: int = 0,
        newline: bool | None = None,
        interval: float | None = None,
    ):
        self.total, self.enabled, self.label, self.unit = total, enabled, label, unit
        self.done_before = start
        self.newline = (not _stderr_is_terminal()) if newline is None else newline
        if interval is None:
            interval = LOG_INTERVAL if self.newline else TERMINAL_INTERVAL
        self.interval = interval
        self.created = time.perf_counter()
        self.last = self.created  # the first report comes one interval after construction
        self.first: tuple[float, int] | None = None  # (time, count) of the first update
        self.points: list[tuple[float, int]] = []  # (time, count) of updates since then
        self.shown: int | None = None
        self.closed = False
        self.suffix = ""

    def update(self, done: int, force: bool = False, suffix: str | None = None) -> None:
        """Record that ``done`` units are finished; report if the interval has passed."""
        if not self.enabled or self.closed:
            return
        if suffix is not None:
            self.suffix = f"  {suffix}" if suffix else ""
        now = time.perf_counter()
        if self.first is None:
            self.first = (now, done)
        self.points.append((now, done))
        if not force and now - self.last < self.interval:
            return
        self._write(done, now)

    def close(self, done: int) -> None:
        """Show the final count (once) and end the line."""
        if not self.enabled or self.closed:
            return
        if done != self.shown:
            self._write(done, time.perf_counter())
        if not self.newline and self.shown is not None:
            sys.stderr.write("\n")
            sys.stderr.flush()
        self.closed = True

    def line(self, done: int, now: float) -> str:
        """The report for ``done`` at time ``now`` (rate and ETA once they can be measured)."""
        text = f"{self.label}: {done}/{self.total} {self.unit}{self.suffix}"
        if self.first is None:
            return text
        t0, d0 = self._reference(now)
        elapsed, counted = now - t0, done - d0
        if elapsed <= 0 or counted <= 0:
            return text
        rate = counted / elapsed
        speed = f"{rate:,.0f}" if rate >= 10 else f"{rate:.3g}"
        text += f"  {speed} {self.unit}/s"
        if done < self.total:
            text += f"  ETA {(self.total - done) / rate:,.0f} s"
        return text

    def _reference(self, now: float) -> tuple[float, int]:
        """The latest update at least half the time since the first update ago (the start of
        the window the rate is measured over); older ones are dropped."""
        assert self.first is not None
        cut = now - (now - self.first[0]) / 2
        keep = 0
        for i, (t, _) in enumerate(self.points):
            if t <= cut:
                keep = i
        del self.points[:keep]
        return self.points[0] if self.points and self.points[0][0] <= cut else self.first

    def _write(self, done: int, now: float) -> None:
        self.last, self.shown = now, done
        line = self.line(done, now)
        sys.stderr.write(line + "\n" if self.newline else "\r" + line + "   ")
        sys.stderr.flush()


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stream
        return False

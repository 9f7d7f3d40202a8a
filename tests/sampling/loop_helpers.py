"""Chunking policies the sampling tests steer the loop with (the public policy protocol)."""

from bdl.sampling import FixedChunks


class StopAfter(FixedChunks):
    """Calls of ``steps`` steps; Ctrl-C (``KeyboardInterrupt``) once ``stop`` steps are done,
    between two calls, as a user's Ctrl-C would come. Counts the calls it was asked for."""

    def __init__(self, steps: int, stop: int) -> None:
        super().__init__(steps)
        self.stop, self.done, self.calls = stop, 0, 0

    def budget(self) -> int:
        if self.done >= self.stop:
            raise KeyboardInterrupt
        self.calls += 1
        return self.steps

    def record(self, steps: int, seconds: float, compiled: bool = False) -> None:
        self.done += steps


class Counted(FixedChunks):
    """Calls of ``steps`` steps, counted."""

    def __init__(self, steps: int) -> None:
        super().__init__(steps)
        self.calls = 0

    def budget(self) -> int:
        self.calls += 1
        return self.steps

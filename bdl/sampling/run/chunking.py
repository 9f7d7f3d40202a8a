"""How many steps each call of the compiled loop runs: the chunking policy.

A run is cut into calls of one compiled program (:mod:`bdl.sampling.run.program`); Python sees
Ctrl-C and writes checkpoints between calls, and the draws never depend on the cut (every key is
``fold_in(chain key, t)``). A policy says how long the next call may be, in steps
(:meth:`ChunkPolicy.budget`), and hears how long the last one took (:meth:`ChunkPolicy.record`).

* :class:`TimedChunks` (the default) sizes calls to about half a second.
* :class:`FixedChunks` runs a fixed number of steps per call (tests, reproducible cuts).

A policy object may be passed to ``bdl.sample(..., loop=bdl.sampling.LoopOptions(chunks=...))``
and reused across runs: a :class:`TimedChunks` carries what it learnt to the next run it is
given. Without one, each target keeps its own timed policy per kernel name and chain count,
forgotten with the target.
"""

from __future__ import annotations

import abc
from typing import Any

from bdl.utils.identity_map import WeakIdentityMap


class ChunkPolicy(abc.ABC):
    """Steps per call of the compiled loop."""

    @abc.abstractmethod
    def budget(self) -> int:
        """The most steps the next call may run (≥ 1).

        Returns:
            The number of steps.
        """

    def record(self, steps: int, seconds: float, compiled: bool = False) -> None:  # noqa: B027
        """A call of ``steps`` steps took ``seconds``; ``compiled``: it traced or compiled a
        program (so its time is mostly compilation's). Default: nothing to learn.

        Args:
            steps: the steps the call ran.
            seconds: its wall-clock time.
            compiled: whether it traced or compiled a program.
        """


class FixedChunks(ChunkPolicy):
    """``steps`` steps per call (fewer where a phase or a draw ends).

    Args:
        steps: the steps per call, ≥ 1.

    Raises:
        ValueError: ``steps`` is not an integer ≥ 1.
    """

    def __init__(self, steps: int) -> None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"FixedChunks(steps=...) must be an integer >= 1; got {steps!r}.")
        self.steps = steps

    def budget(self) -> int:
        return self.steps

    def __repr__(self) -> str:
        return f"FixedChunks({self.steps})"


class TimedChunks(ChunkPolicy):
    """Calls of about ``target_seconds`` (default 0.5 s): Ctrl-C, which Python sees between
    calls, answers within about a second, and a checkpoint can be written between any two calls.

    The first call is ``first`` steps (it compiles); the size then follows the measured time per
    step, growing at most fourfold per call. A call that traced or compiled a program is not
    timed (its time is compilation's, and taking it for the steps' cost would shrink the calls
    to a few steps). A call shorter than a quarter of the target may only raise the size: its
    fixed costs make its per-step time an overestimate, and on a fast accelerator every call of
    a short run is short, so without this rule each run would start again at ``first`` steps.

    Args:
        target_seconds: the wall-clock time a call aims at.
        first: the steps of the first call.
    """

    def __init__(self, target_seconds: float = 0.5, first: int = 16) -> None:
        if not target_seconds > 0:
            raise ValueError(f"TimedChunks(target_seconds=...) must be > 0; got {target_seconds}.")
        if isinstance(first, bool) or not isinstance(first, int) or first < 1:
            raise ValueError(f"TimedChunks(first=...) must be an integer >= 1; got {first!r}.")
        self.target_seconds, self.first = target_seconds, first
        self.steps = first
        self.reached = 0  # the size a later run starts at (0: none yet)

    def budget(self) -> int:
        return self.steps

    def record(self, steps: int, seconds: float, compiled: bool = False) -> None:
        if compiled:
            return
        per_step = max(seconds, 1e-9) / max(steps, 1)
        want = int(self.target_seconds / per_step)
        self.steps = max(1, min(want, 4 * max(steps, self.steps)))
        if seconds >= self.target_seconds / 4 or self.steps > self.reached:
            self.reached = self.steps

    def restart(self) -> TimedChunks:
        """This policy for a new run: it starts at the size the last run reached.

        Returns:
            A new policy with this one's settings and current size.
        """
        self.steps = self.reached or self.first
        return self

    def __repr__(self) -> str:
        return f"TimedChunks(target_seconds={self.target_seconds}, first={self.first})"


#: per target: the timed policy of each (kernel name, chain count, layout)
_POLICIES: WeakIdentityMap[dict[tuple, TimedChunks]] = WeakIdentityMap()


def default_policy(target: Any, run: tuple) -> TimedChunks:
    """The timed policy a run of ``target`` uses by default: the one its last run with the same
    ``run`` key (kernel name, chain count, layout) left, or a new one."""
    policies = _POLICIES.get(target)
    if policies is None:
        policies = {}
        _POLICIES.remember(target, policies)
    if run not in policies:
        policies[run] = TimedChunks()
    return policies[run].restart()

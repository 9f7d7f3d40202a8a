"""Warm-up's schedule: Stan's windows scaled to the burn-in, and the steps at which it adapts.

A fast window (15 % of burn-in) adapts the step size only; slow windows of doubling length (from
5 %, the last absorbing the remainder) each end with a new mass from the window's θ; a final
fast window (10 %) re-adapts the step size to the last mass (Carpenter et al. 2017, Stan's
warm-up). Within a window the step size is also re-adapted every :data:`STEP_EVERY` steps (a
start far from the posterior can be much stiffer or flatter than the posterior), and every
:data:`FINAL_STEP_EVERY` steps in the final window, whose step is frozen. The points depend on
the burn-in alone, never on how a run is cut into calls.
"""

from __future__ import annotations

import bisect
import math
from typing import NamedTuple

#: fewest burn-in steps that can adapt (Stan's smallest complete schedule is 150)
MIN_BURN_IN = 150
#: steps between step-size updates within a window (20 Hessian-vector products per 250 steps)
STEP_EVERY = 250
#: the same in the final window, whose step is frozen: more states, so that the stiffest one
#: the chain visits sets the step (20 Hessian-vector products per 50 steps over 10 % of burn-in)
FINAL_STEP_EVERY = 50


class Window(NamedTuple):
    """A warm-up window: its length in steps and whether it ends with a new mass."""

    length: int
    slow: bool


class Point(NamedTuple):
    """What warm-up does after a step: adapt (h, γ) with a new mass (``new_mass``), restart the
    window's statistics (``window_end``), and estimate the gradient noise (``final``: in the
    last window, near stationarity)."""

    new_mass: bool
    window_end: bool
    final: bool


def windows(burn_in: int) -> list[Window]:
    """Stan's warm-up schedule scaled to ``burn_in`` steps: a fast window of 15 %, slow windows
    doubling from 5 % (the last one absorbing the remainder), and a final fast window of 10 %."""
    if burn_in < MIN_BURN_IN:
        raise ValueError(
            f"burn_in={burn_in} is too short to adapt the step size and mass (at least "
            f"{MIN_BURN_IN} steps); lengthen burn_in or give the kernel a step_size."
        )
    first, last = math.ceil(0.15 * burn_in), math.ceil(0.1 * burn_in)
    middle = burn_in - first - last
    slow, size = [], max(1, math.ceil(0.05 * burn_in))
    while middle - sum(slow) >= 3 * size:
        slow.append(size)
        size *= 2
    slow.append(middle - sum(slow))
    return [Window(first, False), *(Window(s, True) for s in slow), Window(last, False)]


class Schedule:
    """The adaptation points of a burn-in of ``burn_in`` steps: every :data:`STEP_EVERY` steps
    within a window, and at its end. A point p means "adapt after the step that brings the
    count to p"."""

    def __init__(self, burn_in: int) -> None:
        self.windows = windows(burn_in)
        self.points: dict[int, Point] = {}
        start = 0
        for w, window in enumerate(self.windows):
            stop = start + window.length
            final = w == len(self.windows) - 1
            every = FINAL_STEP_EVERY if final else STEP_EVERY
            for p in range(start + every, stop, every):
                self.points[p] = Point(False, False, final)
            self.points[stop] = Point(window.slow, True, final)
            start = stop
        self._stops = sorted(self.points)
        self.end = self._stops[-1]

    def next_point(self, t: int) -> int:
        """The first adaptation point after ``t`` steps (``t`` < :attr:`end`)."""
        return self._stops[bisect.bisect_right(self._stops, t)]

"""Chunking policies: the timed policy follows the measured time per step, never a compiling
call's, and a short call cannot shrink what a later run starts at."""

import pytest

from bdl.sampling import FixedChunks, TimedChunks
from bdl.sampling.run.chunking import default_policy


def test_timed_calls_grow_fourfold_and_follow_the_time_per_step():
    policy = TimedChunks(target_seconds=0.5, first=16)
    assert policy.budget() == 16
    for steps in (16, 64, 256):  # 40 µs per step: every call far below 0.125 s
        policy.record(steps, 40e-6 * steps)
    assert policy.budget() == 1024  # fourfold growth per call
    policy.record(1024, 2.0)  # 0.5 s is 256 such steps
    assert policy.budget() == 256


def test_sizes_carry_over_from_short_calls():
    """Calls too short to be timed (a fast accelerator) still let the next run start at the
    size they reached; a slow call then shrinks it, a short one cannot, and one that compiled
    is not timed at all."""
    policy = TimedChunks()
    for steps in (16, 64, 256):
        policy.record(steps, 40e-6 * steps)
    assert policy.restart().budget() == 1024
    policy.record(1, 0.01)  # a 1-step call: 10 ms of fixed cost
    assert policy.restart().budget() == 1024
    policy.record(1024, 2.0, compiled=True)  # its time is compilation's
    assert policy.budget() == 1024 and policy.restart().budget() == 1024
    policy.record(1024, 2.0)  # a timed call: 0.5 s is 256 such steps
    assert policy.restart().budget() == 256


def test_a_target_keeps_one_policy_per_run_kind_and_forgets_it_with_the_target():
    import gc
    import weakref

    class Target:  # any object that takes a weak reference
        pass

    target = Target()
    first = default_policy(target, ("sghmc", 2, None))
    first.record(16, 1e-3)
    assert default_policy(target, ("sghmc", 2, None)) is first
    assert default_policy(target, ("sgld", 2, None)) is not first
    gone = weakref.ref(target)
    del target
    gc.collect()
    assert gone() is None


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "8"])
def test_fixed_chunks_refuse_a_size_that_is_not_a_positive_integer(bad):
    with pytest.raises(ValueError, match="FixedChunks"):
        FixedChunks(bad)

"""The loop: how a run is cut into calls never shows in the draws; Ctrl-C between calls returns
what was collected."""

import numpy as np
import pytest
from loop_helpers import StopAfter

import bdl
from bdl.sampling import FixedChunks, LoopOptions


def _run(target, loop=None, **kw):
    args = dict(num_steps=50, burn_in=10, thin=4, num_chains=3, seed=0, progress=False)
    args.update(kw)
    kernel = bdl.kernels.get("sghmc", step_size=1e-2, friction=5.0)
    return bdl.sample(target, kernel, loop=loop, **args)


@pytest.mark.parametrize("steps", [1, 3, 8, 1000])
def test_call_sizes_do_not_change_draws(target, steps):
    """Calls of one step, of part of a draw (3 of 4), of two draws or of the whole run give the
    same draws, energies and steps."""
    whole = _run(target)
    split = _run(target, LoopOptions(chunks=FixedChunks(steps)))
    np.testing.assert_array_equal(whole.positions["net"]["w"], split.positions["net"]["w"])
    np.testing.assert_array_equal(whole.info["energy"], split.info["energy"])
    np.testing.assert_array_equal(whole.steps, split.steps)


def test_interrupt_keeps_collected_draws(target):
    """Ctrl-C during sampling returns the draws of the calls already finished, equal to the
    first draws of the uninterrupted run. Calls are one draw each (4 steps), and the
    interruption comes after 10 burn-in steps and four draws."""
    policy = StopAfter(4, stop=26)
    with pytest.warns(UserWarning, match="interrupted"):
        s = _run(target, LoopOptions(chunks=policy))
    assert s.interrupted and s.num_draws == 4 and s.steps_done == 26
    full = _run(target)
    np.testing.assert_array_equal(s.positions["net"]["w"], full.positions["net"]["w"][:, :4])


def test_the_default_policy_sizes_calls_by_time_and_remembers_the_size(target):
    """Without a policy, a run's calls start small (the first compiles) and grow; the next run of
    the same target and kernel starts at the size the first reached."""
    from bdl.sampling.run.chunking import default_policy

    _run(target, num_steps=20_000, burn_in=0, thin=10, num_chains=1)
    remembered = default_policy(target, ("sghmc", 1, bdl.sampling.run.layout.resolve(target, 1)))
    assert remembered.budget() > remembered.first

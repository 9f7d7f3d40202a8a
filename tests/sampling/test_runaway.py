"""Run-away and hot chains are flagged after the run (samples.runaway, runaway_step,
runaway_reason, a RunawayWarning, bdl sample's exit 3), with SGLD on Gaussians whose discrete
stationary law is known; a chain that warms up towards π_T is not flagged; the flags are saved,
loaded and merged with the draws."""

import dataclasses
import re
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import bdl
from bdl.cli.summary import exit_status
from bdl.diagnostics.runaway import growth, quantile


def gaussian(d, sd=1.0):
    """π(θ) = N(0, sd²·I_d), full gradient (no minibatch noise)."""
    return bdl.compile(
        bdl.Potential(lambda t: -0.5 * jnp.sum(t**2) / sd**2, init=jnp.zeros(d), name="gauss")
    )


def quiet_sample(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bdl.ConvergenceWarning)
        return bdl.sample(*args, **kwargs)


def test_sgld_at_a_large_stable_step_is_flagged_hot_at_its_known_temperature():
    """SGLD's Euler step on N(0, I) has the stationary law N(0, I/(1 − h/2)): at h = 1.5 the
    configurational temperature is 4·T (sds 2× too wide); the check must measure it (± 5 of its
    standard errors, ≈ 0.1) and flag both chains from their first tested draw."""
    with pytest.warns(bdl.RunawayWarning, match="2 of 2 chains ran away or ran hot"):
        s = bdl.sample(
            gaussian(50), bdl.kernels.sgld(1.5), num_steps=1_500, burn_in=100, thin=10,
            num_chains=2, seed=0,
        )  # fmt: skip
    assert s.runaway.tolist() == [True, True] and not s.diverged.any()
    assert (s.runaway_step >= 100).all() and (s.runaway_step < 1_500).all()
    for reason in s.runaway_reason:
        measured = float(re.search(r"configurational temperature ([0-9.]+)·T", reason)[1])
        assert measured == pytest.approx(1 / (1 - 1.5 / 2), abs=0.5)
    assert "runaway=[0, 1]" in repr(s)
    assert exit_status(s) == 3


def test_sgld_at_a_small_step_is_not_flagged():
    """At h = 0.1 the configurational temperature is 1/(1 − 0.05) = 1.05·T: slightly hot by
    design, inside the tolerance; none of 4 chains is flagged."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", bdl.RunawayWarning)
        s = quiet_sample(
            gaussian(50), bdl.kernels.sgld(0.1), num_steps=3_000, burn_in=500, thin=10,
            num_chains=4, seed=1,
        )  # fmt: skip
    assert not s.runaway.any() and (s.runaway_step == -1).all()
    assert s.runaway_reason == [""] * 4


def test_a_chain_that_grows_while_finite_is_flagged_run_away(tmp_path):
    """SGLD just past its stability limit on N(0, I) (|1 − h| = 1.002): the state random-walks
    away (variance ≈ 4t per coordinate) and stays finite. Over 200 steps U/T rises to 10³ or so,
    below the far-out limit 1000·(d + 1) = 6,000 beyond which the chain would be diverged
    (tests/sampling/test_far_out.py). No divergence; the energy's growth is reported with the
    step from which it left its range."""
    with pytest.warns(bdl.RunawayWarning):
        s = bdl.sample(
            gaussian(5), bdl.kernels.sgld(2.002), num_steps=200, burn_in=20, thin=3,
            num_chains=2, seed=2,
        )  # fmt: skip
    assert not s.diverged.any() and np.isfinite(s.positions).all()
    assert s.runaway.all()
    assert all("energy kept growing" in r for r in s.runaway_reason)
    assert ((s.runaway_step > 20) & (s.runaway_step < 200)).all()
    # the flags travel with the draws: saved, loaded, merged
    loaded = bdl.load_samples(s.save(tmp_path / "draws.npz"))
    np.testing.assert_array_equal(loaded.runaway, s.runaway)
    np.testing.assert_array_equal(loaded.runaway_step, s.runaway_step)
    assert loaded.runaway_reason == s.runaway_reason
    halves = [
        dataclasses.replace(
            s, positions=s.positions[a:b], info={k: v[a:b] for k, v in s.info.items()},
            diverged=s.diverged[a:b], divergence_step=s.divergence_step[a:b],
            runaway=s.runaway[a:b], runaway_step=s.runaway_step[a:b],
            runaway_reason=s.runaway_reason[a:b], meta={**s.meta, "layout": {"chains": [a, b]}},
        )
        for a, b in ((1, 2), (0, 1))
    ]  # fmt: skip
    merged = bdl.merge_samples(halves)  # as two processes would have returned the run
    np.testing.assert_array_equal(merged.runaway, s.runaway)
    np.testing.assert_array_equal(merged.runaway_step, s.runaway_step)
    assert merged.runaway_reason == s.runaway_reason


def test_a_chain_warming_up_towards_its_typical_set_is_not_flagged():
    """From θ = 0 on N(0, 10²·I_1000) with SGLD at hλ = 5e-4 the energy U/T rises from 0 to
    about d/2 = 500 over the run, far more than a stationary chain's q·√(2d): the growth test
    alone fires. The chain is cold (configurational temperature ≈ 0.9·T, its spread still
    short of π_T's), so it is warming up, not running away, and is not flagged."""
    d = 1_000
    with warnings.catch_warnings():
        warnings.simplefilter("error", bdl.RunawayWarning)
        s = quiet_sample(
            gaussian(d, sd=10.0), bdl.kernels.sgld(0.05), num_steps=3_000, thin=25,
            num_chains=2, seed=3, init="fixed",
        )  # fmt: skip
    assert not s.runaway.any()
    energy = np.sum(np.asarray(s.positions, np.float64) ** 2, axis=-1) / 200.0
    assert all(growth(u, d, 4).flagged for u in energy)  # the gate is what spares it
    assert quantile(4) * np.sqrt(2 * d) < energy[:, -40:].mean() - energy[:, :40].mean()


def test_samples_built_by_hand_have_nothing_flagged_and_a_file_without_flags_loads(tmp_path):
    s = bdl.Samples(
        positions=np.zeros((3, 4, 2)), extra={}, info={}, steps=np.arange(4), kernel="k",
        steps_done=4,
    )  # fmt: skip
    assert s.runaway.tolist() == [False] * 3 and s.runaway_step.tolist() == [-1] * 3
    assert s.runaway_report() == "" and exit_status(s) == 0
    loaded = bdl.load_samples(s.save(tmp_path / "hand.npz"))
    assert not loaded.runaway.any() and loaded.runaway_reason == ["", "", ""]

"""The pieces of the convergence check, without sampling: the vectorised rank-normalised
diagnostics against ArviZ's, the stuck-chain rules on chains built to break them, and the
verdict's thresholds and record."""

import json

import arviz as az
import numpy as np
import pytest
from stat_utils import arviz_per_entry

from bdl.diagnostics.convergence import ESS_PER_CHAIN, RHAT_MAX, Convergence, assess
from bdl.diagnostics.rank_normalised import rank_diagnostics, within_chains
from bdl.diagnostics.stuck import SPREAD_RATIO, StuckChain, small_steps, unmoved_chains
from bdl.utils.trees import coordinate_name, parameter_names


def ar1(rng, chains, draws, k, phi):
    x = np.zeros((chains, draws, k))
    noise = rng.normal(size=(chains, draws, k))
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    return x


def cases():
    rng = np.random.default_rng(0)
    return {
        "iid": rng.normal(size=(4, 100, 5)),
        "autocorrelated": ar1(rng, 4, 301, 6, 0.9),
        "shifted chains": ar1(rng, 3, 200, 4, 0.99) + np.arange(3)[:, None, None],
        "antithetic": ar1(rng, 4, 100, 3, -0.7),
        "ties": rng.integers(0, 3, size=(4, 50, 4)).astype(float),
        "five draws": rng.normal(size=(2, 5, 3)),
        "a constant entry": np.concatenate(
            [rng.normal(size=(4, 60, 2)), np.ones((4, 60, 1))], axis=-1
        ),
        "a frozen chain": np.concatenate(
            [rng.normal(size=(3, 80, 2)), np.full((1, 80, 2), -87.3)], axis=0
        ),
    }


@pytest.mark.parametrize("name", list(cases()))
def test_rank_diagnostics_agree_with_arviz(name):
    x = cases()[name]
    rhat, bulk, tail = rank_diagnostics(x)
    expected = (arviz_per_entry(az.rhat, x, "rank"), arviz_per_entry(az.ess, x, "bulk"),
                arviz_per_entry(az.ess, x, "tail"))  # fmt: skip
    for ours, theirs in zip((rhat, bulk, tail), expected, strict=True):
        assert np.array_equal(np.isnan(ours), np.isnan(theirs))
        np.testing.assert_allclose(ours, theirs, rtol=1e-10)


def test_rank_diagnostics_of_one_chain_compare_its_halves():
    """ArviZ has no R̂ for one chain; split R̂ (Stan's) compares its two halves, which catches a
    chain still drifting."""
    rng = np.random.default_rng(1)
    steady = rng.normal(size=(1, 400, 1))
    drifting = steady + np.linspace(0, 4, 400)[None, :, None]
    assert np.isnan(rank_diagnostics(steady)[0]).all()
    assert rank_diagnostics(steady, single_chain=True)[0][0] < RHAT_MAX
    assert rank_diagnostics(drifting, single_chain=True)[0][0] > 1.5


def test_coordinate_names_are_parameter_names():
    tree = {"net": {"w": np.zeros((2, 4, 2)), "b": np.zeros((2, 3))}, "scale": np.zeros(2)}
    names = parameter_names(tree, batch_dims=1)
    leaves = [("net/b", (3,)), ("net/w", (4, 2)), ("scale", ())]
    ours = [coordinate_name(p, s, i) for p, s in leaves for i in range(int(np.prod(s)))]
    assert ours == names


# ----------------------------------------------------------------------------- stuck chains
def moving(rng, chains=4, draws=200, k=2):
    return rng.normal(size=(chains, draws, k)).astype(np.float32)


def test_a_chain_frozen_at_the_float_floor_is_named():
    """A log-scale at −87.3 (τ at the float32 floor) whose updates round away."""
    rng = np.random.default_rng(2)
    draws = moving(rng)
    draws[2, :, 1] = np.float32(-87.3)
    draws[2, ::7, 1] = np.nextafter(np.float32(-87.3), np.float32(0))  # one ulp, now and then
    stuck = unmoved_chains([draws], ["log_tau"], [0, 1, 2, 3])
    assert [s.chain for s in stuck] == [2]
    assert str(stuck[0]).startswith("chain 2: log_tau[1] has not moved (sd 3e-06 at -87.3")
    assert "float32 resolution" in stuck[0].detail


def test_the_float_floor_rule_needs_no_other_chain():
    draws = np.full((1, 50, 1), 3.0, np.float32)
    assert [s.chain for s in unmoved_chains([draws], ["x"], [5])] == [5]


def test_a_chain_pinned_next_to_moving_ones_is_named():
    """sd 1e-4 where the other chains move with sd 1: far above the float resolution, but a
    thousandth of the ground the others covered."""
    rng = np.random.default_rng(3)
    draws = moving(rng).astype(np.float64)
    draws[1, :, 0] = -87.3 + 1e-4 * rng.normal(size=200)
    stuck = unmoved_chains([draws], ["log_tau"], [0, 1, 2, 3])
    assert [s.chain for s in stuck] == [1]
    assert "log_tau[0] has not moved (sd 0.0001 at -87.3; the other chains' sd 0.9" in str(stuck[0])


def test_a_slower_chain_within_the_spread_ratio_is_not_stuck():
    rng = np.random.default_rng(4)
    draws = moving(rng)
    draws[1] *= 3 / SPREAD_RATIO  # a third of the ratio: small, but not pinned
    assert unmoved_chains([draws], ["x"], [0, 1, 2, 3]) == []


def test_the_pinned_rule_applies_only_where_asked():
    """A network's weights may differ in spread between chains (a dead unit in one of them)."""
    rng = np.random.default_rng(5)
    draws = moving(rng).astype(np.float64)
    draws[0, :, 0] = 2.0 + 1e-5 * rng.normal(size=200)
    assert unmoved_chains([draws], ["net/w"], [0, 1, 2, 3], compare=[False]) == []
    assert [s.chain for s in unmoved_chains([draws], ["hyper/s"], [0, 1, 2, 3])] == [0]


def test_one_line_per_chain_with_the_count_of_the_others():
    draws = moving(np.random.default_rng(6), k=5)
    draws[3] = 1.5
    (stuck,) = unmoved_chains([draws], ["w"], [0, 1, 2, 3])
    assert stuck.chain == 3 and stuck.detail.endswith("and 4 more coordinates")


def test_a_step_size_ten_times_below_the_others_is_named():
    h = np.array([7.2e-4, 6.8e-4, 1.2e-5, 7.5e-4])
    (slow,) = small_steps(h, [0, 1, 2, 3])
    assert slow.chain == 2
    assert slow.detail == "adapted step size 1.2e-05, 60× below the other chains' median 0.00072"
    assert small_steps(np.array([7.2e-4, 6.8e-4, 1.2e-4, 7.5e-4]), [0, 1, 2, 3]) == []  # 6×
    assert small_steps(np.array([1e-3]), [0]) == []  # nothing to compare with


# ----------------------------------------------------------------------------- the verdict
def test_the_thresholds_are_vehtari_et_als():
    assert RHAT_MAX == 1.01 and ESS_PER_CHAIN == 100


def test_a_converged_set_of_draws_passes():
    x = np.random.default_rng(7).normal(size=(4, 500, 3))
    verdict = assess(x, ["a", "b", "c"], space="parameter")
    assert verdict.ok and verdict.problems() == [] and verdict.report() == ""
    assert verdict.min_ess == 400 and verdict.max_rhat < RHAT_MAX
    assert verdict.summary().startswith("convergence: ok: max R̂")


def test_each_criterion_fails_on_its_own():
    rng = np.random.default_rng(8)
    iid = rng.normal(size=(4, 500, 2))
    apart = iid + np.array([0.0, 0.0, 0.0, 3.0])[:, None, None]
    assert not assess(apart, ["a", "b"], space="parameter").ok  # R̂
    few = assess(iid[:, :60], ["a", "b"], space="parameter")  # 240 < 400 draws in all
    assert not few.ok and "keep at least 100 draws per chain" in few.advice()
    stuck = assess(iid, ["a", "b"], space="parameter", stuck=[StuckChain(1, "a has not moved")])
    assert not stuck.ok and "chain 1: a has not moved" in stuck.report()
    three = assess(iid[:, :3], ["a", "b"], space="parameter")
    assert not three.ok and three.problems()[0].startswith("too few draws (3 per chain)")
    broken = iid.copy()
    broken[2, 7, 1] = np.inf
    nonfinite = assess(broken, ["a", "b"], space="parameter")
    assert not nonfinite.ok and nonfinite.nonfinite_at == "b"


def test_a_quantity_undefined_in_every_draw_is_left_out():
    """A Student-t mean with ν ≤ 1 is NaN by construction, not a failure."""
    x = np.random.default_rng(9).normal(size=(4, 500, 2))
    x[..., 1] = np.nan
    assert assess(x, ["a", "b"], space="function").ok


def test_the_worst_quantity_is_named():
    rng = np.random.default_rng(10)
    x = rng.normal(size=(4, 300, 3))
    x[..., 1] += np.array([0.0, 1.0, 2.0, 3.0])[:, None]
    verdict = assess(x, ["a", "log_tau", "c"], space="parameter")
    assert verdict.max_rhat_at == "log_tau" and verdict.max_rhat > 1.5
    assert "R̂" in verdict.report() and "at log_tau" in verdict.report()


def test_the_verdict_is_recorded_as_json():
    x = np.random.default_rng(11).normal(size=(1, 3, 2))  # too few draws: NaN everywhere
    verdict = assess(x, ["a", "b"], space="parameter", stuck=[StuckChain(0, "a has not moved")])
    record = json.loads(json.dumps(verdict.as_dict(), allow_nan=False))
    back = Convergence.from_dict(record)
    assert back.as_dict() == verdict.as_dict() and back.stuck == verdict.stuck
    assert np.isnan(back.max_rhat) and not back.ok


def test_within_chains_gives_each_chains_normal_scores():
    """Φ⁻¹((r − 3/8)/(n + 1/4)) of each draw's average rank among its own chain's draws, per
    entry; a chain with a non-finite draw keeps its values."""
    from scipy.special import ndtri
    from scipy.stats import rankdata

    x = np.random.default_rng(3).normal(size=(3, 9, 2))
    x[1, :4, 0] = 2.0  # ties
    x[2, 5, 1] = np.nan
    z = within_chains(x)
    for c, i in [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]:
        expected = ndtri((rankdata(x[c, :, i]) - 3 / 8) / (9 + 1 / 4))
        np.testing.assert_allclose(z[c, :, i], expected, rtol=1e-12)
    np.testing.assert_array_equal(z[2, :, 1], x[2, :, 1])


def test_modes_of_different_shapes_pass_within_chains_and_a_drifting_chain_fails():
    """Four chains of independent draws of a log predictive density piled up below 0, each chain
    in a mode of its own spread: judged within chains they pass with the tail ESS of independent
    draws (4,000 ± its sampling error of ~10 %). Centring each chain at its mean leaves the
    spreads, and the tail indicators then differ between chains: a low tail ESS for draws that
    are independent. A chain whose second half sits lower than its first still fails."""
    rng = np.random.default_rng(0)
    spreads = np.array([0.08, 0.12, 0.10, 0.15])[:, None, None]
    x = -spreads * rng.exponential(size=(4, 1_000, 3))
    rhat, bulk, tail = rank_diagnostics(within_chains(x))
    assert rhat.max() < RHAT_MAX
    assert bulk.min() > 3_000 and tail.min() > 3_000
    _, _, tail_centred = rank_diagnostics(x - x.mean(axis=1, keepdims=True))
    assert tail_centred.min() < ESS_PER_CHAIN * 4
    drifting = x.copy()
    drifting[0, 500:] -= 0.05
    assert rank_diagnostics(within_chains(drifting))[0].max() > RHAT_MAX

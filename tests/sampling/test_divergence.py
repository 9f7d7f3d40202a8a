"""Divergence is detected, stops the chain, keeps its earlier draws and is reported; the other
chains go on. Schedules that leave the legal range are rejected before any compilation."""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import bdl
from bdl.model_files import load_spec


def quartic():
    """U(θ) = θ⁴/4: from θ = 100, SGLD at h = 0.01 overflows within a few steps."""
    return bdl.compile(
        bdl.Potential(lambda t: -0.25 * jnp.sum(t["x"] ** 4), init={"x": jnp.zeros(2)})
    )


def test_one_diverging_chain_is_frozen_and_the_others_go_on():
    init = {"x": jnp.array([[100.0, 100.0], [0.1, 0.0], [0.0, -0.1], [0.2, 0.2]])}
    with pytest.warns(bdl.DivergenceWarning, match="1 of 4 chains diverged"):
        s = bdl.sample(
            quartic(), bdl.kernels.sgld(0.01), num_steps=2_000, thin=10, num_chains=4, init=init
        )
    assert s.diverged.tolist() == [True, False, False, False]
    assert 0 <= s.divergence_step[0] < 10 and (s.divergence_step[1:] == -1).all()
    assert np.all(np.isfinite(s.positions["x"]))  # no NaN reaches a draw
    assert not s.valid[0].any() and s.valid[1:].all()
    assert "diverged=[0]" in repr(s) and "chain 0 at step" in s.divergence_report()
    healthy = s.flat(healthy=True)["x"]
    assert healthy.shape == (3 * s.num_draws, 2)
    # by default the valid draws: none of the diverged chain's frozen repeats
    np.testing.assert_array_equal(s.flat()["x"], healthy)
    with pytest.warns(bdl.DivergenceWarning, match="200 draws taken after their chain diverged"):
        assert s.flat(frozen=True)["x"].shape == (4 * s.num_draws, 2)
    assert 0.5 < float(np.std(healthy)) < 1.0  # the healthy chains sample θ⁴/4 (sd ≈ 0.68)
    stats = s.to_arviz().sample_stats
    assert bool(stats["diverging"][0].all()) and not bool(stats["diverging"][1:].any())


@pytest.mark.parametrize("num_chains", [1, 3])
def test_the_divergence_step_does_not_depend_on_thinning(num_chains):
    """Between recorded draws only the draw's last step is checked; the exact step is found by
    replaying the draw, and the chain is frozen at a finite state. (At h = 0.08 the chains grow
    unstably and go far out within 12 steps, long before they would overflow.)"""
    spec = load_spec("linear_regression")
    kernel = bdl.kernels.sghmc(step_size=0.08, friction=1.0)
    runs = [
        bdl.sample(spec.compile(), kernel, num_steps=400, thin=t, num_chains=num_chains, seed=2)
        for t in (1, 37)
    ]
    assert runs[0].diverged.all() and runs[1].diverged.all()
    np.testing.assert_array_equal(runs[0].divergence_step, runs[1].divergence_step)
    assert (runs[1].divergence_step % 37 != 36).any()  # not the provisional draw ends
    for s in runs:
        assert np.all(np.isfinite(s.positions["net"]["w"]))


def test_huge_step_size_diverges_every_chain_and_keeps_earlier_draws():
    spec = load_spec("linear_regression")
    s = bdl.sample(
        spec.compile(), bdl.kernels.sgld(10.0), num_steps=300, thin=1, num_chains=3, seed=1
    )
    assert s.diverged.all()
    assert np.all(np.isfinite(s.positions["net"]["w"]))
    for chain, step in enumerate(s.divergence_step):
        assert s.valid[chain].sum() == step  # draws of steps 0 … step − 1 are kept


def test_network_returning_nan_for_some_inputs_is_detected():
    """The network is finite at the start (w = 0; a start where it is not is refused before
    sampling, tests/test_bad_input_api.py) and returns NaN on one input once w_0 > 0.5, which
    the chains pass within their first steps (w → (1, −1))."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 2)).astype(np.float32)
    y = (x @ np.array([1.0, -1.0])).astype(np.float32)
    x[7, 0] = 10.0  # the input on which the network returns NaN

    def network(params, xs):
        out = xs @ params["w"]
        return jnp.where(xs[:, 0] * params["w"][0] > 5.0, jnp.nan, out)

    model = bdl.Model(
        network=network, params={"w": jnp.zeros(2)}, likelihood=bdl.Gaussian(0.5), name="nan"
    )
    s = bdl.sample(
        bdl.compile(model, (x, y), batch_size=8),
        bdl.kernels.sghmc(3e-2, 1.0),
        num_steps=400,
        num_chains=2,
        init={"net": {"w": np.zeros(2, np.float32)}},  # w_0 = 0: finite everywhere
    )
    assert s.diverged.all()
    # the bad example is in one minibatch of every 8, once w_0 has passed 0.5 (by step 3)
    assert (s.divergence_step < 16).all()
    assert np.all(np.isfinite(s.positions["net"]["w"]))


@pytest.mark.parametrize(
    ("kernel", "word"),
    [
        (bdl.kernels.sgld(lambda t: 0.01 - 1e-4 * t), "step size"),
        (bdl.kernels.sgld(lambda t: jnp.where(t > 50, jnp.nan, 0.01)), "step size"),
    ],
)
def test_step_size_schedule_leaving_its_range_is_rejected_before_sampling(kernel, word):
    with pytest.raises(ValueError, match=rf"{word}.*step (10[01]|51)"):
        bdl.sample(quartic(), kernel, num_steps=1_000)


def test_temperature_schedule_going_negative_is_rejected():
    model = bdl.Potential(
        lambda t: -0.5 * jnp.sum(t["x"] ** 2),
        init={"x": jnp.zeros(2)},
        temperature=lambda t: 1.0 - 1e-3 * t,
    )
    with pytest.raises(ValueError, match=r"temperature.*step 100[01]"):
        bdl.sample(bdl.compile(model), bdl.kernels.sgld(0.01), num_steps=2_000)


def test_cli_sample_exits_3_naming_the_diverged_chains(tmp_path, capsys):
    from bdl.cli.main import main

    out = tmp_path / "draws.npz"
    args = ["sample", "linear_regression", "--kernel", "sgld", "--hyper", "step_size=10.0"]
    args += ["--steps", "300", "--burn-in", "0", "--thin", "1", "--chains", "2"]
    assert main([*args, "--out", str(out)]) == 3
    err = capsys.readouterr().err
    assert "2 of 2 chains diverged (chain 0 at step" in err
    assert out.is_file()  # what was collected is saved


def test_flat_keeps_a_diverged_chains_draws_before_its_divergence():
    spec = load_spec("linear_regression")
    kernel = bdl.kernels.sghmc(step_size=0.06, friction=1.0)
    with pytest.warns(bdl.DivergenceWarning):
        s = bdl.sample(spec.compile(), kernel, num_steps=400, thin=1, num_chains=2, seed=2)
    valid = s.valid
    assert s.diverged.all() and valid.any() and not valid.all()
    flat = s.flat()["net"]["w"]
    assert flat.shape[0] == int(valid.sum())
    np.testing.assert_array_equal(flat, s.positions["net"]["w"][valid])


def test_a_run_without_divergence_issues_no_divergence_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", bdl.DivergenceWarning)
        s = bdl.sample(quartic(), bdl.kernels.sgld(0.01), num_steps=200, num_chains=2)
    assert not s.diverged.any() and s.flat()["x"].shape == (2 * s.num_draws, 2)

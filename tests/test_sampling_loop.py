"""The sampling loop: shapes, thinning, determinism, chunking, interruption, ArviZ."""

import importlib

import jax.numpy as jnp
import numpy as np
import pytest

import bdl

run_module = importlib.import_module("bdl.sampling.run")


@pytest.fixture(scope="module")
def target():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 2)).astype(np.float32)
    y = (x @ np.array([1.0, -1.0]) + 0.3 * rng.normal(size=60)).astype(np.float32)
    model = bdl.Model(
        network=lambda p, x: x @ p["w"], params={"w": jnp.zeros(2)}, likelihood=bdl.Gaussian(0.3)
    )
    return bdl.compile(model, (x, y), batch_size=20)


def _run(target, **kw):
    args = dict(num_steps=50, burn_in=10, thin=4, num_chains=3, seed=0, progress=False)
    args.update(kw)
    return bdl.sample(target, bdl.kernels.get("sghmc", step_size=1e-2, friction=5.0), **args)


def test_shapes_and_steps(target):
    """(chain, draw) axes; draws taken after steps burn_in + k·thin + thin − 1."""
    s = _run(target)
    assert s.positions["net"]["w"].shape == (3, 10, 2)
    np.testing.assert_array_equal(s.steps, 10 + 4 * np.arange(10) + 3)
    assert s.info["energy"].shape == (3, 10)
    assert s.steps_done == 50 and not s.interrupted


def test_same_seed_bitwise_identical_and_seed_matters(target):
    """Same seed → identical draws; another seed → different draws."""
    a, b, c = _run(target), _run(target), _run(target, seed=1)
    np.testing.assert_array_equal(a.positions["net"]["w"], b.positions["net"]["w"])
    assert not np.array_equal(a.positions["net"]["w"], c.positions["net"]["w"])


def test_chunking_does_not_change_draws(target, monkeypatch):
    """Streaming draws to the host in small chunks gives the same draws as one chunk."""
    whole = _run(target)
    monkeypatch.setattr(run_module, "_MAX_CHUNK_DRAWS", 3)
    chunked = _run(target)
    np.testing.assert_array_equal(whole.positions["net"]["w"], chunked.positions["net"]["w"])


def test_chains_are_independent(target):
    """Chains start from different points and follow different noise."""
    w = _run(target).positions["net"]["w"]
    assert not np.allclose(w[0], w[1])


def test_interrupt_keeps_collected_draws(target, monkeypatch):
    """Ctrl-C during sampling returns the draws of the calls already finished, equal to the
    first draws of the uninterrupted run. Calls are kept short (one draw each) so that the
    interruption comes after four draws."""
    monkeypatch.setattr(run_module._ChunkSizer, "FIRST", 4)
    monkeypatch.setattr(run_module._ChunkSizer, "_reached", {})  # no earlier run's size
    monkeypatch.setattr(run_module._ChunkSizer, "record", lambda self, *timing: None)
    real = run_module._run_chunk
    calls = {"draws": 0}

    def flaky(*args):
        t, draws = int(args[4]), int(args[5])
        if t >= 10:  # sampling: four one-draw calls, then Ctrl-C
            if calls["draws"] == 4:
                raise KeyboardInterrupt
            calls["draws"] += draws
        return real(*args)

    monkeypatch.setattr(run_module, "_run_chunk", flaky)
    with pytest.warns(UserWarning, match="interrupted"):
        s = _run(target)
    assert s.interrupted and s.num_draws == 4 and s.steps_done == 26
    monkeypatch.setattr(run_module, "_run_chunk", real)
    full = _run(target)
    np.testing.assert_array_equal(s.positions["net"]["w"], full.positions["net"]["w"][:, :4])


def test_call_sizes_do_not_change_draws(target, monkeypatch):
    """Calls of one step, or of part of a draw, give the draws of calls of many draws."""
    whole = _run(target)
    monkeypatch.setattr(run_module._ChunkSizer, "FIRST", 3)  # 3 steps: draws of 4 split
    monkeypatch.setattr(run_module._ChunkSizer, "_reached", {})  # no earlier run's size
    monkeypatch.setattr(run_module._ChunkSizer, "record", lambda self, *timing: None)
    split = _run(target)
    np.testing.assert_array_equal(whole.positions["net"]["w"], split.positions["net"]["w"])
    np.testing.assert_array_equal(whole.info["energy"], split.info["energy"])
    np.testing.assert_array_equal(whole.steps, split.steps)


def test_arviz_conversion(target):
    idata = _run(target).to_arviz()
    assert idata.posterior["net.w"].shape == (3, 10, 2)
    assert "energy" in idata.sample_stats


def test_full_batch_sgld_energy_decreases_from_far_start(target):
    """Started far away, SGLD moves towards the posterior: the energy falls by orders."""
    far = {"net": {"w": jnp.array([20.0, -20.0])}}
    s = bdl.sample(
        target,
        bdl.kernels.get("sgld", step_size=1e-4),
        num_steps=400,
        thin=20,
        num_chains=1,
        init=far,
        progress=False,
    )
    energy = s.info["energy"][0]
    assert energy[-1] < 1e-2 * energy[0]


class Counting(bdl.kernels.Wrapper):
    """A kernel that counts how often its step is traced (a Python side effect at trace time)."""

    def step(self, key, state, energy_and_grad, step_size, temperature):
        TRACES.append(1)
        return self.inner.step(key, state, energy_and_grad, step_size, temperature)


TRACES: list[int] = []


def test_second_run_with_same_shapes_does_not_retrace(target):
    """A new seed, burn-in or thinning with the same number of draws reuses the compilation."""
    kernel = Counting(bdl.kernels.sgld(1e-4))
    bdl.sample(target, kernel, num_steps=40, burn_in=8, thin=4, num_chains=2, progress=False)
    first = len(TRACES)
    assert first > 0
    bdl.sample(
        target, kernel, num_steps=70, burn_in=6, thin=8, num_chains=2, seed=3, progress=False
    )
    assert len(TRACES) == first


@pytest.mark.parametrize("block", [1, 3, 4])
@pytest.mark.parametrize("bounds", [(0, 0), (0, 1), (2, 5), (0, 12), (3, 17)])
def test_loop_in_blocks_runs_every_iteration_in_order(block, bounds):
    """``fori_in_blocks`` with traced bounds is ``lax.fori_loop``: every index once, in order."""
    import jax

    from bdl.sampling.chain import fori_in_blocks

    def body(i, c):
        return c * 3 + i + 1  # order-sensitive

    lower, upper = bounds
    run = jax.jit(lambda lo, hi: fori_in_blocks(lo, hi, body, jnp.int32(0), block=block))
    want = jax.lax.fori_loop(lower, upper, body, jnp.int32(0))
    assert int(run(jnp.int32(lower), jnp.int32(upper))) == int(want)


@pytest.mark.parametrize(("thin", "adapted"), [(1, False), (3, False), (40, False), (3, True)])
def test_blocked_loop_gives_the_unblocked_draws(target, monkeypatch, thin, adapted):
    """The accelerator loop (blocks of static length, static ``thin``), run here on the CPU,
    gives the draws of the CPU loop, burn-in and warm-up included."""
    kernel = bdl.kernels.get("sghmc") if adapted else bdl.kernels.get("sghmc", step_size=1e-2)
    burn_in = 200 if adapted else 13
    args = dict(num_steps=burn_in + 9 * thin, burn_in=burn_in, thin=thin, num_chains=2, seed=3)
    plain = bdl.sample(target, kernel, progress=False, **args)
    monkeypatch.setattr(run_module, "loop_block", lambda: 4)
    blocked = bdl.sample(target, kernel, progress=False, **args)
    np.testing.assert_array_equal(plain.positions["net"]["w"], blocked.positions["net"]["w"])
    np.testing.assert_array_equal(plain.info["energy"], blocked.info["energy"])
    np.testing.assert_array_equal(plain.steps, blocked.steps)


def test_chunk_sizes_carry_over_from_short_calls(monkeypatch):
    """Calls too short to be timed (a fast accelerator) still let the next run start at the
    size they reached; a slow call then shrinks it, a short one cannot, and one that compiled
    is not timed at all."""
    sizer = run_module._ChunkSizer
    monkeypatch.setattr(sizer, "_reached", {})
    first = sizer(("run",))
    assert first.budget() == sizer.FIRST
    for steps in (16, 64, 256):  # 40 µs per step: every call far below 0.125 s
        first.record(steps, 40e-6 * steps)
    assert first.budget() == 1024  # fourfold growth per call
    second = sizer(("run",))
    assert second.budget() == 1024
    second.record(1, 0.01)  # a 1-step call: 10 ms of fixed cost
    assert sizer(("run",)).budget() == 1024
    before = second.budget()
    second.record(1024, 2.0, compiled=True)  # its time is compilation's: not a step's cost
    assert second.budget() == before and sizer(("run",)).budget() == 1024
    second.record(1024, 2.0)  # a timed call: 0.5 s is 256 such steps
    assert sizer(("run",)).budget() == 256


def test_a_call_that_compiles_does_not_shrink_later_calls(target, monkeypatch):
    """A run whose one call compiled its program (slow) leaves the next run of the same target
    in one call: the compilation's time is not taken for the steps' cost."""
    monkeypatch.setattr(run_module, "loop_block", lambda: 4)  # a static-length program per thin
    monkeypatch.setattr(run_module._ChunkSizer, "FIRST", 256)
    monkeypatch.setattr(run_module._ChunkSizer, "TARGET_SECONDS", 0.05)
    kernel = bdl.kernels.get("sghmc", step_size=1e-2, friction=5.0)
    args = dict(num_steps=200, thin=200, num_chains=2, seed=5, progress=False)
    bdl.sample(target, kernel, **args)  # compiles: far longer than 0.05 s for 200 steps
    calls = []
    original = run_module._run_chunk

    def counted(*a, **kw):
        calls.append(1)
        return original(*a, **kw)

    monkeypatch.setattr(run_module, "_run_chunk", counted)
    bdl.sample(target, kernel, **args)
    assert len(calls) == 1

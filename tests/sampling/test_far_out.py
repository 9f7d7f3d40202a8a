"""Far-out chains: a chain whose energy leaves for where no chain sampling π_T goes, every number
finite, is diverged at the step that took it there — found exactly, in burn-in, warm-up or
sampling, with a fixed or an adapted step — and named with that step and its energy, while the
other chains go on; healthy runs (fixed and adapted kernels, starts far out, cold, zero and
scheduled temperatures, a large dataset, a network from its initialisation) are not flagged."""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bdl
from bdl.kernels import Wrapper
from bdl.model_files import load_spec
from bdl.sampling import FixedChunks, LoopOptions
from bdl.sampling.run.failures import FAR_OUT_FACTOR

D = 10


def gaussian(init=None, temperature=1.0):
    """π_T = N(0, T·I_10), full gradient (no minibatch noise: the start's energy is the limit's
    reference, to the rounding of a mean of equal values)."""
    init = (lambda k: jax.random.normal(k, (D,))) if init is None else init
    return bdl.compile(
        bdl.Potential(
            lambda t: -0.5 * jnp.sum(t**2), init=init, temperature=temperature, name="gauss"
        )
    )


def run(*args, **kwargs):
    """The draws and the messages of the DivergenceWarnings issued (not the run-away check's)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = bdl.sample(*args, progress=False, **kwargs)
    diverged = [w for w in caught if issubclass(w.category, bdl.DivergenceWarning)]
    return s, [str(w.message) for w in diverged if not issubclass(w.category, bdl.RunawayWarning)]


def left_at(energy, start_energy, temperature=1.0):
    """From a chain's energies at the start of steps 0, 1, … (a run recording every step): the
    step after which its state is first beyond the far-out limit, and the energy there."""
    limit = start_energy + FAR_OUT_FACTOR * (D + 1) * temperature
    first = int(np.argmax(energy > limit))
    assert first > 0 and (energy[:first] <= limit).all()
    return first - 1, float(energy[first])


def test_psgld_thrown_far_out_is_diverged_at_the_step_it_left_in_burn_in_or_sampling():
    """pSGLD at h = 0.5: chain 0 of seed 12 goes from |θ| ≈ 3 to 136 at step 0 and to 2·10⁵ at
    step 1 (Ũ = 9,237, then 2.1·10¹⁰; the limit is 3.4 + 11,000): diverged at step 1 by the
    replay of the burn-in call that found it, or of the first draw when there is no burn-in;
    the other three chains go on."""
    target = gaussian()
    kernel = bdl.kernels.get("psgld", step_size=0.5)
    s, warned = run(target, kernel, num_steps=500, burn_in=200, thin=10, num_chains=4, seed=12)
    sampled, warned_sampling = run(target, kernel, num_steps=300, thin=10, num_chains=4, seed=12)
    trace, _ = run(target, kernel, num_steps=30, thin=1, num_chains=4, seed=12)
    energy = trace.info["energy"][0]  # Ũ at the start of step k: the state after step k − 1
    left, there = left_at(energy, energy[0])
    assert left == 1
    for found, messages in ((s, warned), (sampled, warned_sampling)):
        assert found.diverged.tolist() == [True, False, False, False]
        assert found.divergence_step.tolist() == [left, -1, -1, -1]
        assert len(messages) == 1
        assert "1 of 4 chains diverged (chain 0 at step 1)" in messages[0]
        assert f"chain 0 after step 1: Ũ = {there:.4g}" in messages[0]
    assert trace.divergence_step[0] == left
    assert not s.valid[0].any() and s.valid[1:].all()
    assert s.flat().shape == (3 * s.num_draws, D)  # the valid draws: the other chains'
    assert np.isfinite(s.positions).all()


def surge_then_freeze(t):
    """SGLD's step: 0.1, then 2.5 for 40 steps from step 600 (|1 − h| = 1.5: each step multiplies
    θ by −1.5, 1.5⁴⁰ ≈ 10⁷ in all), then 10⁻¹²: the state stays at |θ| ≈ 10⁷, U ≈ 10¹⁴, its
    updates rounded away — finite, frozen, and never flagged before."""
    return jnp.where(t < 600, 0.1, jnp.where(t < 640, 2.5, 1e-12))


def test_chains_that_leave_while_sampling_and_freeze_are_diverged_at_the_step_they_left():
    target = gaussian()
    kernel = bdl.kernels.sgld(surge_then_freeze)
    s, warned = run(target, kernel, num_steps=900, burn_in=300, thin=10, num_chains=3, seed=0)
    trace, _ = run(target, kernel, num_steps=700, thin=1, num_chains=3, seed=0)
    assert s.diverged.all() and len(warned) == 1
    for c in range(3):
        energy = trace.info["energy"][c]
        left, there = left_at(energy, energy[0])
        assert 600 <= left < 640
        assert s.divergence_step[c] == trace.divergence_step[c] == left
        assert f"chain {c} after step {left}: Ũ = {there:.4g}" in warned[0]
    assert s.valid[:, s.steps < 600].all() and not s.valid[:, s.steps >= 640].any()
    assert np.isfinite(s.positions).all()


class Surge(Wrapper):
    """The inner kernel's step, 60 times larger for 40 steps from step 300: past the stability
    limit of an adapted step (SGLD's h ≈ 0.04/λ, SGHMC's ≈ 0.25/√λ)."""

    @property
    def name(self):
        return f"surge({self.inner.name})"

    def hyper(self, step, temperature):
        h, temp = self.inner.hyper(step, temperature)
        return h * jnp.where((step >= 300) & (step < 340), 60.0, 1.0), temp


@pytest.mark.parametrize("name", ["sgld", "sghmc"])
def test_adapted_chains_that_leave_while_sampling_are_diverged_at_the_step_they_left(name):
    """After warm-up (200 steps) the frozen adapted step is made unstable for 40 steps: every
    chain leaves, found at the same step whether every draw is checked or every tenth, where
    its energy first passes the limit the warning names (warm-up starts a chain from a draw
    of the Laplace approximation, whose energy the limit is measured from)."""
    target = gaussian()
    kernel = Surge(bdl.kernels.get(name))
    args = dict(burn_in=200, num_chains=3, seed=1)
    s, warned = run(target, kernel, num_steps=500, thin=10, **args)
    trace, _ = run(target, kernel, num_steps=400, thin=1, **args)
    assert s.adapted is not None and s.diverged.all() and len(warned) == 1
    for c in range(3):
        left = int(s.divergence_step[c])
        assert 300 <= left < 340 and trace.divergence_step[c] == left
        found = re.search(rf"chain {c} after step {left}: Ũ = ([^,]+), limit ([^;)]+)", warned[0])
        limit = float(found[2])
        energy = trace.info["energy"][c]  # at the start of steps 200, 201, …
        first = left + 1 - 200
        assert found[1] == f"{energy[first]:.4g}"
        assert energy[first] > limit * (1 + 1e-3) and (energy[:first] < limit * (1 - 1e-3)).all()


@jax.custom_jvp
def outward(t):
    """U(θ) = |θ|²/2, whose declared gradient points outward beyond |θ₀| = 3 (as a model's
    wrong custom gradient would): a chain that crosses climbs the energy it cannot see."""
    return 0.5 * jnp.sum(t**2)


@outward.defjvp
def _outward_jvp(primals, tangents):
    (t,), (dt,) = primals, tangents
    return outward(t), jnp.sum(jnp.where(jnp.abs(t[0]) > 3.0, -t, t) * dt)


@pytest.mark.parametrize("name", ["psgld", "sgld"])
def test_adapted_chains_that_climb_out_are_diverged_in_warm_up_or_sampling(name):
    """Adapted pSGLD and SGLD on the outward gradient, 4 chains: those that cross |θ₀| = 3
    climb, one step at a time below warm-up's jump guard, past the far-out limit, in warm-up
    (burn-in 1,500) or after; the others go on. Every warm-up step is checked, so the steps do
    not depend on how the run is cut into calls."""
    target = bdl.compile(
        bdl.Potential(lambda t: -outward(t), init=lambda k: jax.random.normal(k, (D,)))
    )
    kernel = bdl.kernels.get(name)
    args = dict(num_steps=2_000, burn_in=1_500, thin=10, num_chains=4, seed=0)
    s, warned = run(target, kernel, **args)
    cut, _ = run(target, kernel, **args, loop=LoopOptions(chunks=FixedChunks(37)))
    assert s.diverged.any() and not s.diverged.all()
    np.testing.assert_array_equal(s.divergence_step, cut.divergence_step)
    assert (s.divergence_step[s.diverged] < 1_500).any()  # in warm-up
    for c in np.flatnonzero(s.diverged):
        assert f"chain {c} after step {s.divergence_step[c]}: Ũ = " in warned[0]


def test_a_far_out_run_resumed_from_its_checkpoint_is_the_uninterrupted_run(tmp_path):
    """The far-out limit travels in the checkpoint: a run cut in two gives the flags, steps and
    draws of one run."""
    target = gaussian()
    kernel = bdl.kernels.get("psgld", step_size=0.5)
    args = dict(burn_in=100, thin=10, num_chains=4, seed=12)
    whole, _ = run(target, kernel, num_steps=500, **args)
    run(target, kernel, num_steps=250, checkpoint=tmp_path, **args)
    resumed, _ = run(target, kernel, resume=tmp_path, num_steps=500)
    np.testing.assert_array_equal(resumed.diverged, whole.diverged)
    np.testing.assert_array_equal(resumed.divergence_step, whole.divergence_step)
    np.testing.assert_array_equal(resumed.positions, whole.positions)


def big_logistic(n=100_000, d=D, batch=100):
    """A logistic regression on n = 10⁵ examples, minibatches of 100: Ũ ≈ 1.4·10⁵ at a prior
    draw and 4·10⁴ at the mode, where its sd across minibatches is 5·10³, half the thermal
    margin 1000·(d + 1)·T = 1.2·10⁴: from the mode, the noise allowance keeps the chains in."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (rng.random(n) < 1 / (1 + np.exp(-(x @ rng.normal(size=d))))).astype(np.int32)
    model = bdl.Model(
        network=lambda p, x: x @ p["w"] + p["b"], params={"w": jnp.zeros(d), "b": jnp.zeros(())},
        likelihood=bdl.Bernoulli(), prior=bdl.Normal(1.0), name="big_logistic",
    )  # fmt: skip
    return bdl.compile(model, (x, y), batch_size=batch)


def from_far_out():
    return gaussian(init=jnp.full(D, 300.0))  # U = 4.5·10⁵ at the start


def at_the_mode(temperature):
    return lambda: gaussian(init=jnp.zeros(D), temperature=temperature)


def annealed(t):
    return 1.0 + 99.0 * jnp.exp(-t / 200.0)


def cycled(t):
    return 1e-4 + (1 - 1e-4) * 0.5 * (1 + jnp.cos(jnp.pi * t / 250.0))


def model(name):
    return lambda: load_spec(name).compile()


FIXED = {"init": "fixed"}
#: name: (target, kernel name and settings, run settings)
HEALTHY = {
    "sgld": (gaussian, ("sgld", {"step_size": 0.1}), {}),
    "sghmc": (gaussian, ("sghmc", {"step_size": 0.1, "friction": 1.0}), {}),
    "adapted sgld": (gaussian, ("sgld", {}), {}),
    "adapted sghmc": (gaussian, ("sghmc", {}), {}),
    "adapted psgld": (gaussian, ("psgld", {}), {}),
    "sgld from far out": (from_far_out, ("sgld", {"step_size": 0.1}), FIXED),
    "sghmc from far out": (from_far_out, ("sghmc", {"step_size": 0.1, "friction": 1.0}), FIXED),
    "cold T = 1e-4 from the mode": (
        at_the_mode(1e-4),
        ("sghmc", {"step_size": 0.1, "friction": 1.0}),
        FIXED,
    ),
    "T = 0": (at_the_mode(0.0), ("sgld", {"step_size": 0.1}), FIXED),
    "annealed T from 100 to 1": (at_the_mode(annealed), ("sgld", {"step_size": 0.1}), FIXED),
    "T cycled between 1 and 1e-4 from the mode": (
        at_the_mode(cycled),
        ("sghmc", {"step_size": 0.1, "friction": 1.0}),
        FIXED,
    ),
    "linear regression, sgld": (model("linear_regression"), ("sgld", {"step_size": 1e-3}), {}),
    "linear regression, adapted sghmc": (
        model("linear_regression"),
        ("sghmc", {}),
        {"num_steps": 800, "burn_in": 300},
    ),
    "digits MLP from its initialisation": (
        model("mlp_digits"),
        ("sgld", {"step_size": 1e-4}),
        {"num_steps": 600, "burn_in": 100},
    ),
    "n = 1e5 from its start": (big_logistic, ("sgld", {"step_size": 1e-5}), {}),
    "n = 1e5 from the mode": (big_logistic, ("sgld", {"step_size": 1e-8}), {"init": "map"}),
}


@pytest.mark.parametrize("case", list(HEALTHY))
def test_healthy_runs_are_not_flagged(case):
    target, (name, hyper), extra = HEALTHY[case]
    args = dict(num_steps=1_500, burn_in=500, thin=10, num_chains=4, seed=0) | extra
    s, warned = run(target(), bdl.kernels.get(name, **hyper), **args)
    assert not s.diverged.any(), warned
    assert warned == []

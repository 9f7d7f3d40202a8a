"""Wenzel et al. (2020) symplectic-Euler Langevin: SGD limit, schedules, one draw per cycle,
checker verdicts between preconditioner updates."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import bdl
from bdl.data import breast_cancer
from bdl.kernels import checker
from bdl.kernels import preconditioners as pc
from bdl.kernels.sghmc import sghmc
from bdl.kernels.wenzel import wenzel


def test_zero_temperature_flat_unpreconditioned_is_optax_sgd():
    """T = 0, C(t) = 1, M = I: Algorithm 1 is optax.sgd(ℓ, momentum=β) on the mean loss (App. C)."""
    with jax.enable_x64(True):
        model = bdl.Model(
            network=lambda p, x: x @ p["w"] + p["b"],
            params={"w": jnp.zeros(30), "b": jnp.zeros(())},
            likelihood=bdl.Bernoulli(),
            prior=bdl.Normal(1.0),
            temperature=0.0,
        )
        target = bdl.compile(model, breast_cancer(), batch_size=32)
        lr, beta = 0.05, 0.9
        kernel = bdl.kernels.get(
            "wenzel",
            learning_rate=lr,
            momentum=beta,
            schedule="flat",
            preconditioner=pc.identity(),
            init_momentum="zero",
        ).bind(target)
        assert np.isclose(kernel.inner.step_size, np.sqrt(lr / target.n))
        assert np.isclose(kernel.inner.recipe.friction.value, (1 - beta) * np.sqrt(target.n / lr))
        assert kernel.epoch_length == target.num_batches

        theta = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64) + 0.1, target.initial_position)
        state = kernel.init(theta, jax.random.key(0))
        opt = optax.sgd(lr, momentum=beta)
        params, opt_state = theta, opt.init(theta)
        stream = target.init_batches(jax.random.key(1))

        @jax.jit
        def both(t, state, params, opt_state, stream):
            batch, stream = target.next_batch(stream, t)

            def grad_fn(p):
                return target.stochastic_energy_and_grad(p, batch)

            h, temperature = kernel.hyper(t, target.temperature(t))
            state, _ = kernel.step(
                jax.random.fold_in(jax.random.key(2), t), state, grad_fn, h, temperature
            )
            _, grad = grad_fn(params)
            updates, opt_state = opt.update(jax.tree.map(lambda g: g / target.n, grad), opt_state)
            return state, optax.apply_updates(params, updates), opt_state, stream

        for t in range(40):
            state, params, opt_state, stream = both(jnp.int32(t), state, params, opt_state, stream)
            for a, b in zip(
                jax.tree.leaves(state.z["theta"]), jax.tree.leaves(params), strict=True
            ):
                np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_schedules_cycles_and_ramp():
    """E = 4 steps/epoch, L = 2, S = 4, R = 2: C = 1 before step 16, then cosine cycles of 8;
    T ramps linearly from step 8 to 1 at step 15; samples at steps 23, 31, 39."""
    k = wenzel(learning_rate=0.1, momentum=0.9, cycle_length=2, sampling_start=4, epoch_length=4)
    k = k.bind(types.SimpleNamespace(n=100))
    t = jnp.arange(40)
    h, temp = jax.vmap(lambda s: k.hyper(s, jnp.asarray(2.0)))(t)
    c = np.asarray(h) / k.inner.step_size
    np.testing.assert_allclose(c[:16], 1.0)
    np.testing.assert_allclose(c[16:24], 0.5 * (np.cos(np.pi * np.arange(8) / 8) + 1), rtol=1e-5)
    np.testing.assert_allclose(c[24:32], c[16:24], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(temp)[:8], 0.0)
    np.testing.assert_allclose(np.asarray(temp)[8:16], 2.0 * np.arange(1, 9) / 8, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(temp)[16:], 2.0)
    draws = np.flatnonzero(np.asarray(jax.vmap(k.is_sample)(t)))
    np.testing.assert_array_equal(draws, [23, 31, 39])
    assert k.num_samples(40) == 3 and k.cycle_steps == 8


def test_one_draw_per_cycle_in_sample():
    """bdl.sample with thin=1 keeps exactly the last step of each cycle; momentum and the
    layerwise mass are collected for temperature diagnostics."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 2)).astype(np.float32)
    y = (x @ np.array([1.0, -1.0]) + 0.3 * rng.normal(size=60)).astype(np.float32)
    model = bdl.Model(
        network=lambda p, x: x @ p["w"] + p["b"],
        params={"w": jnp.zeros(2), "b": jnp.zeros(())},
        likelihood=bdl.Gaussian(0.3),
    )
    target = bdl.compile(model, (x, y), batch_size=20)  # 3 steps per epoch
    kernel = wenzel(
        learning_rate=0.05, momentum=0.9, cycle_length=2, sampling_start=2, collect_momentum=True
    )
    samples = bdl.sample(target, kernel, num_steps=45, num_chains=2, seed=0, progress=False)
    bound = kernel.bind(target)
    expected = np.arange(6 + 6 - 1, 45, 6)  # cycles of 6 steps from step 6
    np.testing.assert_array_equal(samples.steps, expected)
    assert len(expected) == bound.num_samples(45) == 6
    assert samples.positions["net"]["w"].shape == (2, 6, 2)
    assert samples.extra["momentum"]["net"]["w"].shape == (2, 6, 2)
    assert samples.extra["mass"]["net"]["b"].shape == (2, 6)
    assert np.all(np.isfinite(samples.info["kinetic_energy"]))
    assert np.any(samples.extra["mass"]["net"]["b"] != 1.0)  # M was re-estimated


def _warm_mass(kernel):
    """The mass after the checker's three warm-up steps on its test energy (not the identity)."""
    with jax.enable_x64(True):
        theta = {"a": jnp.array([0.3, -0.5]), "b": jnp.array([0.7])}
        state = kernel.init(theta, jax.random.key(0))
        step = jax.jit(
            lambda k, s: kernel.step(k, s, jax.value_and_grad(checker.test_energy), 1e-3, 0.7)[0]
        )
        for i in range(3):
            state = step(jax.random.key(i), state)
        return jax.tree.map(float, state.history.mass)


@pytest.mark.parametrize(
    "kernel",
    [
        wenzel(preconditioner=pc.layerwise(update_every=3, num_gradients=2)),
        sghmc(1e-2, preconditioner=pc.layerwise(update_every=3, num_gradients=2)),
    ],
    ids=["wenzel", "sghmc+semi-adaptive-layerwise"],
)
def test_exact_between_preconditioner_updates(kernel):
    """M re-estimated at the end of the checker's warm-up (every 3 steps), then constant during
    the checked step: exact, with a non-identity M."""
    mass = _warm_mass(kernel)
    assert not np.isclose(mass["a"], mass["b"])
    report = bdl.kernels.check(kernel, num_states=2)
    assert report.exact, str(report)


def test_bad_hyper_parameters():
    with pytest.raises(ValueError, match="cycle_length"):
        wenzel(cycle_length=0)
    with pytest.raises(ValueError, match="schedule"):
        wenzel(schedule="linear")
    with pytest.raises(ValueError, match="epoch_length"):
        wenzel().bind(types.SimpleNamespace(n=10))
    with pytest.raises(ValueError, match="preconditioner"):
        sghmc(0.1, preconditioner="layerwise")

"""At T = 0, SGHMC(ℓ, β) is optax.sgd(ℓ, momentum=β) on the mean minibatch loss, step for step."""

import jax
import jax.numpy as jnp
import numpy as np
import optax

import bdl
from bdl.data import breast_cancer


def test_sghmc_learning_rate_parameterisation_matches_optax_sgd():
    with jax.enable_x64(True):
        data = breast_cancer()
        model = bdl.Model(
            network=lambda p, x: x @ p["w"] + p["b"],
            params={"w": jnp.zeros(30), "b": jnp.zeros(())},
            likelihood=bdl.Bernoulli(),
            prior=bdl.Normal(1.0),
            temperature=0.0,
        )
        target = bdl.compile(model, data, batch_size=32)
        lr, beta = 0.05, 0.9
        kernel = bdl.kernels.get("sghmc", learning_rate=lr, momentum=beta).bind(target)
        assert np.isclose(kernel.step_size, np.sqrt(lr / target.n))
        assert np.isclose(kernel.recipe.friction.value, (1 - beta) * np.sqrt(target.n / lr))

        theta = jax.tree.map(lambda a: a + 0.1, target.initial_position)
        theta = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), theta)
        state = kernel.init(theta, jax.random.key(0))
        opt = optax.sgd(lr, momentum=beta)
        params, opt_state = theta, opt.init(theta)
        stream = target.init_batches(jax.random.key(1))
        h = kernel.step_size_at(0)

        @jax.jit
        def both(t, state, params, opt_state, stream):
            batch, stream = target.next_batch(stream, t)

            def grad_fn(p):
                return target.stochastic_energy_and_grad(p, batch)

            state, _ = kernel.step(jax.random.key(0), state, grad_fn, h, 0.0)
            _, grad = grad_fn(params)
            updates, opt_state = opt.update(jax.tree.map(lambda g: g / target.n, grad), opt_state)
            return state, optax.apply_updates(params, updates), opt_state, stream

        for t in range(50):
            state, params, opt_state, stream = both(jnp.int32(t), state, params, opt_state, stream)
            for a, b in zip(
                jax.tree.leaves(state.z["theta"]), jax.tree.leaves(params), strict=True
            ):
                np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)

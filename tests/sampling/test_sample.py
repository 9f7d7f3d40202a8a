"""``bdl.sample``, the entry point: shapes and thinning, determinism, independent chains,
ArviZ, and one compilation for runs of the same shapes."""

import jax.numpy as jnp
import numpy as np

import bdl


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


def test_chains_are_independent(target):
    """Chains start from different points and follow different noise."""
    w = _run(target).positions["net"]["w"]
    assert not np.allclose(w[0], w[1])


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

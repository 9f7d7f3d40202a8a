"""float64 as a mode (docs/precision.md): JAX's 64-bit mode, read by ``bdl.compile``.

The runs in float64 happen in processes of their own (tests/float64_run.py), since the mode is
global; float32 stays the default here. In float32, a start or a divergence where the energy is
NaN only because of float32 rounding says so and how to switch; a target compiled in one
precision and run, or resumed, in the other is refused before anything compiles.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from bad_input import check

import bdl

RUNNER = Path(__file__).with_name("float64_run.py")
N = 40
GRID = np.linspace(0.0, 1.0, N)[:, None]  # NumPy float64: float32 or float64 when used
INDEX = np.arange(float(N))[:, None]  # each row reads one grid point
Y = np.sin(6 * GRID[:, 0])


def _run(*args: str, timeout: float = 1_800) -> list[str]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("JAX_ENABLE_X64", None)  # the script switches the mode on itself
    out = subprocess.run(
        [sys.executable, str(RUNNER), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stdout[-3_000:] + out.stderr[-6_000:]
    return [line for line in out.stdout.splitlines() if line.startswith("ok ")]


def _gp(log_lengthscale=None, jitter=1e-10):
    """A latent Gaussian process on 40 points, f = chol(K + jitter·I) z; its lengthscale is
    0.5, or sampled (``log_lengthscale``: its declared start)."""

    def network(p, x):
        g = jnp.asarray(GRID, x.dtype)
        ell = 0.5 if log_lengthscale is None else jnp.exp(p["log_ell"])
        k = jnp.exp(-0.5 * (g - g.T) ** 2 / ell**2) + jitter * jnp.eye(N, dtype=g.dtype)
        return (jnp.linalg.cholesky(k) @ p["z"])[x[:, 0].astype(jnp.int32)]

    params = {"z": np.zeros(N)}
    prior = bdl.Normal(1.0)
    if log_lengthscale is not None:
        params["log_ell"] = np.array(log_lengthscale)
        prior = bdl.ByPath({"log_ell": bdl.Normal(0.5, loc=1.0)}, default=bdl.Normal(1.0))
    model = bdl.Model(network, bdl.Gaussian(0.3), params=params, prior=prior)
    return bdl.compile(model, (INDEX, Y), check_gradient=False)


def _regression():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 2))
    y = x @ np.array([1.0, -1.0]) + 0.1 * rng.normal(size=32)
    model = bdl.Model(lambda p, x: x @ p["w"], bdl.Gaussian(0.1), params={"w": np.zeros(2)})
    return bdl.compile(model, (x, y), batch_size=8)


def test_float32_is_the_default():
    compiled = _regression()
    assert not jax.config.jax_enable_x64
    assert compiled.x_train.dtype == jnp.float32 and compiled.y_train.dtype == jnp.float32
    assert compiled.initial_position["net"]["w"].dtype == jnp.float32
    samples = bdl.sample(
        compiled, bdl.kernels.sgld(1e-4), num_steps=20, thin=10, num_chains=2, progress=False
    )
    assert samples.positions["net"]["w"].dtype == jnp.float32


def test_a_float64_run_end_to_end(tmp_path):
    """Warm-up, the loop, a checkpoint resumed, .npz and .nc saved and loaded, the report and
    the predictive, all float64 and finite; and a Gaussian process whose float32 Cholesky
    fails (the next test) samples in float64."""
    lines = _run("workflow", str(tmp_path))
    assert [line.split()[1] for line in lines] == [
        "warm-up", "resume", "save/load", "save/load", "report", "predictive", "gp",
    ]  # fmt: skip


@pytest.mark.slow
def test_every_kernel_and_wrapper_runs_in_float64():
    """Every registered kernel at its defaults (warm-up adapts the step where it has none;
    cyclical with cycles that fit the run), and
    a step-size schedule, both preconditioners, Entropy-MCMC, cyclical and Gibbs wrappers."""
    wrappers = ["sgld+schedule", "sgld+rmsprop", "sghmc+layerwise", "entropy(sghmc)"]
    wrappers += ["cyclical(sgld)", "gibbs(sghmc)"]
    names = [*bdl.kernels.names(), *wrappers]
    lines = _run("kernels", *names)
    assert [line.split()[1] for line in lines] == names


def test_a_start_that_fails_only_in_float32_says_how_to_switch():
    compiled = _gp()
    with pytest.raises(ValueError) as info:
        bdl.sample(compiled, bdl.kernels.sgld(1e-4), num_steps=10, num_chains=2, progress=False)
    message = str(info.value)
    assert "cannot start" in message
    assert "in float64 the energy and its gradient are finite here" in message
    assert "JAX_ENABLE_X64=1" in message and "jax_enable_x64" in message


def test_a_start_that_fails_in_float64_too_says_nothing_of_float64():
    compiled = _gp(jitter=-1.0)  # indefinite whatever the precision
    with pytest.raises(ValueError) as info:
        bdl.sample(compiled, bdl.kernels.sgld(1e-4), num_steps=10, num_chains=1, progress=False)
    assert "cannot start" in str(info.value) and "float64" not in str(info.value)


def test_a_divergence_that_float32_causes_says_so():
    """The lengthscale starts where float32 can factor K (e^-3) and the prior pulls it up to
    where it cannot: the chains diverge at their first steps, where float64 is finite."""
    compiled = _gp(log_lengthscale=-3.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        samples = bdl.sample(
            compiled,
            bdl.kernels.sgld(1e-3),
            num_steps=100,
            thin=10,
            num_chains=2,
            init="fixed",
            progress=False,
        )
    assert np.any(samples.diverged)
    texts = [str(w.message) for w in caught if issubclass(w.category, bdl.DivergenceWarning)]
    precision = [t for t in texts if "in float64 the energy and its gradient are finite here" in t]
    assert precision, texts
    assert "diverged at step" in precision[0] and "JAX_ENABLE_X64=1" in precision[0]


@pytest.fixture(scope="module")
def float32_model():
    return _regression()


def test_a_target_compiled_in_float32_is_refused_in_64_bit_mode(float32_model):
    kernel = bdl.kernels.sgld(1e-3)

    def call(_):
        with jax.enable_x64(True):
            bdl.sample(float32_model, kernel, num_steps=10, progress=False)

    check(call, ValueError, "the target was compiled in float32, but JAX's 64-bit mode is on", None)


def test_a_float32_checkpoint_is_not_resumed_in_float64(tmp_path, float32_model):
    kernel = bdl.kernels.sgld(1e-4)
    bdl.sample(float32_model, kernel, num_steps=20, thin=10, checkpoint=tmp_path, progress=False)
    with jax.enable_x64(True):
        wide = _regression()
        assert wide.x_train.dtype == jnp.float64
        with pytest.raises(ValueError, match="written in float32 and this process runs in float64"):
            bdl.sample(wide, kernel, num_steps=30, resume=tmp_path, progress=False)
    assert not jax.config.jax_enable_x64

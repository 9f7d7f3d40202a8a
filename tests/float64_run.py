"""A float64 run end to end, in a process of its own (JAX's 64-bit mode is global): run by
tests/test_float64.py as ``python tests/float64_run.py PART [NAME ...] [DIR]``, it switches the
mode on before anything of bdl is imported and asserts that every array it produces is float64
and finite; it prints one ``ok`` line per step.

Parts:

* ``kernels NAME ...``: each registered kernel by name at its defaults (warm-up adapts the
  step size where the kernel has none; cyclical's cycles shortened to fit the run), and the
  names of :func:`wrappers`: a step-size schedule, the RMSprop and layerwise preconditioners,
  Entropy-MCMC's augmentation, cyclical and Gibbs wrappers.
* ``workflow DIR``: warm-up, the chunked loop, a checkpoint and its resumption, save and load
  (.npz and .nc), the run report, predictions; then a Gaussian-process model whose float32
  Cholesky fails runs in float64.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro.distributions as dist  # noqa: E402

import bdl  # noqa: E402
from bdl.kernels import preconditioners  # noqa: E402

warnings.simplefilter("ignore")  # convergence of these short runs is not the point


def float64(tree, what: str) -> None:
    """Every floating-point leaf of ``tree`` is float64 and finite."""
    for leaf in jax.tree.leaves(tree):
        if jnp.issubdtype(leaf.dtype, jnp.floating):
            assert leaf.dtype == jnp.float64, f"{what}: {leaf.dtype}"
            assert np.all(np.isfinite(np.asarray(leaf))), f"{what}: not finite"


def regression() -> bdl.CompiledModel:
    """A linear regression with a learned noise scale and a conjugate hierarchical precision
    (so that the Gibbs wrapper has something to draw), on 48 examples in minibatches of 16."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(48, 3))
    y = x @ np.array([0.5, -0.3, 0.2]) + 0.1 + 0.3 * rng.normal(size=48)
    prior = bdl.ByPath(
        {"w": bdl.HierarchicalNormal(precision=dist.Gamma(2.0, 2.0), name="precision")},
        default=bdl.Normal(1.0),
    )
    model = bdl.Model(
        lambda p, x: x @ p["w"] + p["b"],
        bdl.Gaussian(scale=None),
        params={"w": np.zeros(3), "b": np.zeros(())},
        prior=prior,
    )
    compiled = bdl.compile(model, (x, y, x[:8], y[:8]), batch_size=16)
    float64(compiled.initial_position, "initial position")
    float64((compiled.x_train, compiled.y_train, compiled.x_test), "data")
    return compiled


def wrappers() -> dict:
    """Kernels built from wrappers and options rather than by name."""
    decay = bdl.schedules.polynomial_decay(1e-3, 1e-4, 0.55, 300)
    return {
        "sgld+schedule": bdl.kernels.sgld(decay),
        "sgld+rmsprop": bdl.kernels.sgld(1e-4, preconditioner=preconditioners.rmsprop()),
        "sghmc+layerwise": bdl.kernels.sghmc(
            learning_rate=1e-3, momentum=0.9, preconditioner=preconditioners.layerwise()
        ),
        "entropy(sghmc)": bdl.kernels.entropy("sghmc", eta=1.0, step_size=1e-2, friction=10.0),
        "cyclical(sgld)": bdl.kernels.cyclical("sgld", step_size=1e-3, cycle_length=50),
        "gibbs(sghmc)": bdl.kernels.gibbs("sghmc", every=5, step_size=1e-2, friction=10.0),
    }


def kernels(names: list[str]) -> None:
    compiled = regression()
    built = wrappers()
    for name in names:
        # cyclical collects in the sampling part of each cycle: cycles that fit the run
        hyper = {"cycle_length": 50} if name == "cyclical" else {}
        kernel = built[name] if name in built else bdl.kernels.get(name, **hyper)
        samples = bdl.sample(
            compiled, kernel, num_steps=300, burn_in=150, thin=5, num_chains=2, progress=False
        )
        float64(samples.positions, name)
        report = samples.divergence_report() if np.any(samples.diverged) else ""
        assert samples.num_draws > 0 and np.any(samples.valid), f"{name}: no valid draw {report}"
        print("ok", name, samples.num_draws, flush=True)


def workflow(directory: Path) -> None:
    compiled = regression()
    kernel = bdl.kernels.get("sghmc")  # step size, friction and mass adapted in warm-up
    run = {"burn_in": 150, "thin": 5, "num_chains": 2, "progress": False}
    first = bdl.sample(compiled, kernel, num_steps=250, checkpoint=directory / "run", **run)
    float64(first.positions, "first run")
    float64({k: v for k, v in first.adapted.items() if v.dtype != bool}, "adapted")
    print("ok warm-up", first.num_draws, flush=True)
    resumed = bdl.sample(compiled, kernel, num_steps=300, resume=directory / "run", progress=False)
    float64(resumed.positions, "resumed run")
    assert resumed.num_draws == 30, resumed.num_draws
    np.testing.assert_array_equal(  # the draws before the checkpoint are the first run's
        resumed.positions["net"]["w"][:, : first.num_draws], first.positions["net"]["w"]
    )
    print("ok resume", resumed.num_draws, flush=True)
    for suffix in ("npz", "nc"):
        loaded = bdl.load_samples(resumed.save(directory / f"draws.{suffix}"))
        float64(loaded.positions, f"loaded .{suffix}")
        np.testing.assert_array_equal(loaded.positions["net"]["w"], resumed.positions["net"]["w"])
        print("ok save/load", suffix, flush=True)
    resumed.report(directory / "report.html", compiled)
    assert (directory / "report.html").stat().st_size > 10_000
    print("ok report", flush=True)
    predictive = compiled.predictive(resumed, compiled.x_test)
    float64((predictive.mean, predictive.sd), "predictive")
    print("ok predictive", flush=True)


def gp() -> None:
    """A latent Gaussian process with a 1e-10 jitter: the Cholesky factor of its covariance
    does not exist in float32 and does in float64."""
    grid = np.linspace(0.0, 1.0, 40)[:, None]

    def network(p, x):
        g = jnp.asarray(grid, x.dtype)
        k = jnp.exp(-0.5 * (g - g.T) ** 2 / 0.5**2) + 1e-10 * jnp.eye(40, dtype=g.dtype)
        return (jnp.linalg.cholesky(k) @ p["z"])[x[:, 0].astype(jnp.int32)]

    y = np.sin(6 * grid[:, 0])
    model = bdl.Model(network, bdl.Gaussian(0.1), params={"z": np.zeros(40)})
    compiled = bdl.compile(model, (np.arange(40.0)[:, None], y))
    kernel = bdl.kernels.get("sgld", step_size=1e-4)
    samples = bdl.sample(compiled, kernel, num_steps=100, thin=10, num_chains=2, progress=False)
    float64(samples.positions, "gp")
    assert np.all(samples.valid)
    print("ok gp", flush=True)


if __name__ == "__main__":
    part, rest = sys.argv[1], sys.argv[2:]
    if part == "kernels":
        kernels(rest)
    else:
        workflow(Path(rest[0]))
        gp()

"""Runs of ``bdl.sample`` on several CPU devices, for tests/test_sharding.py.

A fresh process is needed for each device count (XLA fixes it at start-up), so the test runs
this file as a script:

    python sharding_runs.py devices OUT            # 4 host devices: the default suite's runs
    python sharding_runs.py more-devices OUT       # 4 host devices: the slow tests' runs
    python sharding_runs.py process I PORT OUT     # process I of 2 (jax.distributed), 2 devices

Each run's ``Samples`` is saved to OUT as ``NAME.npz``; errors as ``errors.json``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

MODE = sys.argv[1]
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=" + (
    "2" if MODE == "process" else "4"
)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import bdl  # noqa: E402

CHAINS = 4
RUN = dict(num_steps=200, burn_in=40, thin=8, num_chains=CHAINS, seed=5, progress=False)
# warm-up's shortest schedule, the chains in turn: under vmap a device's batched dense linear
# algebra (a 16-parameter network adapts a dense mass) rounds by its number of chains
ADAPT = dict(RUN, burn_in=160, loop=bdl.sampling.LoopOptions(chains_in_turn=True))


def target():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3)).astype(np.float32)
    w = np.array([1.0, -1.0, 0.5], np.float32)
    y = (np.tanh(x @ w) + 0.3 * rng.normal(size=64)).astype(np.float32)
    model = bdl.Model(
        network=lambda p, x: jnp.tanh(x @ p["w"]) @ p["v"],
        params={"w": np.zeros((3, 4), np.float32), "v": np.zeros(4, np.float32)},
        likelihood=bdl.Gaussian(0.3),
    )
    return bdl.compile(model, (x, y), batch_size=16)


def sghmc():
    return bdl.kernels.get("sghmc", learning_rate=0.02, momentum=0.9)


def devices(out: Path) -> None:
    """One device against every local device, and a 2 × 2 (chain, data) mesh; refused layouts;
    the derivatives of a data axis."""
    compiled, kernel = target(), sghmc()
    runs = {"one": dict(devices=1), "four": {}, "data": dict(mesh=bdl.make_mesh(chains=2, data=2))}
    for name, options in runs.items():
        bdl.sample(compiled, kernel, **RUN, **options).save(out / f"{name}.npz")
    # the accelerator loop (blocks of static length, static thin) through the device layout
    blocked = bdl.sampling.LoopOptions(block=4)
    bdl.sample(compiled, kernel, **RUN, loop=blocked).save(out / "four_blocked.npz")
    errors = {}
    for name, options in {
        "chains": dict(num_chains=3, devices=4),
        "batch": dict(mesh=bdl.make_mesh(chains=1, data=3)),
    }.items():
        try:
            bdl.sample(compiled, kernel, **{**RUN, **options})
        except ValueError as err:
            errors[name] = str(err)
    (out / "errors.json").write_text(json.dumps(errors))
    (out / "derivatives.json").write_text(json.dumps(derivatives(compiled)))


def more_devices(out: Path) -> None:
    """Two devices; warm-up adaptation on one and on four devices; a checkpoint written on four
    devices and resumed on two."""
    compiled, kernel = target(), sghmc()
    bdl.sample(compiled, kernel, **RUN, devices=2).save(out / "two.npz")
    adaptive = bdl.kernels.get("sghmc")  # step size, friction and mass adapted in burn-in
    for name, devices in (("adapt_one", 1), ("adapt_four", 4)):
        bdl.sample(compiled, adaptive, **ADAPT, devices=devices).save(out / f"{name}.npz")
    first = dict(RUN, num_steps=120)
    bdl.sample(compiled, kernel, **first, checkpoint=out / "ckpt", devices=4)
    resumed = bdl.sample(compiled, kernel, num_steps=200, resume=out / "ckpt", devices=2)
    resumed.save(out / "resumed.npz")
    from bdl.cli.main import main  # the command line: 2 chain devices × 2 data devices

    argv = ["sample", "linear_regression", "--kernel", "sgld", "--tuned", "--steps", "300"]
    argv += ["--burn-in", "100", "--devices", "4", "--data-devices", "2"]
    argv += ["--out", str(out / "cli.npz")]
    assert main(argv) in (0, 4)  # 4: the short run has not converged; its draws are saved


def derivatives(compiled) -> dict[str, float]:
    """Largest relative difference between the one-device minibatch energy, gradient and
    Hessian-vector product (warm-up's curvature) and those averaged over a data axis of 4."""
    import equinox as eqx
    from jax.sharding import PartitionSpec as P

    from bdl.sampling.run.layout import DataShare

    theta = {"net": {"w": jnp.full((3, 4), 0.3), "v": jnp.linspace(-1.0, 1.0, 4)}}
    u = jax.tree.map(lambda a: jnp.cos(3.0 * a), theta)

    def quantities(target, theta, u):
        batch, _ = target.next_batch(target.init_batches(jax.random.key(1)), jnp.int32(0))
        energy = lambda th: target.stochastic_energy_and_grad(th, batch)[0]  # noqa: E731
        value, grad = target.stochastic_energy_and_grad(theta, batch)
        hvp = jax.jvp(jax.grad(energy), (theta,), (u,))[1]
        return {"energy": value, "grad": grad, "autodiff_grad": jax.grad(energy)(theta), "hvp": hvp}

    one = jax.jit(quantities)(compiled, theta, u)
    dynamic, static = eqx.partition(compiled, eqx.is_array)
    split = jax.jit(
        jax.shard_map(
            lambda d, th, v: quantities(DataShare(eqx.combine(d, static), 4), th, v),
            mesh=bdl.make_mesh(chains=1, data=4),
            in_specs=(P(), P(), P()),
            out_specs=P(),
            check_vma=False,
        )
    )(dynamic, theta, u)

    def relative(a, b):
        a, b = (np.concatenate([np.ravel(x) for x in jax.tree.leaves(t)]) for t in (a, b))
        return float(np.max(np.abs(a - b)) / np.max(np.abs(a)))

    return {k: relative(one[k], split[k]) for k in one}


def process(index: int, port: str, out: Path) -> None:
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=index)
    samples = bdl.sample(target(), sghmc(), **RUN)
    samples.save(out / f"part-{index}.npz")


if __name__ == "__main__":
    if MODE == "devices":
        devices(Path(sys.argv[2]))
    elif MODE == "more-devices":
        more_devices(Path(sys.argv[2]))
    else:
        process(int(sys.argv[2]), sys.argv[3], Path(sys.argv[4]))

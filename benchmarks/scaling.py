"""Throughput of ``bdl.sample`` over several devices: chains × devices, and a split minibatch.

On the digits MLP (``_common.digits_mlp``) with SGHMC (learning rate 0.05, momentum 0.9) it
measures

  (chains)  chain-steps/s of ``bdl.sample(num_chains=C, devices=D)`` for every C in
            ``--chains`` and D in ``--devices`` (C a multiple of D): the chains split over D
            devices along the mesh's chain axis;
  (data)    the time per step of one chain whose minibatch of b × D examples is split over D
            devices (``mesh=bdl.make_mesh(chains=1, data=D)``), for every per-device batch b in
            ``--batches``: what splitting a large minibatch costs or saves.

  (resnet)  the per-step cost of ResNet-20 (bdl/models/resnet20_cifar.py, filter response
            normalisation) on CIFAR-shaped random data at batch 128: ``bdl.sample`` with SGHMC
            against a jitted ``lax.scan`` of ``optax.sgd(ℓ, momentum=β)`` steps on the same
            network, minibatches and gradient, and against that scan with one Gaussian draw of
            the parameter dimension added to the momentum (hand-written SGHMC), timed in
            interleaved rounds (``--resnet-steps`` steps per call, compilation excluded). The
            baselines run with their convolutions in XLA:CPU's canonical layout, as
            ``bdl.sample`` does (:mod:`bdl.utils.convolutions`); the same scans as XLA lays
            them out inside a loop are timed with ``--xla-layout``, to show what that layout costs.

Each figure of (chains) and (data) is the median over ``--repeats`` calls of ``num_steps=S,
thin=S`` after a first call that compiles, less the fixed cost of a call (a ``num_steps=16``
call, same compilation): (t(S) − t(16)) / (S − 16) per step. The load average is printed
before and after.

On a CPU, ``--host-devices N`` (default 4) makes XLA show N host devices
(``--xla_force_host_platform_device_count``): they share the machine's cores, so on a machine
with fewer cores than devices the chain axis cannot add throughput — it measures what the
sharding costs. With accelerators, pass ``--host-devices 0`` to use the real ones.

Run: ``python benchmarks/scaling.py [--steps 2000] [--repeats 3] [--chains 4,8,16]
[--devices 1,2,4] [--batches 32,128,512] [--host-devices 4] [--skip chains,data,resnet]
[--resnet-steps 6] [--resnet-depth 20] [--xla-layout]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path


def _arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--chains", default="4,8,16")
    p.add_argument("--devices", default="1,2,4")
    p.add_argument("--batches", default="32,128,512")
    p.add_argument("--host-devices", type=int, default=4)
    p.add_argument("--skip", default="", help="comma-separated parts to skip: chains, data, resnet")
    p.add_argument("--resnet-steps", type=int, default=6, help="steps per timed ResNet call")
    p.add_argument("--resnet-depth", type=int, default=20, help="6k + 2 (20: ResNet-20)")
    p.add_argument(
        "--xla-layout",
        action="store_true",
        help="also time the SGD scans with the convolutions as XLA lays them out in a loop "
        "(20-50x slower on a CPU)",
    )
    return p.parse_args()


ARGS = _arguments()
if ARGS.host_devices:  # before JAX starts: XLA reads it once
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "")
        + f" --xla_force_host_platform_device_count={ARGS.host_devices}"
    )

import jax  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from _common import digits_mlp, environment, load_average, time_interleaved  # noqa: E402
from jax.flatten_util import ravel_pytree  # noqa: E402

import bdl  # noqa: E402
from bdl.utils.convolutions import canonical_convolutions  # noqa: E402

SHORT = 16


def per_step(target, kernel, steps: int, repeats: int, **options) -> float:
    """Seconds per step of ``bdl.sample`` (median of ``repeats``, fixed per-call cost removed)."""

    def call(n: int) -> float:
        start = time.perf_counter()
        bdl.sample(target, kernel, num_steps=n, thin=n, progress=False, **options)
        return time.perf_counter() - start

    call(steps)  # compiles the loop; the chunk sizes settle
    short = statistics.median(call(SHORT) for _ in range(repeats))
    long = statistics.median(call(steps) for _ in range(repeats))
    return max(long - short, 1e-9) / (steps - SHORT)


def resnet_on_random_data(depth: int, batch_size: int = 128, n: int = 1024):
    """ResNet-``depth`` of bdl/models/resnet20_cifar.py compiled on ``n`` CIFAR-shaped N(0, 1)
    images with uniform labels (no augmentation: the SGD baseline gets exactly the same
    minibatches)."""
    from bdl.model_files import resolve

    spec = importlib.util.spec_from_file_location("resnet20_cifar", resolve("resnet20_cifar"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 32, 32, 3)).astype(np.float32)
    y = rng.integers(0, 10, size=n).astype(np.int32)
    model = bdl.Model(
        network=module.ResNet(depth=depth, classes=10),
        likelihood=bdl.Categorical(),
        prior=bdl.Normal(1.0),
    )
    return bdl.compile(model, (x, y), batch_size=batch_size)


def resnet_step_cost(steps: int, repeats: int, depth: int, xla_layout: bool = False) -> None:
    """SGHMC in ``bdl.sample`` against ``optax.sgd`` (and sgd + one draw) on ResNet-``depth``."""
    lr, momentum = 0.1, 0.98
    compiled = resnet_on_random_data(depth)
    n, d = compiled.n, compiled.dim
    params = compiled.initial_position
    key = jax.random.key(0)
    ts = jnp.arange(steps, dtype=jnp.int32)
    opt = optax.sgd(lr, momentum=momentum)
    _, unravel = ravel_pytree(params)

    def mean_grad(p, stream, t):
        batch, stream = compiled.next_batch(stream, t)
        _, g = compiled.stochastic_energy_and_grad(p, batch)
        return jax.tree.map(lambda x: x / n, g), stream

    def sgd_body(carry, t):
        p, state, stream = carry
        g, stream = mean_grad(p, stream, t)
        updates, state = opt.update(g, state, p)
        return (optax.apply_updates(p, updates), state, stream), None

    def sgd_draw_body(carry, t):
        p, m, stream = carry
        g, stream = mean_grad(p, stream, t)
        xi = unravel(jax.random.normal(jax.random.fold_in(key, t), (d,)))
        m = jax.tree.map(lambda m, g, e: momentum * m + g + 1e-3 * e, m, g, xi)
        return (jax.tree.map(lambda p, m: p - lr * m, p, m), m, stream), None

    stream = compiled.init_batches(key)

    def scan(body):
        return jax.jit(lambda c: jax.lax.scan(body, c, ts)[0])

    sgd, sgd_draw = scan(sgd_body), scan(sgd_draw_body)
    sgd_canonical = scan(canonical_convolutions(sgd_body))
    sgd_draw_canonical = scan(canonical_convolutions(sgd_draw_body))
    sgd_carry = (params, opt.init(params), stream)
    draw_carry = (params, jax.tree.map(jnp.zeros_like, params), stream)
    kernel = bdl.kernels.get("sghmc", learning_rate=lr, momentum=momentum)

    def sample(num_steps: int):
        return bdl.sample(
            compiled, kernel, num_steps=num_steps, thin=num_steps, progress=False
        ).positions

    fns = {
        "optax.sgd": lambda: sgd_canonical(sgd_carry),
        "sgd + draw": lambda: sgd_draw_canonical(draw_carry),
        "bdl.sample sghmc": lambda: sample(steps),
        "bdl.sample sghmc, 1 step": lambda: sample(1),
    }
    if xla_layout:
        fns["optax.sgd, as XLA lays it out"] = lambda: sgd(sgd_carry)
        fns["sgd + draw, as XLA lays it out"] = lambda: sgd_draw(draw_carry)
    for fn in fns.values():  # compile
        jax.block_until_ready(fn())
    print(
        f"\nResNet-{depth} (FRN), d = {d:,}, CIFAR-shaped random data, B = 128, "
        f"{steps} steps per call, {repeats} interleaved rounds, {load_average()}"
    )
    wall, cpu = time_interleaved(fns, repeats)
    base_w, base_c = wall["optax.sgd"], cpu["optax.sgd"]
    print(f"{'':<32}{'ms/step (wall)':>16}{'ms/step (CPU)':>16}{'÷ sgd (wall)':>14}"
          f"{'÷ sgd (CPU)':>13}{'ratio range':>16}")  # fmt: skip
    # bdl.sample's fixed cost per call (set-up, starts, transfers) taken out: (t(S) − t(1))/(S − 1)
    per_call = {
        "wall": wall.pop("bdl.sample sghmc, 1 step"),
        "cpu": cpu.pop("bdl.sample sghmc, 1 step"),
    }
    name = "bdl.sample sghmc, per step"
    wall[name] = [
        (a - b) * steps / (steps - 1)
        for a, b in zip(wall["bdl.sample sghmc"], per_call["wall"], strict=True)
    ]
    cpu[name] = [
        (a - b) * steps / (steps - 1)
        for a, b in zip(cpu["bdl.sample sghmc"], per_call["cpu"], strict=True)
    ]
    for name in wall:
        ratios = [a / b for a, b in zip(wall[name], base_w, strict=True)]
        print(
            f"{name:<32}{1e3 * statistics.median(wall[name]) / steps:>16.1f}"
            f"{1e3 * statistics.median(cpu[name]) / steps:>16.1f}"
            f"{statistics.median(ratios):>14.3f}"
            f"{statistics.median(cpu[name]) / statistics.median(base_c):>13.3f}"
            f"{f'{min(ratios):.3f}–{max(ratios):.3f}':>16}",
            flush=True,
        )
    print(
        f"(a 1-step bdl.sample call: {statistics.median(per_call['wall']):.2f} s wall, "
        f"{statistics.median(per_call['cpu']):.2f} s CPU)"
    )
    print(load_average())


def main() -> None:
    ints = lambda text: [int(v) for v in text.split(",") if v]  # noqa: E731
    skip = set(ARGS.skip.split(","))
    print(environment())
    kernel = bdl.kernels.get("sghmc", learning_rate=0.05, momentum=0.9)
    available = jax.local_device_count()
    if "chains" not in skip:
        target = digits_mlp(batch_size=32)
        print(f"\nchain-steps/s (digits MLP, B = 32, S = {ARGS.steps}), {load_average()}")
        devices = [d for d in ints(ARGS.devices) if d <= available]
        print("chains  " + "".join(f"{f'{d} device(s)':>14}" for d in devices))
        for chains in ints(ARGS.chains):
            row = []
            for d in devices:
                if chains % d:
                    row.append(f"{'-':>14}")
                    continue
                seconds = per_step(
                    target, kernel, ARGS.steps, ARGS.repeats, num_chains=chains, devices=d
                )
                row.append(f"{chains / seconds:>14,.0f}")
            print(f"{chains:>6}  " + "".join(row), flush=True)
        print(load_average())
    if "data" not in skip:
        steps = max(ARGS.steps // 4, 4 * SHORT)
        print(f"\nms per step, one chain, minibatch b × D split over D devices (S = {steps}), "
              f"{load_average()}")  # fmt: skip
        devices = [d for d in ints(ARGS.devices) if d <= available]
        print("b/device" + "".join(f"{f'D = {d}':>12}" for d in devices))
        for b in ints(ARGS.batches):
            row = []
            for d in devices:
                if b * d > 1797:
                    row.append(f"{'-':>12}")
                    continue
                target = digits_mlp(batch_size=b * d)
                mesh = bdl.make_mesh(chains=1, data=d)
                seconds = per_step(target, kernel, steps, ARGS.repeats, mesh=mesh)
                row.append(f"{1e3 * seconds:>12.3f}")
            print(f"{b:>8}" + "".join(row), flush=True)
        print(load_average())
    if "resnet" not in skip:
        resnet_step_cost(ARGS.resnet_steps, ARGS.repeats, ARGS.resnet_depth, ARGS.xla_layout)


if __name__ == "__main__":
    main()

"""Throughput of ``bdl.sample`` over several devices: chains × devices, and a split minibatch.

On the digits MLP (``_common.digits_mlp``) with SGHMC (learning rate 0.05, momentum 0.9) it
measures

  (chains)  chain-steps/s of ``bdl.sample(num_chains=C, devices=D)`` for every C in
            ``--chains`` and D in ``--devices`` (C a multiple of D): the chains split over D
            devices along the mesh's chain axis;
  (data)    the time per step of one chain whose minibatch of b × D examples is split over D
            devices (``mesh=bdl.make_mesh(chains=1, data=D)``), for every per-device batch b in
            ``--batches``: what splitting a large minibatch costs or saves.

Each figure is the median over ``--repeats`` calls of ``num_steps=S, thin=S`` after a first
call that compiles, less the fixed cost of a call (a ``num_steps=16`` call, same compilation):
(t(S) − t(16)) / (S − 16) per step. The load average is printed before and after.

On a CPU, ``--host-devices N`` (default 4) makes XLA show N host devices
(``--xla_force_host_platform_device_count``): they share the machine's cores, so on a machine
with fewer cores than devices the chain axis cannot add throughput — it measures what the
sharding costs. With accelerators, pass ``--host-devices 0`` to use the real ones.

Run: ``python benchmarks/scaling.py [--steps 2000] [--repeats 3] [--chains 4,8,16]
[--devices 1,2,4] [--batches 32,128,512] [--host-devices 4]``.
"""

from __future__ import annotations

import argparse
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
    p.add_argument("--skip", default="", help="comma-separated parts to skip: chains, data")
    return p.parse_args()


ARGS = _arguments()
if ARGS.host_devices:  # before JAX starts: XLA reads it once
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "")
        + f" --xla_force_host_platform_device_count={ARGS.host_devices}"
    )

import jax  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import digits_mlp, environment, load_average  # noqa: E402

import bdl  # noqa: E402

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


if __name__ == "__main__":
    main()

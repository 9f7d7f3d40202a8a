"""Small models at hand-written speed: ``bdl.sample`` against a hand-written ``lax.scan`` of the
same SGLD update (and BlackJAX's SGLD kernel), side by side in one run.

Models:

* the conjugate linear regression (bdl/models/linear_regression.py, d = 4, n = 128, Gaussian
  likelihood with σ = 0.5, N(0, 1) prior), full batch (B = n) and B = n/8;
* the depth-1 prior-data MLP (bdl/models/mlp_prior_data.py, 5→10→3 ReLU, d = 93, n = 100,
  Categorical, He-normal weights and N(0, 0.05²) biases), full batch and B = n/8 (rounded down).

With the same chains, steps, step size and starting positions (``init_positions`` of the
compiled model), it times

  (hand)  a hand-written jitted ``lax.scan`` over steps, chains under ``vmap``:
          θ ← θ − h∇Ũ(θ) + √(2h)ξ with the energy written out by hand, θ raveled into one
          vector and one ``fold_in`` key per step; full batch uses the data as they are,
          B < n a ``dynamic_slice`` of a per-epoch permutation;
  (bjx)   the same scan around BlackJAX's ``sgld`` kernel with its ``grad_estimator`` (same
          minibatches; needs ``pip install -e .[bench]``, else the column says so);
  (bdl)   ``bdl.sample(compiled, sgld(h), num_steps=S, thin=S, num_chains=C)`` (later calls;
          its fixed per-call cost removed by also timing ``num_steps=S/10``),

in interleaved rounds (one call of each per round, so load hits them alike); times are medians
over ``--repeats`` rounds, a ratio the median of the per-round ratios with its range. Target
(docs/design.md, *Performance targets*): bdl ≤ 1.5× hand-written.

    python benchmarks/small_models.py [--steps 50000] [--chains 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment, load_average

import bdl
from bdl.model_files import load_spec

H = 1e-4
TARGET = 1.5

try:
    import blackjax
except ImportError:  # an optional benchmark dependency
    blackjax = None


# ---------------------------------------------------------------------------- the energies
def linear_parts(noise_sd: float) -> tuple[Callable, Callable]:
    """log p(y|x, θ) per example and log p(θ) of the linear regression, written by hand."""

    def log_lik(theta: Any, x: jax.Array, y: jax.Array) -> jax.Array:
        w = theta["net"]["w"]
        return -0.5 * ((x @ w - y) / noise_sd) ** 2

    def log_prior(theta: Any) -> jax.Array:
        return -0.5 * jnp.sum(theta["net"]["w"] ** 2)

    return log_lik, log_prior


def mlp_parts() -> tuple[Callable, Callable]:
    """The same for the depth-1 prior-data MLP (He normal: sd √2/√fan_in; biases sd 0.05)."""

    def log_lik(theta: Any, x: jax.Array, y: jax.Array) -> jax.Array:
        net = theta["net"]
        hidden = jax.nn.relu(x @ net["Dense_0"]["kernel"] + net["Dense_0"]["bias"])
        logits = hidden @ net["Dense_1"]["kernel"] + net["Dense_1"]["bias"]
        log_p = jax.nn.log_softmax(logits)
        return jnp.take_along_axis(log_p, y[..., None], axis=-1)[..., 0]

    def log_prior(theta: Any) -> jax.Array:
        total = 0.0
        for layer in theta["net"].values():
            fan_in = layer["kernel"].shape[0]
            total -= jnp.sum(layer["kernel"] ** 2) * fan_in / 4.0
            total -= jnp.sum(layer["bias"] ** 2) / (2 * 0.05**2)
        return total

    return log_lik, log_prior


# ---------------------------------------------------------------------------- the loops
def scan_loop(
    update: Callable, x: jax.Array, y: jax.Array, batch_size: int, steps: int, start: Any
) -> Callable[[jax.Array], Any]:
    """A jitted ``lax.scan`` of ``update(key, θ, xb, yb)``, chains under ``vmap``, with the
    minibatches of the hand-written loop."""
    n = x.shape[0]
    per_epoch = n // batch_size
    chains = jax.tree.leaves(start)[0].shape[0]

    def chain(theta: Any, key: jax.Array) -> Any:
        def step(carry: tuple, t: jax.Array) -> tuple:
            theta, perm = carry
            xb, yb = x, y
            if batch_size < n:
                perm = jax.lax.cond(
                    t % per_epoch == 0,
                    lambda: jax.random.permutation(jax.random.fold_in(key, -t - 1), n),
                    lambda: perm,
                )
                idx = jax.lax.dynamic_slice_in_dim(perm, (t % per_epoch) * batch_size, batch_size)
                xb, yb = x[idx], y[idx]
            return (update(jax.random.fold_in(key, t), theta, xb, yb), perm), None

        (theta, _), _ = jax.lax.scan(step, (theta, jnp.arange(n)), jnp.arange(steps))
        return theta

    run = jax.jit(lambda key: jax.vmap(chain)(start, jax.random.split(key, chains)))
    return run


def hand_update(log_lik: Callable, log_prior: Callable, n: int) -> Callable:
    def update(key: jax.Array, theta: Any, xb: jax.Array, yb: jax.Array) -> Any:
        def energy(th: Any) -> jax.Array:
            return -(n / xb.shape[0]) * jnp.sum(log_lik(th, xb, yb)) - log_prior(th)

        flat, unravel = ravel_pytree(theta)
        grad, _ = ravel_pytree(jax.grad(energy)(theta))
        noise = jax.random.normal(key, flat.shape)
        return unravel(flat - H * grad + jnp.sqrt(2 * H) * noise)

    return update


def blackjax_update(log_lik: Callable, log_prior: Callable, n: int) -> Callable:
    grad_estimator = blackjax.sgmcmc.gradients.grad_estimator(
        log_prior, lambda th, xy: log_lik(th, *xy), n
    )
    kernel = blackjax.sgld(grad_estimator)

    def update(key: jax.Array, theta: Any, xb: jax.Array, yb: jax.Array) -> Any:
        return kernel.step(key, theta, (xb, yb), H)

    return update


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=50_000)
    p.add_argument("--chains", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    S, C = args.steps, args.chains
    short = S // 10
    print(f"# small_models: {environment()}")
    print(f"# SGLD h = {H}, {C} chains x {S} steps, {args.repeats} interleaved rounds")
    if blackjax is None:
        print("# blackjax is not installed (pip install -e .[bench]): no BlackJAX column")
    models = {
        "linear d=4": (load_spec("linear_regression", n=128, dim=4), linear_parts(0.5)),
        "mlp d=93": (load_spec("mlp_prior_data", depth=1), mlp_parts()),
    }
    print(
        f"{'model':<12}{'batch':>6}{'hand µs':>9}{'bjx µs':>9}{'bdl µs':>9}"
        f"{'bdl/hand':>10}{'range':>14}{'bjx/hand':>10}  verdict"
    )
    worst = 0.0
    for label, (spec, (log_lik, log_prior)) in models.items():
        n = spec.data.x_train.shape[0]
        x = jnp.asarray(spec.data.x_train)
        y = jnp.asarray(spec.data.y_train)
        for batch in (n, n // 8):
            target = bdl.ModelSpec(spec.model, spec.data, batch_size=batch).compile()
            start = target.init_positions(jax.random.key(0), C, "auto")
            kernel = bdl.kernels.get("sgld", step_size=H)
            fns: dict[str, Callable[[], Any]] = {}
            hand = scan_loop(hand_update(log_lik, log_prior, n), x, y, batch, S, start)
            fns["hand"] = partial_key(hand)
            if blackjax is not None:
                bjx = scan_loop(blackjax_update(log_lik, log_prior, n), x, y, batch, S, start)
                fns["bjx"] = partial_key(bjx)
            for steps in (S, short):
                fns[f"bdl{steps}"] = partial_run(target, kernel, steps, C, start)
            for fn in fns.values():  # compile and warm up
                jax.block_until_ready(fn())
            times = {name: [] for name in fns}
            for _ in range(args.repeats):
                for name, fn in fns.items():
                    t0 = time.perf_counter()
                    jax.block_until_ready(fn())
                    times[name].append(time.perf_counter() - t0)
            per_step = {
                "hand": [t / S for t in times["hand"]],
                "bdl": [
                    (a - b) / (S - short)
                    for a, b in zip(times[f"bdl{S}"], times[f"bdl{short}"], strict=True)
                ],
            }
            if "bjx" in times:
                per_step["bjx"] = [t / S for t in times["bjx"]]
            ratios = [a / b for a, b in zip(per_step["bdl"], per_step["hand"], strict=True)]
            ratio = statistics.median(ratios)
            worst = max(worst, ratio)
            bjx_us, bjx_ratio = f"{'n/a':>9}", f"{'n/a':>10}"
            if "bjx" in per_step:
                pairs = zip(per_step["bjx"], per_step["hand"], strict=True)
                bjx_us = f"{statistics.median(per_step['bjx']) * 1e6:>9.2f}"
                bjx_ratio = f"{statistics.median(a / b for a, b in pairs):>10.2f}"
            print(
                f"{label:<12}{batch:>6}{statistics.median(per_step['hand']) * 1e6:>9.2f}{bjx_us}"
                f"{statistics.median(per_step['bdl']) * 1e6:>9.2f}{ratio:>10.2f}"
                f"{f'[{min(ratios):.2f}, {max(ratios):.2f}]':>14}{bjx_ratio}  "
                f"{'ok' if ratio <= TARGET else 'ABOVE TARGET'}",
                flush=True,
            )
    print(f"# done, {load_average()}; worst bdl/hand {worst:.2f} (target ≤ {TARGET})")


def partial_key(fn: Callable[[jax.Array], Any]) -> Callable[[], Any]:
    key = jax.random.key(0)
    return lambda: fn(key)


def partial_run(target: Any, kernel: Any, steps: int, chains: int, start: Any) -> Callable:
    def run() -> Any:
        samples = bdl.sample(
            target,
            kernel,
            num_steps=steps,
            thin=steps,
            num_chains=chains,
            init=start,
            progress=False,
        )
        return samples.positions

    return run


if __name__ == "__main__":
    main()

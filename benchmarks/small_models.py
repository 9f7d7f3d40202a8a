"""Small models at hand-written speed: ``bdl.sample`` against a hand-written ``lax.scan`` of the
same SGLD update, side by side in one run.

On the conjugate linear regression (models/linear_regression.py, d = 4, n = 128, Gaussian
likelihood, N(0, 1) prior), with the same chains, steps and step size, it times

  (a) a hand-written jitted ``lax.scan`` over steps, chains under ``vmap``: θ ← θ − h∇U(θ) +
      √(2h)ξ with the full-batch energy written out by hand (X θ, squared error, prior) and one
      ``fold_in`` key per step — no minibatches (full batch) or a ``dynamic_slice`` of a
      per-epoch permutation (B = n/8),
  (b) ``bdl.sample(compiled, sgld(h), num_steps=S, thin=S, num_chains=C)`` (second call; its
      fixed cost is separated by also timing ``num_steps=S/10``),

for full batch (B = n) and B = n/8, in interleaved rounds (one call of each per round, so load
hits them alike); times are medians over ``--repeats`` rounds, the ratio the median of per-round
ratios. Target (docs/benchmarks.md): bdl ≤ 1.5× hand-written.

    python benchmarks/small_models.py [--steps 50000] [--chains 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from _common import environment

import bdl
from bdl.model_files import load_spec

H = 1e-4


def hand_written(
    x: jax.Array, y: jax.Array, noise_sd: float, batch_size: int, steps: int, chains: int
) -> object:
    """The SGLD loop written by hand for this model: Ũ = (n/B)·Σ_batch (y − xθ)²/(2σ²) + |θ|²/2."""
    n = x.shape[0]
    per_epoch = n // batch_size

    def grad_u(theta: jax.Array, idx: jax.Array | None) -> jax.Array:
        xb, yb = (x, y) if idx is None else (x[idx], y[idx])
        resid = xb @ theta - yb
        return (n / xb.shape[0]) * xb.T @ resid / noise_sd**2 + theta

    def chain(key: jax.Array) -> jax.Array:
        def step(carry: tuple, t: jax.Array) -> tuple:
            theta, perm = carry
            idx = None
            if batch_size < n:
                perm = jax.lax.cond(
                    t % per_epoch == 0,
                    lambda: jax.random.permutation(jax.random.fold_in(key, -t - 1), n),
                    lambda: perm,
                )
                idx = jax.lax.dynamic_slice_in_dim(perm, (t % per_epoch) * batch_size, batch_size)
            noise = jax.random.normal(jax.random.fold_in(key, t), theta.shape)
            theta = theta - H * grad_u(theta, idx) + jnp.sqrt(2 * H) * noise
            return (theta, perm), None

        start = (jnp.zeros(x.shape[1]), jnp.arange(n))
        (theta, _), _ = jax.lax.scan(step, start, jnp.arange(steps))
        return theta

    return jax.jit(lambda key: jax.vmap(chain)(jax.random.split(key, chains)))


def timed(fn, *args) -> float:
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=50_000)
    p.add_argument("--chains", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    print(environment())
    spec = load_spec("linear_regression", n=128, dim=4)
    x = jnp.asarray(spec.data.x_train)
    y = jnp.asarray(spec.data.y_train)
    kernel = bdl.kernels.get("sgld", step_size=H)
    print(
        f"linear regression d = 4, n = 128, SGLD h = {H}, {args.chains} chains x {args.steps} steps"
    )
    print(f"{'batch':>8}{'hand µs/step':>14}{'bdl µs/step':>13}{'bdl / hand':>12}")
    for batch in (128, 16):
        target = bdl.ModelSpec(spec.model, spec.data, batch_size=batch).compile()
        hand = hand_written(x, y, 0.5, batch, args.steps, args.chains)
        short = args.steps // 10

        def run(steps: int, target: object = target) -> bdl.Samples:
            return bdl.sample(
                target, kernel, num_steps=steps, thin=steps, num_chains=args.chains, progress=False
            )

        key = jax.random.key(0)
        timed(hand, key), run(args.steps), run(short)  # compile
        hands, bdls, ratios = [], [], []
        for _ in range(args.repeats):
            th = timed(hand, key)
            tb = timed(lambda: run(args.steps).positions)
            tb -= timed(lambda s=short: run(s).positions)
            tb *= args.steps / (args.steps - short)
            hands.append(th / args.steps * 1e6)
            bdls.append(tb / args.steps * 1e6)
            ratios.append(tb / th)
        print(
            f"{batch:>8}{np.median(hands):>14.2f}{np.median(bdls):>13.2f}"
            f"{np.median(ratios):>9.2f} ({min(ratios):.2f}–{max(ratios):.2f})"
        )


if __name__ == "__main__":
    main()

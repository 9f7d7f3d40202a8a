"""What NNSGHMC's networks see and do on the held-out network task: f_Q, the friction, the
standardised inputs (u, p, g), the energy per dimension and the largest |θ| along single chains.

Task: ``breast-cancer-mlp-24`` (:data:`bdl.meta.tasks.HELD_OUT`, data seeds 5001, 5003, …) at its
own step h = √(ℓ/n) (ℓ = 0.05), NNSGHMC with α = 1, β₀ = 1, c = 0.01 and the given meta-parameters
(default: the shipped ones and their input statistics; with ``--h-factor`` a multiple of h). One
chain per data seed from ``model.init_positions``, ``--steps`` steps with the model's minibatch
gradients (batch 32), reported as means over the windows [0, 100), [100, 1000), [1000, 2000),
[2000, 3000) (the largest |θ| and f_Q as maxima). A chain that runs away shows as max |θ| and
Ũ/d growing by orders of magnitude while staying finite.

Run: ``python benchmarks/nnsghmc_heldout_inputs.py [--meta-params NPZ] [--seeds 2]
[--steps 3000] [--h-factor 1]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment

import bdl
from bdl.kernels.recipe import Context
from bdl.meta.tasks import HELD_OUT, make_task

WINDOWS = ((0, 100), (100, 1000), (1000, 2000), (2000, 3000))


def flat(tree: object) -> jax.Array:
    return jnp.concatenate([jnp.ravel(x) for x in jax.tree.leaves(tree)])


def run(meta_params: str | None, seed: int, steps: int, h_factor: float) -> np.ndarray:
    """Per step: mean f_Q, max f_Q, mean D_rr, Ũ/d, u, sd p, sd g, max |θ|."""
    task = make_task(HELD_OUT, 5001 + 2 * seed)
    model, h = task.model, task.step_size * h_factor
    kernel = bdl.kernels.get(
        "nnsghmc", step_size=h, alpha=1.0, beta0=1.0, c=0.01, meta_params=meta_params
    ).bind(model)
    recipe = kernel.recipe
    key = jax.random.key(seed)
    position = jax.tree.map(lambda a: a[0], model.init_positions(key, 1))
    state, stream = kernel.init(position, key), model.init_batches(key)

    @jax.jit
    def step(state, stream, t, k):
        batch, stream = model.next_batch(stream, t)

        def energy_and_grad(theta):
            return model.stochastic_energy_and_grad(theta, batch)

        energy, grad = energy_and_grad(state.z["theta"])
        ctx = Context(energy, grad)
        fq = flat(recipe.f_q(state.z, ctx))
        friction = recipe.alpha * fq * fq + flat(recipe.f_d(state.z, ctx)) + recipe.c
        u, p, g = recipe._inputs(state.z, ctx)
        state, _ = kernel.step(k, state, energy_and_grad, jnp.asarray(h), jnp.asarray(1.0))
        theta = flat(state.z["theta"])
        row = [
            jnp.mean(fq),
            jnp.max(fq),
            jnp.mean(friction),
            energy / theta.size,
            u,
            jnp.std(flat(p)),
            jnp.std(flat(g)),
            jnp.max(jnp.abs(theta)),
        ]
        return state, stream, jnp.stack(row)

    rows = []
    for t in range(steps):
        state, stream, row = step(state, stream, t, jax.random.fold_in(key, t))
        rows.append(np.asarray(row))
    return np.array(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--meta-params", default=None, help="NNSGHMC .npz (default: shipped)")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--h-factor", type=float, default=1.0)
    args = p.parse_args(argv)
    print(environment(), flush=True)
    print(
        "| data seed | steps | mean f_Q | max f_Q | mean D_rr | Ũ/d | u | sd p | sd g | max |θ| |\n"
        "|---|---|---|---|---|---|---|---|---|---|"
    )
    for seed in range(args.seeds):
        rows = run(args.meta_params, seed, args.steps, args.h_factor)
        for lo, hi in WINDOWS:
            w = rows[lo:hi]
            if not len(w):
                continue
            cells = [
                f"{np.mean(w[:, 0]):.3f}",
                f"{np.max(w[:, 1]):.3f}",
                f"{np.mean(w[:, 2]):.3g}",
                f"{np.mean(w[:, 3]):.3g}",
                f"{np.mean(w[:, 4]):.3g}",
                f"{np.mean(w[:, 5]):.3g}",
                f"{np.mean(w[:, 6]):.3g}",
                f"{np.max(w[:, 7]):.3g}",
            ]
            print(f"| {5001 + 2 * seed} | {lo}–{hi} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

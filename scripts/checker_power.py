"""False alarms and power of the stationarity checker's noise checks (the table of
docs/checker.md, *How often it errs*).

For SGLD, SGHMC and the state-dependent TanhDiffusion recipe (docs/architecture.md), over
``--seeds`` seeds of ``bdl.kernels.check`` at its default settings (4 random states each), with
the injected noise variance multiplied by a factor f (f = 1: the exact kernel):

* **exact** path: the integrator's draw scaled by √f (the kernel's step is its integrator's move
  of the standard draw, so the exact covariance B·Bᵀ decides);
* **sampled** path: a wrapper that steps the inner kernel with a key of its own and scales the
  noise part of its step, z(0) + √f·(z(T) − z(0)) (randomness the exact check cannot see, so the
  step is sampled, 20,000 draws per state, and z-scored against B·Bᵀ).

It prints the fraction of seeds in which the noise reason is given (f ≠ 1) or the verdict is not
exact (f = 1), and the largest noise residual seen on the exact kernels. A check takes about
0.03 s on the exact path and 0.3 s on the sampled one (80,000 steps): about 15 minutes on 2 CPU
cores with the defaults; not part of the test suite.

    .venv/bin/python scripts/checker_power.py [--seeds 200] [--sampled-seeds 100]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import jax
import jax.numpy as jnp

import bdl
from bdl.kernels import Recipe, RecipeKernel, Wrapper
from bdl.kernels.blocks import Elementwise
from bdl.kernels.integrators import Integrator

FACTORS = (1.0, 1.02, 0.98, 1.05, 0.95, 1.10, 0.90)


class TanhDiffusion(Recipe):
    """g = 0, Q = 0, D(θ)_i = 1 + ½·tanh(θ_i)² (docs/architecture.md, *Adding a kernel*)."""

    @property
    def groups(self):
        return {"theta": "elementwise"}

    def kinetic(self, z):
        return jnp.zeros(())

    def diffusion(self, z, ctx):
        d = jax.tree.map(lambda t: 1 + 0.5 * jnp.tanh(t) ** 2, z["theta"])
        return {"theta": Elementwise(d)}

    def curl(self, z, ctx):
        return {}


class ScaledNoise(Integrator):
    """``inner`` with its Gaussian draw multiplied by ``scale`` (an array, so one compilation
    serves every factor)."""

    inner: Integrator
    scale: jax.Array

    def noisy_groups(self, ev):
        return self.inner.noisy_groups(ev)

    def move(self, recipe, ev, z, ctx, h, temperature, noise):
        scaled = jax.tree.map(lambda x: self.scale * x, noise)
        return self.inner.move(recipe, ev, z, ctx, h, temperature, scaled)


class OwnKeyScaledStep(Wrapper):
    """Steps ``inner`` with a key of its own and multiplies the noise part of the step by
    ``scale``: z(0) + scale·(z(T) − z(0)), both from the same key."""

    scale: jax.Array

    def step(self, key, state, energy_and_grad, step_size, temperature):
        key = jax.random.fold_in(key, 1)
        hot, info = self.inner.step(key, state, energy_and_grad, step_size, temperature)
        cold, _ = self.inner.step(key, state, energy_and_grad, step_size, 0.0 * temperature)
        hot_inner, cold_inner = self.inner.recipe_state(hot), self.inner.recipe_state(cold)
        z = jax.tree.map(lambda c, w: c + self.scale * (w - c), cold_inner.z, hot_inner.z)
        return self.inner.with_recipe_state(hot, hot_inner._replace(z=z)), info


def kernels() -> dict[str, RecipeKernel]:
    return {
        "SGLD": bdl.kernels.sgld(1e-3),
        "SGHMC": bdl.kernels.sghmc(1e-3, 1.0),
        "TanhDiffusion": RecipeKernel(TanhDiffusion(), 1e-3, name="tanh-diffusion"),
    }


def variants(kernel: RecipeKernel, path: str) -> dict[float, bdl.kernels.Kernel]:
    out = {}
    for f in FACTORS:
        scale = jnp.sqrt(jnp.asarray(f, jnp.float64))
        if path == "exact":
            out[f] = dataclasses.replace(kernel, integrator=ScaledNoise(kernel.integrator, scale))
        else:
            out[f] = OwnKeyScaledStep(kernel, scale)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200, help="seeds on the exact path")
    parser.add_argument(
        "--sampled-seeds", type=int, default=100, help="seeds on the sampled path (slower)"
    )
    args = parser.parse_args()
    header = (
        "| kernel | path | " + " | ".join(f"f = {f:g}" for f in FACTORS) + " | worst at f = 1 |"
    )
    rows = [header, "|" + "---|" * (len(FACTORS) + 3)]
    start = time.perf_counter()
    with jax.enable_x64(True):
        for name, kernel in kernels().items():
            for path in ("exact", "sampled"):
                built = variants(kernel, path)  # kept alive: one compilation for all seeds
                cells, worst = [], 0.0
                residual = (
                    "noise covariance error"
                    if path == "exact"
                    else "noise covariance |z| (sampled)"
                )
                seeds = args.seeds if path == "exact" else args.sampled_seeds
                for f, k in built.items():
                    hits = 0
                    for seed in range(seeds):
                        report = bdl.kernels.check(k, seed=seed)
                        noisy = any("noise covariance" in r for r in report.reasons)
                        hits += (not report.exact) if f == 1.0 else noisy
                        if f == 1.0:
                            worst = max(worst, report.residuals.get(residual, 0.0))
                    cells.append(f"{hits / seeds:.0%}")
                    print(f"{name} {path} f={f}: {hits}/{seeds}", file=sys.stderr, flush=True)
                rows.append(f"| {name} | {path} | " + " | ".join(cells) + f" | {worst:.1e} |")
    print("\n".join(rows))
    print(
        f"\n{args.seeds} seeds (exact path), {args.sampled_seeds} (sampled path), "
        f"{time.perf_counter() - start:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

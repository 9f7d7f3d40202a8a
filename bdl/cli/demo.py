"""``bdl demo``: the embedded main job, offline on 2 CPU cores in a few minutes.

SGHMC and SGLD on Bayesian logistic regression for the breast-cancer data (scikit-learn), four
chains each; prints the BMA test accuracy and NLL beside a point estimate from SGD.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import optax

from bdl.compile.compiled_model import CompiledModel
from bdl.evaluation import test_metrics
from bdl.kernels import registry
from bdl.model_files import load_spec
from bdl.sampling import sample


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the embedded demonstration")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=run)


def sgd_point_estimate(target: CompiledModel, steps: int, seed: int) -> dict[str, float]:
    """MAP by ``optax.sgd`` with momentum on the mean minibatch loss, for comparison."""
    opt = optax.sgd(0.02, momentum=0.9)
    params = target.initial_position
    stream = target.init_batches(jax.random.key(seed))

    def step(carry, t):
        params, opt_state, stream = carry
        batch, stream = target.next_batch(stream, t)
        _, grad = target.stochastic_energy_and_grad(params, batch)
        grad = jax.tree.map(lambda g: g / target.n, grad)
        updates, opt_state = opt.update(grad, opt_state)
        return (optax.apply_updates(params, updates), opt_state, stream), None

    (params, _, _), _ = jax.lax.scan(step, (params, opt.init(params), stream), jnp.arange(steps))
    return test_metrics(target, jax.tree.map(lambda a: a[None], params))


def run(args: argparse.Namespace) -> int:
    spec = load_spec("logistic_breast_cancer")
    target = spec.compile()
    print(f"bdl demo: {spec.description}; prior N(0, 1), T = 1, batch {spec.batch_size}")
    print(f"{'method':<22}{'draws':>7}{'accuracy':>10}{'NLL':>9}{'time (s)':>10}")
    start = time.perf_counter()
    point = sgd_point_estimate(target, spec.num_steps, args.seed)
    print(
        f"{'SGD (point estimate)':<22}{1:>7}{point['accuracy']:>10.4f}{point['nll']:>9.4f}"
        f"{time.perf_counter() - start:>10.1f}"
    )
    for name in ("sghmc", "sgld"):
        kernel = registry.get(name, **spec.kernel_hyper(name))
        start = time.perf_counter()
        samples = sample(
            target,
            kernel,
            num_steps=spec.num_steps,
            burn_in=spec.burn_in,
            thin=spec.thin,
            num_chains=4,
            seed=args.seed,
            progress=False,
        )
        metrics = test_metrics(target, samples.flat())
        label = f"{name.upper()} (4 chains)"
        print(
            f"{label:<22}{samples.num_chains * samples.num_draws:>7}"
            f"{metrics['accuracy']:>10.4f}{metrics['nll']:>9.4f}"
            f"{time.perf_counter() - start:>10.1f}"
        )
    return 0

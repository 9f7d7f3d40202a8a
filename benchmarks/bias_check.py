"""What the bias check costs against the run it checks (docs/troubleshooting.md, "The draws are
biased", "What it costs").

For each model, in one process: a warm-up call of ``bdl.sample`` (which compiles the run's and
the checks' programs), then ``--repeats`` calls timed whole, each followed by
``bdl.sampling.check_bias`` on its draws timed alone; and, once, the check on a freshly compiled
copy of the model, whose first call pays the compilation of the gradient program. Printed: the
run's median wall time, the check's (warm and cold) and the warm check's share of the run.

    python benchmarks/bias_check.py
    python benchmarks/bias_check.py --models regression,digits --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import flax.linen as nn
import jax
import jax.numpy as jnp

import bdl
from bdl.data import digits, linear_regression
from bdl.sampling import check_bias


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(10)(nn.relu(nn.Dense(100)(x)))


def gaussian():
    return bdl.compile(
        bdl.Potential(
            lambda t: -0.5 * jnp.sum(t**2), init=lambda k: jax.random.normal(k, (100,)), name="g"
        )
    )


def regression():
    model = bdl.Model(
        network=lambda p, x: x @ p["w"],
        params={"w": jnp.zeros(5)},
        likelihood=bdl.Gaussian(scale=0.5),
        prior=bdl.Normal(1.0),
    )
    return bdl.compile(model, linear_regression(n=200, dim=5), batch_size=20)


def mlp_digits():
    model = bdl.Model(
        network=MLP(), likelihood=bdl.Categorical(), prior=bdl.Normal(1.0), temperature=1.0
    )
    return bdl.compile(model, digits(), batch_size=32)


#: name -> (model builder, kernel, steps, burn-in, thin)
CASES = {
    "gaussian": (gaussian, lambda: bdl.kernels.sgld(0.05), 20_000, 2_000, 10),
    "regression": (
        regression,
        lambda: bdl.kernels.get("sghmc", learning_rate=0.002, momentum=0.9),
        20_000,
        2_000,
        10,
    ),
    "digits": (mlp_digits, lambda: bdl.kernels.get("sghmc"), 5_000, 1_000, 100),
}


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def measure(name: str, repeats: int) -> None:
    build, kernel_of, steps, burn_in, thin = CASES[name]
    target, kernel = build(), kernel_of()

    def run(seed: int):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return bdl.sample(target, kernel, num_steps=steps, burn_in=burn_in, thin=thin,
                              num_chains=4, seed=seed)  # fmt: skip

    run(0)  # compiles the run's and the checks' programs
    runs, checks = [], []
    for seed in range(1, repeats + 1):
        samples, seconds = timed(lambda seed=seed: run(seed))
        runs.append(seconds)
        _, seconds = timed(lambda samples=samples: check_bias(samples, target))
        checks.append(seconds)
    fresh = build()  # a new target: the check compiles its gradient program again
    _, cold = timed(lambda: check_bias(samples, fresh))
    run_s, check_s = statistics.median(runs), statistics.median(checks)
    print(
        f"{name:11s} run {run_s:7.3f} s   check warm {check_s:6.3f} s "
        f"({100 * check_s / run_s:4.1f} % of the run)   check cold {cold:6.3f} s",
        flush=True,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; 4 chains; medians of "
          f"{args.repeats} calls")  # fmt: skip
    for name in args.models.split(","):
        measure(name, args.repeats)


if __name__ == "__main__":
    main()

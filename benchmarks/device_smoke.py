"""A short SGHMC run of the README's example on the default backend: checks that bdl runs on
this machine's JAX (and its accelerator) before the timed benchmarks of ``device_run.sh``."""

import time

import flax.linen as nn
import jax

import bdl
from bdl.data import digits


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return nn.Dense(10)(nn.relu(nn.Dense(100)(x)))


def main() -> None:
    t0 = time.perf_counter()
    data = digits()
    model = bdl.Model(
        network=MLP(), likelihood=bdl.Categorical(), prior=bdl.Normal(1.0), temperature=1.0
    )
    compiled = bdl.compile(model, data, batch_size=32)
    samples = bdl.sample(
        compiled, bdl.kernels.get("sghmc"), num_steps=2_000, burn_in=1_000, thin=100, num_chains=4
    )
    probs = compiled.predict(samples.flat(), compiled.x_test)
    accuracy = float((probs.argmax(-1) == compiled.y_test).mean())
    print(
        f"backend {jax.default_backend()} ({jax.devices()[0].device_kind}): "
        f"test accuracy {accuracy:.3f}, {time.perf_counter() - t0:.1f} s with compilation"
    )


if __name__ == "__main__":
    main()

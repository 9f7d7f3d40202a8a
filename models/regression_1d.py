"""A 1-D regression MLP on y = sin(x) + noise with a gap between two input clusters."""

import flax.linen as nn

import bdl
from bdl.data import regression_1d_gap


class MLP(nn.Module):
    width: int = 50

    @nn.compact
    def __call__(self, x):
        x = nn.tanh(nn.Dense(self.width)(x))
        x = nn.tanh(nn.Dense(self.width)(x))
        return nn.Dense(1)(x)


def build(width: int = 50, temperature: float = 1.0) -> bdl.ModelSpec:
    data = regression_1d_gap(n=100, noise_sd=0.1, seed=0)
    model = bdl.Model(
        network=MLP(width=width),
        likelihood=bdl.Gaussian(scale=0.1),
        prior=bdl.Normal(1.0),
        temperature=temperature,
        name="regression_1d",
    )
    return bdl.ModelSpec(
        model,
        data,
        batch_size=20,
        kernels={"sghmc": {"step_size": 2e-3, "friction": 20.0}, "sgld": {"step_size": 1e-5}},
        num_steps=20_000,
        burn_in=5_000,
        thin=50,
        description="1-D regression with a gap (tanh MLP, 2x50)",
    )

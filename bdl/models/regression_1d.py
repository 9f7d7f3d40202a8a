"""A 1-D regression MLP on y = sin(x) + noise with a gap between two input clusters."""

import flax.linen as nn

import bdl
from bdl.data import regression_1d_gap


class MLP(nn.Module):
    width: int = 16

    @nn.compact
    def __call__(self, x):
        x = nn.tanh(nn.Dense(self.width)(x))
        x = nn.tanh(nn.Dense(self.width)(x))
        return nn.Dense(1)(x)


def build(width: int = 16, temperature: float = 1.0) -> bdl.ModelSpec:
    data = regression_1d_gap(n=100, noise_sd=0.1, seed=0)
    model = bdl.Model(
        network=MLP(width=width),
        likelihood=bdl.Gaussian(scale=0.1),
        prior=bdl.Normal(1.0),
        temperature=temperature,
        name="regression_1d",
    )
    # in full, as every model file declares it: the files share no code (bdl/models/__init__.py)
    return bdl.ModelSpec(
        model,
        data,
        batch_size=20,
        # validated against NUTS at width 16 (docs/model-files.md): the noise sd 0.1 makes the
        # energy stiff (largest Hessian eigenvalue 7.6e5), so steps are small and runs long.
        # SGLD's step is held below 2/7.6e5 by that eigenvalue, and its flattest directions then
        # need ten million steps (3.2 million left a bulk ESS of 274): its own run lengths
        kernels={
            "sghmc": {"step_size": 2.5e-4, "friction": 20.0},
            "sgld": {"step_size": 2e-6, "num_steps": 10_000_000, "burn_in": 400_000, "thin": 9_600},
        },
        num_steps=1_600_000,
        burn_in=100_000,
        thin=1_500,
        description=f"1-D regression with a gap (tanh MLP, 2x{width})",
    )

"""An MLP on data drawn from an MLP prior (Wenzel et al. 2020, App. N), depth 1 to 3.

The generating network: depth-``depth`` ReLU MLP with 10 units, He-normal weights, N(0, 0.05²)
biases, 5-D standard normal inputs, 3 classes; ``n_train`` training points (default 100) and
10,000 test points. The model uses the same architecture and prior, so it is well specified.
"""

import flax.linen as nn

import bdl
from bdl.data import mlp_prior_data


# a flax module's fields, then its __call__, as in resnet20_cifar: the networks share no layers
class MLP(nn.Module):
    depth: int = 2
    width: int = 10
    classes: int = 3

    @nn.compact
    def __call__(self, x):
        for _ in range(self.depth):
            x = nn.relu(nn.Dense(self.width)(x))
        return nn.Dense(self.classes)(x)


def build(
    depth: int = 2,
    temperature: float = 1.0,
    n_test: int = 10_000,
    n_train: int = 100,
    batch_size: int = 100,
) -> bdl.ModelSpec:
    if depth not in (1, 2, 3):
        raise ValueError(f"depth must be 1, 2 or 3; got {depth}.")
    if not isinstance(n_train, int) or n_train < 1:
        raise ValueError(f"n_train must be a positive integer; got {n_train!r}.")
    if not isinstance(batch_size, int) or not 1 <= batch_size <= n_train:
        raise ValueError(
            f"batch_size must be an integer in [1, n_train={n_train}]; got {batch_size!r}."
        )
    data = mlp_prior_data(depth=depth, n_train=n_train, n_test=n_test, seed=0)
    model = bdl.Model(
        network=MLP(depth=depth),
        likelihood=bdl.Categorical(),
        prior=bdl.ByPath({"bias": bdl.Normal(0.05)}, default=bdl.HeNormal()),
        temperature=temperature,
        name=f"mlp_prior_data_depth{depth}",
    )
    # in full, as every model file declares it: the files share no code (bdl/models/__init__.py)
    return bdl.ModelSpec(
        model,
        data,
        batch_size=batch_size,
        kernels={"sghmc": {"step_size": 0.02, "friction": 5.0}, "sgld": {"step_size": 5e-4}},
        num_steps=200_000,
        burn_in=20_000,
        thin=200,
        description=f"depth-{depth} MLP on prior-drawn data (n={n_train})",
    )

"""An MLP classifier on the 8×8 digits (scikit-learn, 1,797 images, 10 classes)."""

import bdl
from bdl.data import digits


def build(
    width: int = 100, depth: int = 2, temperature: float = 1.0, batch_size: int = 32
) -> bdl.ModelSpec:
    data = digits()
    model = bdl.Model(
        network=bdl.layers.MLP(hidden=(width,) * depth),
        likelihood=bdl.Categorical(),
        prior=bdl.Normal(1.0),
        temperature=temperature,
        name="mlp_digits",
    )
    # in full, as every model file declares it: the files share no code (bdl/models/__init__.py)
    return bdl.ModelSpec(
        model,
        data,
        batch_size=batch_size,
        kernels={"sghmc": {"learning_rate": 0.05, "momentum": 0.9}, "sgld": {"step_size": 1e-4}},
        num_steps=10_000,
        burn_in=2_000,
        thin=100,
        description=f"MLP {depth}x{width} ReLU on digits (n=1437 train)",
    )

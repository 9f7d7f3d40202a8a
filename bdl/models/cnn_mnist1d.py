"""A small 1-D CNN on MNIST-1D (4,000 / 1,000 signals of length 40, 10 classes), with or without
data augmentation by random circular shifts of the signal.

The network follows the MNIST-1D paper's CNN (Greydanus 2020): three convolutions of ``width``
channels (kernel 5, then 3 and 3, stride 2, padding 1, ReLU) and a linear read-out,
≈ 5.2k parameters at width 25.
"""

import flax.linen as nn

import bdl
from bdl.data import mnist1d


class CNN1D(nn.Module):
    width: int = 25
    classes: int = 10
    frn: bool = False

    @nn.compact
    def __call__(self, x):
        h = x[..., None]  # (batch, 40) -> (batch, 40, 1)
        for kernel in (5, 3, 3):
            h = nn.Conv(self.width, (kernel,), strides=2, padding=1)(h)
            h = bdl.layers.FilterResponseNorm()(h) if self.frn else nn.relu(h)
        return nn.Dense(self.classes)(h.reshape(h.shape[0], -1))


def build(
    augment: bool = False,
    max_shift: int = 4,
    width: int = 25,
    frn: bool = False,
    temperature: float = 1.0,
    batch_size: int = 100,
    seed: int = 42,
) -> bdl.ModelSpec:
    """``augment=True`` shifts every training signal by s ~ U{−max_shift, …, max_shift}
    (circularly) at every step; ``frn=True`` puts filter response normalisation with TLU in
    place of each ReLU; ``seed`` is the data generator's."""
    data = mnist1d(seed=seed)
    model = bdl.Model(
        network=CNN1D(width=width, frn=frn),
        likelihood=bdl.Categorical(),
        prior=bdl.Normal(1.0),
        temperature=temperature,
        augment=bdl.augment.random_shift(max_shift) if augment else None,
        name="cnn_mnist1d",
    )
    # in full, as every model file declares it: the files share no code (bdl/models/__init__.py)
    return bdl.ModelSpec(
        model,
        data,
        batch_size=batch_size,
        kernels={"sghmc": {"learning_rate": 0.05, "momentum": 0.9}, "sgld": {"step_size": 1e-5}},
        num_steps=8_000,
        burn_in=4_000,
        thin=200,
        description=(
            f"1-D CNN (3 conv × {width}{', FRN' if frn else ''}) on MNIST-1D (n=4000 train)"
            + (f", random shifts ±{max_shift}" if augment else "")
        ),
    )

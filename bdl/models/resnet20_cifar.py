"""ResNet-20 with filter response normalisation on CIFAR-10 or CIFAR-100: the clean-likelihood
network of Wenzel et al. (2020, App. A.1 and K.4), with their data augmentation as an option.

The network is the ResNet-20 of He et al. (2016, Sec. 4.2) in the Keras-example form Wenzel et
al. start from (biases in every convolution, 1×1 projection shortcuts where the shape changes):
a 3×3 convolution of 16 channels, three stages of n = (depth − 2)/6 basic blocks with 16, 32 and
64 channels (stride 2 at the start of the second and third), global average pooling and a dense
read-out; ≈ 0.27M parameters at depth 20. Every batch normalisation + ReLU is replaced by filter
response normalisation + TLU (:class:`bdl.layers.FilterResponseNorm`), so the likelihood is a
function of θ alone; in a block, y = relu(FRN(conv(TLU(FRN(conv(x))))) + shortcut(x)).

The data come from TensorFlow Datasets and must be prepared beforehand (docs/data.md); nothing is
downloaded. ``subset=N`` keeps the first N training and test images, for CPU smoke runs such as

    bdl sample resnet20_cifar --kernel sghmc --tuned --chains 1 --steps 4 --option subset=256

The default run lengths are the paper's, in epochs of n/B steps: 1,500 epochs, sampling from
epoch 150, one draw per 50-epoch cycle (``wenzel``: ℓ = 0.1, β = 0.98, cosine cycles).
"""

from dataclasses import replace

import flax.linen as nn
import jax.numpy as jnp

import bdl
from bdl.data import cifar10, cifar100

CONV_INIT = nn.initializers.he_normal()


class Block(nn.Module):
    channels: int
    stride: int = 1

    @nn.compact
    def __call__(self, x):
        h = nn.Conv(self.channels, (3, 3), self.stride, kernel_init=CONV_INIT)(x)
        h = bdl.layers.FilterResponseNorm()(h)
        h = nn.Conv(self.channels, (3, 3), kernel_init=CONV_INIT)(h)
        h = bdl.layers.FilterResponseNorm(use_tlu=False)(h)
        if self.stride != 1 or x.shape[-1] != self.channels:
            x = nn.Conv(self.channels, (1, 1), self.stride, kernel_init=CONV_INIT)(x)
        return nn.relu(h + x)


class ResNet(nn.Module):
    depth: int = 20
    classes: int = 10
    width: int = 16

    @nn.compact
    def __call__(self, x):
        h = nn.Conv(self.width, (3, 3), kernel_init=CONV_INIT)(x)
        h = bdl.layers.FilterResponseNorm()(h)
        for stage in range(3):
            for block in range((self.depth - 2) // 6):
                stride = 2 if stage > 0 and block == 0 else 1
                h = Block(self.width * 2**stage, stride)(h)
        return nn.Dense(self.classes)(jnp.mean(h, axis=(1, 2)))


def build(
    dataset: str = "cifar10",
    data_dir: str | None = None,
    augment: bool = True,
    subset: int | None = None,
    depth: int = 20,
    temperature: float = 1.0,
    batch_size: int = 128,
    epochs: int = 1500,
) -> bdl.ModelSpec:
    """``dataset`` ``"cifar10"`` or ``"cifar100"``; ``augment`` the random crop (4-pixel zero
    padding) and horizontal flip of Wenzel et al. (App. A.1); ``subset=N`` the first N training
    and test images; ``depth`` 6k + 2 (20: ResNet-20; 8 for the quickest checks)."""
    loaders = {"cifar10": cifar10, "cifar100": cifar100}
    if dataset not in loaders:
        raise ValueError(f"dataset must be 'cifar10' or 'cifar100'; got {dataset!r}.")
    if not (isinstance(depth, int) and depth >= 8 and (depth - 2) % 6 == 0):
        raise ValueError(f"depth must be 6k + 2 with k >= 1 (8, 14, 20, 32, …); got {depth!r}.")
    data = loaders[dataset](data_dir=data_dir)
    if subset is not None:
        if not (isinstance(subset, int) and subset >= 1):
            raise ValueError(f"subset must be a positive number of images; got {subset!r}.")
        data = replace(
            data,
            name=f"{data.name}[:{subset}]",
            x_train=data.x_train[:subset],
            y_train=data.y_train[:subset],
            x_test=data.x_test[:subset],
            y_test=data.y_test[:subset],
        )
    batch_size = min(batch_size, data.n)
    model = bdl.Model(
        network=ResNet(depth=depth, classes=data.num_classes),
        likelihood=bdl.Categorical(),
        prior=bdl.Normal(1.0),
        temperature=temperature,
        augment=(
            bdl.augment.chain(bdl.augment.random_crop(4), bdl.augment.horizontal_flip())
            if augment
            else None
        ),
        name=f"resnet{depth}_{dataset}",
    )
    epoch = data.n // batch_size
    # in full, as every model file declares it: the files share no code (bdl/models/__init__.py)
    return bdl.ModelSpec(
        model,
        data,
        batch_size=batch_size,
        kernels={
            "wenzel": {
                "learning_rate": 0.1,
                "momentum": 0.98,
                "cycle_length": 50,
                "sampling_start": 150,
            },
            "sghmc": {"learning_rate": 0.1, "momentum": 0.98},
        },
        num_steps=epochs * epoch,
        burn_in=150 * epoch,
        thin=50 * epoch,
        description=(
            f"ResNet-{depth} (FRN) on {data.name} (n={data.n} train)"
            + (", random crop + flip" if augment else "")
        ),
    )

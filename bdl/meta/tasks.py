"""The meta-training task distribution of L2E and Kinetic-L2E: datasets × architectures × priors.

Kim et al. (2024, Sec. 3.4 and App. I.2) meta-train on a distribution of Bayesian-neural-network
inference tasks: each outer iteration samples a dataset and an architecture, runs the learned
sampler on the training split and scores the collected samples on held-out data. bdl's
distribution is built from data that ship with the package or are generated on the fly, so
meta-training runs offline.

Families (name: data with train / held-out sizes; network; prior; dimension of θ):

* ``digits-mlp-8``: 8×8 digits, 1,437 / 360; MLP 64-8-10 ReLU; N(0, 1); 610.
* ``digits-mlp-16``: 8×8 digits; MLP 64-16-10 ReLU; N(0, 1); 1,210.
* ``digits-mlp-8x8``: 8×8 digits; MLP 64-8-8-10 ReLU; N(0, 1); 682.
* ``digits-cnn-4``: 8×8×1 digits; 3×3 convolution, 4 channels, stride 2, ReLU, dense 64-10;
  N(0, 1); 690.
* ``prior-mlp-1``: data from a depth-1 MLP prior (5-D inputs, 3 classes), 100 / 500;
  MLP 5-10-3 ReLU; He-normal weights, N(0, 0.05²) biases (the generating prior); 93.
* ``prior-mlp-2``: the same from a depth-2 MLP prior; MLP 5-10-10-3 ReLU; 203.
* ``signal-mlp-16``: a random 1-D signal (:func:`signal_1d`), 64 / 256; MLP 1-16-16-1 tanh,
  Gaussian likelihood σ = 0.2; N(0, 1); 321.
* ``iris-mlp-16``: iris, 120 / 30; MLP 4-16-3 ReLU; N(0, 1); 131.
* ``digits-rescnn-4``: 8×8×1 digits; 3×3 convolution, 4 channels, stride 2, ReLU, then one
  residual block x ← relu(x + conv₃ₓ₃(x)) with 4 channels, dense 64-10; N(0, 1); 838.
* ``digits-rescnn-4x2``: the same with two residual blocks; 986.
* ``mnist1d-mlp-16``, ``mnist1d-mlp-32``, ``mnist1d-mlp-16x16``, ``mnist1d-mlp-16x16x16``:
  MNIST-1D (40-sample 1-D signals, 10 classes), 1,000 / 500 drawn from a pool of 5,000
  (:func:`mnist1d_subsample`); MLPs 40-16-10, 40-32-10, 40-16-16-10 and 40-16-16-16-10 ReLU;
  N(0, 1); 826, 1,642, 1,098, 1,370.
* ``breast-cancer-mlp-24`` (held out): breast cancer, 455 / 114; MLP 30-24-2 ReLU; N(0, 1); 794.

A task of a family is a fresh train/held-out split (digits, iris, breast cancer: a stratified
split with the task's data seed; MNIST-1D: a stratified subsample of 100 / 50 signals per class
from the package's 5,000), a fresh draw of the generating network and its data
(prior-MLP data, Wenzel et al. 2020 App. N) or a fresh random signal
y = Σ_{j=1}^{3} a_j sin(ω_j x + ψ_j) + ε (1-D signals). Training tasks use even data seeds and
evaluation tasks odd ones, so no evaluation split or signal is ever trained on.

**Held out.** ``breast-cancer-mlp-24`` is never part of the training distribution: neither the
dataset (30 tabular features, 2 classes) nor the hidden width 24 appears in any training family.
It measures transfer to an unseen task, as CIFAR-10/100 and Tiny-ImageNet do in the paper
(whose meta-training sees only MNIST-like data). No MNIST-1D convolutional network is a training
family either: that architecture is kept for measuring transfer to an unseen architecture.

The residual CNNs and the MNIST-1D MLPs of varied width and depth move the distribution towards
Kim et al. (2024, App. I.2): CNNs of 1–5 layers of 4–16 channels with or without residual
connections on MNIST-like data, at sizes that keep one inner loop a few seconds on a CPU.

Every task is an ordinary compiled model (:func:`bdl.compile`) whose training split is its data
and whose held-out split is its ``x_test``/``y_test``. The tasks of one family share a
compiled template (arrays swapped, static structure shared), so a function jitted on one task
is reused for every other task of the family without recompiling. The SG-MCMC step size and
friction of a task come from the family's learning rate ℓ and momentum β in the
deep-learning parameterisation h = √(ℓ/n), C = (1 − β)√(n/ℓ) (docs/design.md, *The deep-learning
parameterisation*).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from bdl.compile.compiled_model import CompiledModel
from bdl.compile.compiler import compile as compile_model
from bdl.data import Dataset, breast_cancer, digits, iris, mlp_prior_data, mnist1d
from bdl.dsl import ByPath, Categorical, Gaussian, HeNormal, Model, Normal

__all__ = [
    "CNN",
    "FAMILIES",
    "FIRST_FAMILIES",
    "HELD_OUT",
    "MLP",
    "TRAINING_FAMILIES",
    "ResCNN",
    "Task",
    "TaskDistribution",
    "TaskFamily",
    "family",
    "signal_1d",
]


# ------------------------------------------------------------------------------ networks
class MLP(nn.Module):
    """Dense layers of ``hidden`` units with ``activation``, then a linear output layer."""

    hidden: tuple[int, ...]
    outputs: int
    activation: str = "relu"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = {"relu": nn.relu, "tanh": nn.tanh}[self.activation]
        for width in self.hidden:
            x = act(nn.Dense(width)(x))
        return nn.Dense(self.outputs)(x)


class CNN(nn.Module):
    """3×3 same-padded ReLU convolutions with ``channels`` and stride ``stride``, then a linear
    read-out of the flattened feature map (inputs NHWC)."""

    channels: tuple[int, ...]
    outputs: int
    stride: int = 2

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        s = (self.stride, self.stride)
        for c in self.channels:
            x = nn.relu(nn.Conv(c, (3, 3), strides=s, padding="SAME")(x))
        return nn.Dense(self.outputs)(x.reshape(x.shape[0], -1))


class ResCNN(nn.Module):
    """A 3×3 same-padded ReLU convolution with ``channels`` and stride 2, then ``blocks``
    residual blocks x ← relu(x + conv₃ₓ₃(x)) at the same width, then a linear read-out of the
    flattened feature map (inputs NHWC)."""

    channels: int
    blocks: int
    outputs: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.relu(nn.Conv(self.channels, (3, 3), strides=(2, 2), padding="SAME")(x))
        for _ in range(self.blocks):
            x = nn.relu(x + nn.Conv(self.channels, (3, 3), padding="SAME")(x))
        return nn.Dense(self.outputs)(x.reshape(x.shape[0], -1))


# ------------------------------------------------------------------------------ data
@functools.cache
def _mnist1d_pool() -> tuple[np.ndarray, np.ndarray]:
    """The package's MNIST-1D signals (seed 42, 5,000 examples), both splits pooled."""
    data = mnist1d()
    return (
        np.concatenate([data.x_train, data.x_test]).astype(np.float32),
        np.concatenate([data.y_train, data.y_test]).astype(np.int32),
    )


def mnist1d_subsample(seed: int, per_class_train: int = 100, per_class_test: int = 50) -> Dataset:
    """A stratified subsample of MNIST-1D: ``per_class_train`` training and ``per_class_test``
    held-out signals of each of the 10 classes, disjoint, drawn without replacement from the
    package's 5,000 (:func:`bdl.data.mnist1d`) with ``seed``; shuffled within each split."""
    x, y = _mnist1d_pool()
    rng = np.random.default_rng(np.random.SeedSequence([seed, 2]))
    train, test = [], []
    for c in range(10):
        idx = rng.permutation(np.flatnonzero(y == c))
        train.append(idx[:per_class_train])
        test.append(idx[per_class_train : per_class_train + per_class_test])
    tr, te = rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(test))
    return Dataset("mnist1d", x[tr], y[tr], x[te], y[te], num_classes=10)


def signal_1d(
    seed: int, n_train: int = 64, n_test: int = 256, noise_sd: float = 0.2, components: int = 3
) -> Dataset:
    """A random 1-D regression signal: y = Σ_j a_j sin(ω_j x + ψ_j) + ε, ε ~ N(0, noise_sd²).

    a_j ~ N(0, 1/components), ω_j ~ U(0.5, 2.5), ψ_j ~ U(0, 2π); inputs x ~ U(−3, 3) for both
    splits (held-out points interpolate). Inputs ``(n, 1)``, targets ``(n,)``, float32.
    """
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1]))
    a = rng.normal(0.0, 1.0 / math.sqrt(components), components)
    w = rng.uniform(0.5, 2.5, components)
    psi = rng.uniform(0.0, 2.0 * math.pi, components)

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.uniform(-3.0, 3.0, n)
        f = (a[None] * np.sin(w[None] * x[:, None] + psi[None])).sum(axis=1)
        y = f + noise_sd * rng.standard_normal(n)
        return x[:, None].astype(np.float32), y.astype(np.float32)

    x_train, y_train = draw(n_train)
    x_test, y_test = draw(n_test)
    return Dataset("signal_1d", x_train, y_train, x_test, y_test)


def _dataset(kind: str, seed: int) -> Dataset:
    if kind == "digits":
        return digits(seed=seed)
    if kind == "digits_image":
        return digits(seed=seed, flatten=False)
    if kind == "prior_mlp_1":
        return mlp_prior_data(depth=1, n_train=100, n_test=500, seed=seed)
    if kind == "prior_mlp_2":
        return mlp_prior_data(depth=2, n_train=100, n_test=500, seed=seed)
    if kind == "signal_1d":
        return signal_1d(seed)
    if kind == "iris":
        return iris(seed=seed)
    if kind == "breast_cancer":
        return breast_cancer(seed=seed)
    if kind == "mnist1d":
        return mnist1d_subsample(seed)
    raise ValueError(f"unknown task dataset {kind!r}.")  # pragma: no cover - catalogue is fixed


# ------------------------------------------------------------------------------ families
@dataclasses.dataclass(frozen=True)
class TaskFamily:
    """A dataset × architecture × prior; its tasks differ in their data (split or draw).

    Attributes:
        name: the family's name in configs.
        dataset: the data generator (see :func:`_dataset`).
        network: ``"mlp"``, ``"cnn"`` or ``"rescnn"``.
        hidden: hidden widths (MLP), channels (CNN) or (channels, residual blocks) (ResCNN).
        outputs: classes (classification) or 1 (regression).
        activation: hidden activation of an MLP.
        prior: ``"normal"`` (N(0, 1) on every weight) or ``"he"`` (He-normal weights,
            N(0, 0.05²) biases: the generating prior of the prior-MLP data).
        regression_scale: Gaussian noise scale for regression (``None``: classification).
        batch_size: minibatch size B.
        learning_rate, momentum: SG-MCMC step in the deep-learning parameterisation.
    """

    name: str
    dataset: str
    network: str
    hidden: tuple[int, ...]
    outputs: int
    activation: str = "relu"
    prior: str = "normal"
    regression_scale: float | None = None
    batch_size: int = 32
    learning_rate: float = 0.05
    momentum: float = 0.9

    def declare(self) -> Model:
        """The :class:`bdl.Model` of this family (network, likelihood, prior, T = 1)."""
        if self.network == "mlp":
            net: nn.Module = MLP(self.hidden, self.outputs, self.activation)
        elif self.network == "rescnn":
            net = ResCNN(self.hidden[0], self.hidden[1], self.outputs)
        else:
            net = CNN(self.hidden, self.outputs)
        if self.regression_scale is None:
            likelihood: Any = Categorical()
        else:
            likelihood = Gaussian(scale=self.regression_scale)
        if self.prior == "he":
            prior: Any = ByPath({"bias": Normal(0.05)}, default=HeNormal())
        else:
            prior = Normal(1.0)
        return Model(net, likelihood, prior, temperature=1.0, name=self.name)


FAMILIES: dict[str, TaskFamily] = {
    f.name: f
    for f in (
        TaskFamily("digits-mlp-8", "digits", "mlp", (8,), 10, learning_rate=0.1),
        TaskFamily("digits-mlp-16", "digits", "mlp", (16,), 10),
        TaskFamily("digits-mlp-8x8", "digits", "mlp", (8, 8), 10, learning_rate=0.025),
        TaskFamily("digits-cnn-4", "digits_image", "cnn", (4,), 10),
        TaskFamily(
            "prior-mlp-1", "prior_mlp_1", "mlp", (10,), 3, prior="he", batch_size=20,
            learning_rate=0.08,
        ),
        TaskFamily(
            "prior-mlp-2", "prior_mlp_2", "mlp", (10, 10), 3, prior="he", batch_size=20,
            learning_rate=0.04,
        ),
        TaskFamily(
            "signal-mlp-16", "signal_1d", "mlp", (16, 16), 1, activation="tanh",
            regression_scale=0.2, batch_size=16, learning_rate=0.002, momentum=0.95,
        ),
        TaskFamily("iris-mlp-16", "iris", "mlp", (16,), 3, batch_size=24, learning_rate=0.025),
        TaskFamily("digits-rescnn-4", "digits_image", "rescnn", (4, 1), 10),
        TaskFamily("digits-rescnn-4x2", "digits_image", "rescnn", (4, 2), 10),
        TaskFamily("mnist1d-mlp-16", "mnist1d", "mlp", (16,), 10),
        TaskFamily("mnist1d-mlp-32", "mnist1d", "mlp", (32,), 10),
        TaskFamily("mnist1d-mlp-16x16", "mnist1d", "mlp", (16, 16), 10),
        TaskFamily("mnist1d-mlp-16x16x16", "mnist1d", "mlp", (16, 16, 16), 10),
        TaskFamily("breast-cancer-mlp-24", "breast_cancer", "mlp", (24,), 2),
    )
}  # fmt: skip

#: the family kept out of meta-training and used to measure transfer
HELD_OUT = "breast-cancer-mlp-24"
#: the families of the default training distribution
TRAINING_FAMILIES: tuple[str, ...] = tuple(name for name in FAMILIES if name != HELD_OUT)
#: the first eight training families, before the residual CNNs and MNIST-1D MLPs were added
#: (the shipped Kinetic-L2E parameters were trained on these)
FIRST_FAMILIES: tuple[str, ...] = TRAINING_FAMILIES[:8]


def family(name: str) -> TaskFamily:
    """The family called ``name`` (a key of :data:`FAMILIES`)."""
    if name not in FAMILIES:
        raise ValueError(f"unknown task family {name!r}; known families: {sorted(FAMILIES)}.")
    return FAMILIES[name]


@functools.cache
def _template(name: str) -> CompiledModel:
    """The family's compiled model on its seed-0 data; tasks swap the arrays (one per process,
    so jitted functions of one family compile once)."""
    fam = family(name)
    return compile_model(fam.declare(), _dataset(fam.dataset, 0), batch_size=fam.batch_size)


# ------------------------------------------------------------------------------ tasks
@dataclasses.dataclass(frozen=True, eq=False)
class Task:
    """One inference task: a compiled model on a training split, held out data in its
    ``x_test``/``y_test``, and the SG-MCMC step size h and friction C for it."""

    family: TaskFamily
    data_seed: int
    model: CompiledModel
    step_size: float
    friction: float

    @property
    def name(self) -> str:
        return f"{self.family.name}[{self.data_seed}]"


def make_task(name: str, data_seed: int) -> Task:
    """The task of family ``name`` with data seed ``data_seed``."""
    fam = family(name)
    template = _template(name)
    data = _dataset(fam.dataset, int(data_seed))
    regression = fam.regression_scale is not None
    arrays = (
        jnp.asarray(data.x_train, jnp.float32),
        jnp.asarray(data.y_train, jnp.float32 if regression else jnp.int32),
        jnp.asarray(data.x_test, jnp.float32),
        jnp.asarray(data.y_test, jnp.float32 if regression else jnp.int32),
    )
    old = (template.x_train, template.y_train, template.x_test, template.y_test)
    for new, ref in zip(arrays, old, strict=True):
        if new.shape != ref.shape or new.dtype != ref.dtype:  # pragma: no cover - fixed sizes
            raise ValueError(f"{name}: task data shapes differ from the family's template.")
    model = eqx.tree_at(lambda m: (m.x_train, m.y_train, m.x_test, m.y_test), template, arrays)
    n = model.n
    step_size = math.sqrt(fam.learning_rate / n)
    friction = (1.0 - fam.momentum) * math.sqrt(n / fam.learning_rate)
    return Task(fam, int(data_seed), model, step_size, friction)


class TaskDistribution:
    """A uniform distribution over ``families`` (Kim et al. 2024, Alg. 1 line 4: "sample task").

    Args:
        families: names from :data:`FAMILIES` to train on.
        held_out: a family kept out of training (evaluation only); must not be in ``families``.
    """

    def __init__(self, families: Sequence[str], held_out: str | None = HELD_OUT):
        families = tuple(families)
        if not families:
            raise ValueError("families must name at least one task family.")
        for name in families:
            family(name)
        if len(set(families)) != len(families):
            raise ValueError(f"families has duplicates: {list(families)}.")
        if held_out is not None:
            family(held_out)
            if held_out in families:
                raise ValueError(
                    f"held_out family {held_out!r} is also a training family; a held-out task "
                    "must stay out of the training distribution."
                )
        self.families = families
        self.held_out = held_out

    def sample(self, seed: int, iteration: int) -> Task:
        """The training task of outer iteration ``iteration``: a family drawn uniformly and an
        even data seed, both a pure function of ``(seed, iteration)`` (so resuming a run
        replays the same tasks)."""
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), int(iteration)]))
        name = self.families[int(rng.integers(len(self.families)))]
        return make_task(name, 2 * int(rng.integers(2**30)))

    def evaluation_tasks(self, seed: int) -> list[Task]:
        """One task per training family and one of the held-out family, with odd data seeds
        (never trained on)."""
        names = [*self.families, *([self.held_out] if self.held_out else [])]
        return [make_task(name, 2 * (int(seed) + 1000 * i) + 1) for i, name in enumerate(names)]

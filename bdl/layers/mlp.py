"""A ReLU multilayer perceptron, the network of the shipped digits model files."""

from __future__ import annotations

import flax.linen as nn
import jax


class MLP(nn.Module):
    """Dense layers of the widths ``hidden``, each followed by a ReLU, then a dense read-out of
    ``classes`` outputs (logits for a classifier).

    Attributes:
        hidden: the hidden layers' widths, input side first.
        classes: the number of outputs.
    """

    hidden: tuple[int, ...] = (100, 100)
    classes: int = 10

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for width in self.hidden:
            x = nn.relu(nn.Dense(width)(x))
        return nn.Dense(self.classes)(x)

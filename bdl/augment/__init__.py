"""On-device data augmentation, drawn inside the minibatch energy.

An augmentation is a function ``augment(key, x) -> x`` on **one** example (no batch axis) that
returns an example of the same shape and dtype. Declared with the model
(``bdl.Model(..., augment=...)``) or at compile time (``bdl.compile(..., augment=...)``), it is
applied to every example of every minibatch, with a key per example drawn from the chain's own
augmentation stream (:func:`augment_batch`); the full-data energy, NUTS's potential and the
predictive are unchanged.

With augmentation a minibatch energy estimates, without bias, the energy of the *Jensen
posterior* (Wenzel et al. 2020, Sec. 5 and App. K.2)

    U_J(θ) = −Σ_i E_z[log p(y_i | a_z(x_i), θ)] − log p(θ),

where z are the augmentation's random parameters; the data count n is not changed.
"""

from bdl.augment.base import (
    Augmentation,
    as_augmentation,
    augment_batch,
    chain,
    check_augmentation,
)
from bdl.augment.images import horizontal_flip, random_crop
from bdl.augment.signals import random_shift

__all__ = [
    "Augmentation",
    "as_augmentation",
    "augment_batch",
    "chain",
    "check_augmentation",
    "horizontal_flip",
    "random_crop",
    "random_shift",
]

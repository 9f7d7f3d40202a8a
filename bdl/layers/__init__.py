"""Network layers whose output for one example depends on θ and that example alone.

Batch normalisation does not qualify (its training-mode statistics come from the other examples
of the minibatch), so bdl rejects it; these take its place:

* :class:`FilterResponseNorm` — filter response normalisation with a thresholded linear unit
  (Singh & Krishnan 2020), the replacement used by Wenzel et al. (2020, App. K.4) for their
  clean-likelihood ResNet-20;
* ``flax.linen.GroupNorm`` and ``flax.linen.LayerNorm`` (Wu & He 2018; Ba et al. 2016), which
  normalise over channels (and positions) of one example.

:class:`MLP` is a ReLU multilayer perceptron built of such layers alone (dense layers and ReLUs).
"""

from bdl.layers.filter_response_norm import FilterResponseNorm
from bdl.layers.mlp import MLP

__all__ = ["MLP", "FilterResponseNorm"]

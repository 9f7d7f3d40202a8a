"""An MLP classifier on the 8×8 digits with a Gamma precision per layer, drawn by Gibbs steps.

Each layer's weight matrix W_l has its own precision (Neal 1996, §2.2; MacKay 1992):

    W_l,ij ~ N(0, 1/λ_l),   λ_l ~ Gamma(1, 1),   biases ~ N(0, 1),

in centred form, so the conditional of λ_l is Gamma and the ``gibbs`` wrapper draws it exactly
every few steps of SGHMC, as Chen, Fox & Guestrin (2014, Sec. 5) resample weight-decay precisions.
The precisions are ``position["hyper"]["precision"][layer]["precision"]`` (as log λ_l).
"""

import dataclasses

import numpyro.distributions as dist

import bdl
from bdl.data import digits


def build(
    width: int = 100,
    depth: int = 2,
    temperature: float = 1.0,
    batch_size: int = 32,
    n_train: int | None = None,
) -> bdl.ModelSpec:
    """``n_train``: keep only the first n training images (all 1,437 by default)."""
    data = digits()
    if n_train is not None:
        data = dataclasses.replace(
            data, x_train=data.x_train[:n_train], y_train=data.y_train[:n_train]
        )
    prior = bdl.ByPath(
        {
            "kernel": bdl.HierarchicalNormal(
                precision=dist.Gamma(1.0, 1.0), per="leaf", name="precision"
            )
        },
        default=bdl.Normal(1.0),
    )
    model = bdl.Model(
        network=bdl.layers.MLP(hidden=(width,) * depth),
        likelihood=bdl.Categorical(),
        prior=prior,
        temperature=temperature,
        name="mlp_digits_hierarchical",
    )
    # in full, as every model file declares it: the files share no code (bdl/models/__init__.py)
    return bdl.ModelSpec(
        model,
        data,
        batch_size=batch_size,
        kernels={
            "gibbs": {"base": "sghmc", "every": 100, "learning_rate": 0.05, "momentum": 0.9},
            "sghmc": {"learning_rate": 0.05, "momentum": 0.9},
        },
        num_steps=10_000,
        burn_in=2_000,
        thin=100,
        description=(
            f"MLP {depth}x{width} ReLU on digits with a Gamma precision per layer "
            f"(n={data.n} train)"
        ),
    )

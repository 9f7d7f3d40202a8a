"""Bayesian logistic regression on the breast-cancer data (scikit-learn, 30 features, 569 cases)."""

import jax.numpy as jnp

import bdl
from bdl.data import breast_cancer


def logit(params, x):
    return x @ params["w"] + params["b"]


def build(temperature: float = 1.0, batch_size: int = 64) -> bdl.ModelSpec:
    data = breast_cancer()
    model = bdl.Model(
        network=logit,
        params={"w": jnp.zeros(data.x_train.shape[1]), "b": jnp.zeros(())},
        likelihood=bdl.Bernoulli(),
        prior=bdl.Normal(1.0),
        temperature=temperature,
        name="logistic_breast_cancer",
    )
    return bdl.ModelSpec(
        model,
        data,
        batch_size=batch_size,
        kernels={"sghmc": {"learning_rate": 0.02, "momentum": 0.9}, "sgld": {"step_size": 2e-4}},
        num_steps=6_000,
        burn_in=1_000,
        thin=10,
        description="logistic regression, breast cancer (n=455 train, d=31)",
    )

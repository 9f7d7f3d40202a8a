"""Normalisation that is a function of θ and one example: FRN + TLU, and the BatchNorm error."""

from __future__ import annotations

import warnings

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import bdl
from bdl.layers import FilterResponseNorm

RNG = np.random.default_rng(0)
X = RNG.normal(size=(24, 8)).astype(np.float32)
Y = RNG.integers(0, 3, size=24)


def _frn_reference(x, scale, bias, threshold, eps=1e-6):
    """Singh & Krishnan (2020), Eq. 1–3, in float64 NumPy."""
    x = np.asarray(x, np.float64)
    nu2 = np.mean(x**2, axis=tuple(range(1, x.ndim - 1)), keepdims=True)
    return np.maximum(scale * x / np.sqrt(nu2 + eps) + bias, threshold)


@pytest.mark.parametrize("shape", [(3, 5, 4, 2), (3, 7, 2)])
def test_frn_matches_the_paper_equations(shape) -> None:
    layer = FilterResponseNorm()
    x = jnp.asarray(RNG.normal(size=shape) * 3.0, jnp.float32)
    params = layer.init(jax.random.key(0), x)["params"]
    assert {k: v.shape for k, v in params.items()} == {
        "scale": (shape[-1],),
        "bias": (shape[-1],),
        "threshold": (shape[-1],),
    }
    params = {k: jnp.asarray(RNG.normal(size=v.shape), jnp.float32) for k, v in params.items()}
    out = layer.apply({"params": params}, x)
    expected = _frn_reference(x, *(np.asarray(params[k]) for k in ("scale", "bias", "threshold")))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    no_tlu = FilterResponseNorm(use_tlu=False)
    out = no_tlu.apply({"params": {k: params[k] for k in ("scale", "bias")}}, x)
    expected = _frn_reference(x, np.asarray(params["scale"]), np.asarray(params["bias"]), -np.inf)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_frn_output_of_an_example_does_not_depend_on_the_batch() -> None:
    layer = FilterResponseNorm()
    x = jnp.asarray(RNG.normal(size=(6, 9, 3)), jnp.float32)
    params = layer.init(jax.random.key(0), x)
    whole = layer.apply(params, x)
    alone = jnp.concatenate([layer.apply(params, x[i : i + 1]) for i in range(6)])
    np.testing.assert_array_equal(whole, alone)


def test_frn_rejects_inputs_without_spatial_axes() -> None:
    with pytest.raises(ValueError, match=r"at least one spatial axis.*LayerNorm"):
        FilterResponseNorm().init(jax.random.key(0), jnp.ones((4, 3)))


class LinenBatchNorm(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(3)(nn.BatchNorm(use_running_average=False)(x))


def _networks():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Equinox's note on BatchNorm's default mode
        return {
            "linen": LinenBatchNorm(),
            "nnx": nnx.Sequential(
                nnx.Linear(8, 3, rngs=nnx.Rngs(0)), nnx.BatchNorm(3, rngs=nnx.Rngs(0))
            ),
            "equinox": eqx.nn.Sequential(
                [eqx.nn.Linear(8, 3, key=jax.random.key(0)), eqx.nn.BatchNorm(3, "batch")]
            ),
        }


@pytest.mark.parametrize("flavour", ["linen", "nnx", "equinox"])
def test_batch_norm_is_rejected_with_the_reason_and_the_alternatives(flavour: str) -> None:
    network = _networks()[flavour]
    with pytest.raises(ValueError, match="batch normalisation") as info:
        bdl.compile(bdl.Model(network, bdl.Categorical()), (X, Y), batch_size=8)
    message = str(info.value)
    assert "minibatch" in message and "not a function of θ alone" in message
    for alternative in ("bdl.layers.FilterResponseNorm", "GroupNorm", "LayerNorm"):
        assert alternative in message


def test_other_linen_state_is_rejected() -> None:
    class Counter(nn.Module):
        @nn.compact
        def __call__(self, x):
            self.variable("counter", "calls", lambda: jnp.zeros(()))
            return nn.Dense(3)(x)

    with pytest.raises(ValueError, match=r"\['counter'\] besides 'params'"):
        bdl.compile(bdl.Model(Counter(), bdl.Categorical()), (X, Y), batch_size=8)


def test_group_norm_and_frn_networks_compile_and_energies_are_per_example_sums() -> None:
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = nn.Conv(4, (3,))(x[..., None])
            h = FilterResponseNorm()(h)
            h = nn.GroupNorm(num_groups=2)(nn.Conv(4, (3,))(h))
            return nn.Dense(3)(h.reshape(h.shape[0], -1))

    compiled = bdl.compile(bdl.Model(Net(), bdl.Categorical()), (X, Y), batch_size=8)
    position = compiled.initial_position
    whole = compiled.log_likelihood(position, compiled.x_train, compiled.y_train)
    parts = jnp.concatenate(
        [
            compiled.log_likelihood(
                position, compiled.x_train[i : i + 8], compiled.y_train[i : i + 8]
            )
            for i in (0, 8, 16)
        ]
    )
    np.testing.assert_allclose(whole, parts, rtol=1e-6, atol=1e-6)

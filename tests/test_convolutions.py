"""Convolutions rewritten into XLA:CPU's canonical layout compute the same values and gradients,
for every dimension layout, stride, padding, dilation and grouping; and the sampling loop gives
the same draws whether a convolutional model's chains run under ``vmap`` or in turn."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import bdl
from bdl.utils.convolutions import canonical_convolution, canonical_convolutions, has_convolution

CASES = [
    # (spatial, lhs/rhs/out layouts, strides, padding, lhs dilation, rhs dilation, groups)
    (1, ("NWC", "WIO", "NWC"), (2,), ((1, 1),), (1,), (1,), 1),
    (1, ("NCW", "OIW", "NCW"), (1,), ((2, 0),), (2,), (1,), 1),
    (2, ("NHWC", "HWIO", "NHWC"), (1, 2), ((1, 1), (0, 2)), (1, 1), (2, 1), 1),
    (2, ("NCHW", "OIHW", "NCHW"), (2, 1), ((1, 0), (1, 1)), (1, 1), (1, 1), 2),
    (2, ("NHWC", "OIHW", "NCHW"), (1, 1), ((0, 0), (1, 1)), (1, 2), (1, 1), 1),
]


def _operands(spatial: int, layouts: tuple[str, str, str], groups: int):
    lhs_layout, rhs_layout, _ = layouts
    sizes = {"N": 3, "C": 4, "I": 4 // groups, "O": 6, "H": 7, "W": 6}
    if spatial == 1:
        sizes["W"] = 9
    kernel = {"H": 3, "W": 2}
    lhs_shape = [sizes[a] for a in lhs_layout]
    rhs_shape = [kernel[a] if a in "HW" else sizes[a] for a in rhs_layout]
    k1, k2 = jax.random.split(jax.random.key(0))
    return jax.random.normal(k1, lhs_shape), jax.random.normal(k2, rhs_shape)


@pytest.mark.parametrize("case", CASES, ids=[c[1][0] + "-" + c[1][2] for c in CASES])
def test_the_canonical_form_is_the_same_convolution(case) -> None:
    spatial, layouts, strides, padding, lhs_dil, rhs_dil, groups = case
    lhs, rhs = _operands(spatial, layouts, groups)

    def conv(lhs, rhs):
        return lax.conv_general_dilated(
            lhs, rhs, strides, padding, lhs_dil, rhs_dil, layouts, feature_group_count=groups
        )

    def loss(lhs, rhs):
        return jnp.sum(jnp.sin(conv(lhs, rhs)))

    expected = conv(lhs, rhs)
    params = jax.make_jaxpr(conv)(lhs, rhs).jaxpr.eqns[0].params
    direct = canonical_convolution(lhs, rhs, **params)
    np.testing.assert_allclose(direct, expected, rtol=1e-5, atol=1e-5)
    # the gradient's transposed convolutions are rewritten too; the gradient is checked against
    # forward-mode derivatives, which use only the forward convolution (XLA:CPU's own reverse
    # mode is wrong for the NCW case: see test_negative_padding_is_explicit)
    grad_lhs, grad_rhs = canonical_convolutions(jax.grad(loss, argnums=(0, 1)))(lhs, rhs)
    for i in range(3):
        v = jax.random.normal(jax.random.key(10 + i), lhs.shape)
        u = jax.random.normal(jax.random.key(20 + i), rhs.shape)
        _, directional = jax.jvp(loss, (lhs, rhs), (v, u))
        along = jnp.sum(grad_lhs * v) + jnp.sum(grad_rhs * u)
        np.testing.assert_allclose(along, directional, rtol=1e-4, atol=1e-3)


def test_negative_padding_is_explicit() -> None:
    """The input gradient of a strided convolution crops its input (negative low padding) and
    pads its end. XLA:CPU's convolution kernel gets that combination wrong (its last output reads
    past the input); the canonical form crops with ``lax.pad`` first and matches the definition."""
    g = jax.random.normal(jax.random.key(0), (3, 6, 18))
    w = jax.random.normal(jax.random.key(1), (6, 4, 2))
    dims = lax.ConvDimensionNumbers(lhs_spec=(0, 1, 2), rhs_spec=(1, 0, 2), out_spec=(0, 1, 2))
    params = (
        jax.make_jaxpr(
            lambda g, w: lax.conv_general_dilated(g, w, (2,), ((-1, 1),), dimension_numbers=dims)
        )(g, w)
        .jaxpr.eqns[0]
        .params
    )
    got = jax.jit(lambda g, w: canonical_convolution(g, w, **params))(g, w)
    padded = np.concatenate([np.asarray(g)[:, :, 1:], np.zeros((3, 6, 1))], axis=2)
    windows = np.stack([padded[:, :, 2 * o : 2 * o + 2] for o in range(9)], axis=-1)
    want = np.einsum("ncwo,cdw->ndo", windows, np.asarray(w))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_inside_a_loop_every_convolution_is_canonical() -> None:
    w = jax.random.normal(jax.random.key(1), (3, 3, 2, 4))
    x = jax.random.normal(jax.random.key(2), (5, 8, 8, 2))

    def step(w, _):
        def loss(w):
            y = lax.conv_general_dilated(
                x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
            )
            return jnp.sum(y**2)

        return w - 1e-3 * jax.grad(loss)(w), None

    def labels(body):
        run = jax.jit(lambda w: lax.scan(body, w, jnp.arange(3))[0])
        text = run.lower(w).compile().as_text()
        return {
            line.split("dim_labels=")[1].split(",")[0]
            for line in text.splitlines()
            if "convolution(" in line
        }

    assert labels(step) != {"b01f_01io->b01f"}  # what the rewrite is for
    assert labels(canonical_convolutions(step)) == {"b01f_01io->b01f"}
    np.testing.assert_allclose(
        jax.jit(lambda w: lax.scan(canonical_convolutions(step), w, jnp.arange(3))[0])(w),
        jax.jit(lambda w: lax.scan(step, w, jnp.arange(3))[0])(w),
        # the two layouts sum the gradient's 320 products per weight in different orders: an
        # absolute float32 error of the step (≈ 1e-3 · ε · Σ|terms|, 5e-8 seen on one machine),
        # which is large relative to a weight near zero
        rtol=1e-5,
        atol=1e-6,
    )


def test_functions_without_convolutions_are_replayed_unchanged() -> None:
    def f(a, b):
        return {"s": jnp.tanh(a) @ b, "c": 2.0}

    a, b = jnp.ones((2, 3)), jnp.arange(6.0).reshape(3, 2)
    assert not has_convolution(f, a, b)
    got, want = canonical_convolutions(f)(a, b), f(a, b)
    np.testing.assert_array_equal(got["s"], want["s"])
    assert jnp.asarray(got["c"]).dtype == jnp.asarray(want["c"]).dtype


class _Net(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = nn.relu(nn.Conv(4, (3,), strides=2)(x[..., None]))
        return nn.Dense(3)(h.reshape(h.shape[0], -1))


def test_convolutional_chains_in_turn_give_the_draws_of_chains_under_vmap() -> None:
    """On the CPU a CNN's chains run one after another (``lax.map``) by default; their draws
    equal those of the same chains under ``vmap`` (same seed), up to float reassociation."""
    from bdl.sampling import LoopOptions
    from bdl.sampling.run.loop_options import resolve

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 12)).astype(np.float32)
    y = rng.integers(0, 3, size=64).astype(np.int32)
    model = bdl.Model(network=_Net(), likelihood=bdl.Categorical(), prior=bdl.Normal(1.0))
    compiled = bdl.compile(model, (x, y), batch_size=16)
    kernel = bdl.kernels.get("sghmc", learning_rate=0.01, momentum=0.9)
    assert resolve(None, compiled, ()).chains_in_turn  # the default for a CNN on the CPU

    def draws(loop=None):
        out = bdl.sample(
            compiled, kernel, num_chains=3, num_steps=40, thin=10, seed=3, progress=False,
            loop=loop,
        )  # fmt: skip
        return jax.tree.leaves(out.positions)

    in_turn = draws()
    vmapped = draws(LoopOptions(chains_in_turn=False))
    for a, b in zip(in_turn, vmapped, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert not np.allclose(in_turn[0][0], in_turn[0][1])  # the chains differ


def test_an_ensemble_of_a_cnn_trains_each_member_as_alone() -> None:
    import optax

    from bdl.optimise import minimise, minimise_many

    rng = np.random.default_rng(1)
    x = rng.normal(size=(48, 12)).astype(np.float32)
    y = rng.integers(0, 3, size=48).astype(np.int32)
    model = bdl.Model(network=_Net(), likelihood=bdl.Categorical(), prior=bdl.Normal(1.0))
    compiled = bdl.compile(model, (x, y), batch_size=16)
    optimizer = optax.sgd(0.05, momentum=0.9)
    starts = compiled.init_positions(jax.random.key(0), 3)
    keys = jax.random.split(jax.random.key(1), 3)
    many = jax.jit(lambda p, k: minimise_many(compiled, optimizer, p, k, 20))(starts, keys)
    for m in range(3):
        start = jax.tree.map(lambda a, m=m: a[m], starts)
        alone = minimise(compiled, optimizer, start, keys[m], 20)
        for a, b in zip(jax.tree.leaves(many), jax.tree.leaves(alone), strict=True):
            np.testing.assert_allclose(a[m], b, rtol=1e-4, atol=1e-5)


def test_only_a_convolutional_target_is_rewritten() -> None:
    from bdl.utils.convolutions import target_convolves

    rng = np.random.default_rng(2)
    x = rng.normal(size=(32, 12)).astype(np.float32)
    y = rng.integers(0, 3, size=32).astype(np.int32)
    cnn = bdl.Model(network=_Net(), likelihood=bdl.Categorical(), prior=bdl.Normal(1.0))
    mlp = bdl.Model(network=nn.Dense(3), likelihood=bdl.Categorical(), prior=bdl.Normal(1.0))
    assert target_convolves(bdl.compile(cnn, (x, y), batch_size=8))
    assert not target_convolves(bdl.compile(mlp, (x, y), batch_size=8))

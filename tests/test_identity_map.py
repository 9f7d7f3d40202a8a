"""Results remembered per pair of objects, by identity, and forgotten with the objects."""

import gc

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bdl
from bdl.utils.identity_map import PairMemo


class Thing:
    """A plain object: weakly referenceable, hashed by identity."""


def test_a_pair_is_computed_once_and_each_pair_apart():
    memo, calls = PairMemo(), []
    a, b, c = Thing(), Thing(), Thing()

    def compute(value):
        return lambda: calls.append(value) or value

    assert memo.get_or_compute(a, b, compute("ab")) == "ab"
    assert memo.get_or_compute(a, b, compute("again")) == "ab"
    assert memo.get_or_compute(a, c, compute("ac")) == "ac"
    assert memo.get_or_compute(b, a, compute("ba")) == "ba"  # ordered pairs
    assert calls == ["ab", "ac", "ba"]


def test_a_failed_computation_is_not_remembered():
    memo, a, b = PairMemo(), Thing(), Thing()

    def fail():
        raise ValueError("bad")

    for _ in range(2):
        with pytest.raises(ValueError):
            memo.get_or_compute(a, b, fail)
    assert memo.get_or_compute(a, b, lambda: 1) == 1


def test_entries_go_with_their_objects():
    memo, a, b = PairMemo(), Thing(), Thing()
    memo.get_or_compute(a, b, lambda: 1)
    inner = memo._outer.get(a)
    del b
    gc.collect()
    assert len(inner._entries) == 0
    del a
    gc.collect()
    assert len(memo._outer._entries) == 0


def test_a_repeated_sample_call_traces_its_checks_once(monkeypatch):
    x = np.random.default_rng(0).normal(size=(8, 2)).astype(np.float32)
    model = bdl.Model(
        network=lambda p, x: x @ p["w"], params={"w": jnp.zeros(2)}, likelihood=bdl.Gaussian(0.3)
    )
    target = bdl.compile(model, (x, x[:, 0]), batch_size=4)
    kernel = bdl.kernels.get("sghmc", step_size=1e-3)
    bdl.sample(target, kernel, num_steps=2, seed=0, progress=False)
    traced = []
    real = jax.eval_shape

    def counted(*args, **kwargs):
        traced.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(jax, "eval_shape", counted)
    bdl.sample(target, kernel, num_steps=2, seed=1, progress=False)
    assert traced == []
    bdl.sample(target, kernel, num_steps=2, seed=1, num_chains=3, progress=False)
    assert traced  # new state shapes: the draws' size is traced again

"""bdl's NumPy splits draw exactly scikit-learn's ``train_test_split`` indices."""

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from bdl.data import digits
from bdl.data.splits import split_indices


@pytest.mark.parametrize("stratify", [True, False])
@pytest.mark.parametrize("fraction", [0.2, 0.25, 0.3333])
@pytest.mark.parametrize("seed", [0, 1, 17])
@pytest.mark.parametrize("labels", ["balanced", "uneven"])
def test_split_indices_equal_scikit_learns(stratify, fraction, seed, labels):
    rng = np.random.default_rng(3)
    y = (
        np.repeat(np.arange(4), 25)
        if labels == "balanced"
        else rng.choice(5, size=137, p=[0.5, 0.2, 0.15, 0.1, 0.05])
    )
    index = np.arange(len(y))
    want_train, want_test = train_test_split(
        index, test_size=fraction, random_state=seed, stratify=y if stratify else None
    )
    train, test = split_indices(y, fraction, seed, stratify)
    np.testing.assert_array_equal(train, want_train)
    np.testing.assert_array_equal(test, want_test)


def test_digits_equal_scikit_learns_loader_and_split():
    bunch = load_digits()
    x = np.asarray(bunch.data, np.float32) / 16.0
    y = np.asarray(bunch.target, np.int32)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.2, random_state=0, stratify=y
    )
    ds = digits()
    np.testing.assert_array_equal(ds.x_train, x_train)
    np.testing.assert_array_equal(ds.x_test, x_test)
    np.testing.assert_array_equal(ds.y_train, y_train)
    np.testing.assert_array_equal(ds.y_test, y_test)


def test_stratified_split_refuses_a_singleton_class():
    with pytest.raises(ValueError, match="single example"):
        split_indices(np.array([0, 0, 1, 1, 2]), 0.4, 0, True)

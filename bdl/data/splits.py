"""Train/test splits, drawn exactly as ``sklearn.model_selection.train_test_split`` draws them.

The same indices as scikit-learn's ``ShuffleSplit`` / ``StratifiedShuffleSplit`` (one split,
``random_state=seed``; tests compare the two), computed with NumPy alone: importing
scikit-learn costs about a second, which a first ``bdl`` run on the digits would otherwise pay
before it starts.

With n examples and a test fraction f: n_test = ⌈f·n⌉ and n_train = n − n_test. Unstratified,
the test set is the first n_test entries of a random permutation and the training set the rest.
Stratified, each class c with n_c examples contributes an (approximately) proportional share: the
integer parts of n_train·n_c/n, then one more for the classes with the largest remainders (ties
broken at random), the same for the test share of what is left; the rows of each class are
permuted, split, and each side permuted again.
"""

from __future__ import annotations

import math

import numpy as np


def _approximate_mode(counts: np.ndarray, draws: int, rng: np.random.RandomState) -> np.ndarray:
    """Per-class shares of ``draws`` proportional to ``counts``, rounded to integers."""
    continuous = counts / counts.sum() * draws
    floored = np.floor(continuous)
    missing = int(draws - floored.sum())
    if missing > 0:
        remainder = continuous - floored
        for value in np.sort(np.unique(remainder))[::-1]:
            (candidates,) = np.where(remainder == value)
            now = min(len(candidates), missing)
            floored[rng.choice(candidates, size=now, replace=False)] += 1
            missing -= now
            if missing == 0:
                break
    return floored.astype(int)


def split_indices(
    y: np.ndarray, test_fraction: float, seed: int, stratify: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Indices (train, test) of one random split of ``len(y)`` examples."""
    n = len(y)
    n_test = math.ceil(test_fraction * n)
    n_train = n - n_test
    rng = np.random.RandomState(seed)
    if not stratify:
        permutation = rng.permutation(n)
        return permutation[n_test:], permutation[:n_test]
    classes, labels, counts = np.unique(y, return_inverse=True, return_counts=True)
    if counts.min() < 2:
        raise ValueError(
            f"stratified split: class(es) {classes[counts < 2].tolist()} have a single example; "
            "every class needs at least 2."
        )
    if min(n_train, n_test) < len(classes):
        raise ValueError(
            f"stratified split: {n_train} training and {n_test} test examples cannot hold "
            f"{len(classes)} classes each; change test_fraction."
        )
    by_class = np.split(np.argsort(labels, kind="stable"), np.cumsum(counts)[:-1])
    train_share = _approximate_mode(counts, n_train, rng)
    test_share = _approximate_mode(counts - train_share, n_test, rng)
    train: list[int] = []
    test: list[int] = []
    for rows, k_train, k_test in zip(by_class, train_share, test_share, strict=True):
        rows = rows.take(rng.permutation(len(rows)), mode="clip")
        train.extend(rows[:k_train])
        test.extend(rows[k_train : k_train + k_test])
    return rng.permutation(train), rng.permutation(test)

"""One name per scalar coordinate, the same in every table, message and plot: the leaf's path and
index (``net/Dense_0/kernel[3,1]``), or the data set's feature name where the model file gives
one."""

from __future__ import annotations

import numpy as np
import pytest

from bdl.data import breast_cancer, diabetes
from bdl.utils.trees import parameter_names
from bdl.validation import compare_parameters
from bdl.validation.reference import parameter_summaries


def test_names_follow_the_paths_and_the_flattening_order():
    tree = {"net": {"Dense_0": {"bias": np.zeros(2), "kernel": np.zeros((3, 2))}}, "s": 1.0}
    names = parameter_names(tree)
    assert names == [
        "net/Dense_0/bias[0]",
        "net/Dense_0/bias[1]",
        *(f"net/Dense_0/kernel[{i},{j}]" for i in range(3) for j in range(2)),
        "s",
    ]


def test_names_match_the_columns_of_the_parameter_summaries():
    """Coordinate k of the draws (as the validation sees them) carries names[k]."""
    draws = {"a": np.zeros((2, 3, 4, 2)), "b": np.zeros((2, 3))}
    draws["a"][..., 2, 1] = 7.0
    columns = parameter_summaries(draws)[0, 0]
    names = parameter_names(draws, batch_dims=2)
    assert len(names) == columns.size
    assert names[int(np.argmax(columns))] == "a[2,1]"


def test_a_bare_array_position_is_theta():
    assert parameter_names(np.zeros(2)) == ["theta[0]", "theta[1]"]


def test_feature_labels_name_the_first_axis():
    data = breast_cancer()
    names = parameter_names(
        {"net": {"b": 0.0, "w": np.zeros(30)}}, labels={"net/w": data.feature_names}
    )
    assert names[:3] == ["net/b", "net/w[mean radius]", "net/w[mean texture]"]
    assert parameter_names({"w": np.zeros((10, 2))}, labels={"w": diabetes().feature_names})[
        :3
    ] == ["w[age,0]", "w[age,1]", "w[sex,0]"]


def test_labels_must_fit_the_position():
    with pytest.raises(ValueError, match=r"3 names for a first axis of length 2"):
        parameter_names({"w": np.zeros(2)}, labels={"w": ["a", "b", "c"]})
    with pytest.raises(ValueError, match=r"not leaves of the position"):
        parameter_names({"w": np.zeros(2)}, labels={"net/w": ["a", "b"]})


def test_validation_names_the_worst_parameter():
    rng = np.random.default_rng(0)
    reference = {"w": rng.normal(size=(4, 400, 3))}
    draws = {"w": rng.normal(size=(4, 400, 3))}
    draws["w"][..., 1] += 2.0
    rows = compare_parameters(draws, reference, labels={"w": ["age", "sex", "bmi"]})
    assert any(row.name == "  (worst parameter: w[sex])" for row in rows)
    rows = compare_parameters(draws, reference)
    assert any(row.name == "  (worst parameter: w[1])" for row in rows)

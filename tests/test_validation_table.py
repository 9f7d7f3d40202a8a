"""The validation table reads well: one meaning per row under distinct names, NUTS's own values
in the NUTS column, each worst-parameter line under the statistic it belongs to with that
statistic's value, a distance never shown below 0, and a model compiled from a dict named."""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from validation import report as page  # scripts/ is on the test path (pyproject.toml)

import bdl
from bdl.diagnostics.convergence import assess
from bdl.model_files import load_spec
from bdl.validation import Row, compare_closed_form, compare_parameters
from bdl.validation.compare import COMPARED_ESS
from bdl.validation.converged import convergence_rows
from bdl.validation.validate import model_label


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(0)
    reference = {"w": rng.normal(size=(4, 400, 3))}
    draws = {"w": rng.normal(size=(4, 400, 3))}
    draws["w"][..., 1] += 0.3
    draws["w"][..., 2] *= 1.5
    return compare_parameters(draws, reference, labels={"w": ["age", "sex", "bmi"]})


def test_every_gated_row_has_its_own_name(rows):
    rng = np.random.default_rng(1)
    verdict = assess(rng.normal(size=(4, 400, 3)), ["a", "b", "c"], space="parameter")
    table = convergence_rows(verdict) + rows
    names = [r.name for r in table if not r.name.startswith(" ")]
    assert len(names) == len(set(names)), names
    assert "kernel min bulk ESS (convergence)" in names and COMPARED_ESS in names
    by_name = {r.name: r for r in table}
    assert by_name["kernel min bulk ESS (convergence)"].threshold == ">= 400"  # 100 per chain
    assert by_name[COMPARED_ESS].threshold == ">= 100"


def test_the_worst_parameter_follows_its_statistic_with_that_statistics_value(rows):
    names = [r.name for r in rows]
    for title in ("max |standardised mean error|", "max |MCSE-aware z|"):
        at = names.index(title)
        worst = rows[at + 1]
        assert worst.name == "  (worst parameter: w[sex])"
        assert abs(worst.value) == pytest.approx(rows[at].value)
    sme, z = (
        rows[names.index("max |standardised mean error|")],
        rows[names.index("max |MCSE-aware z|")],
    )
    assert z.value > 3 * sme.value  # two different statistics, each shown under its own row


def test_the_nuts_column_holds_nuts_own_values(rows):
    by_name = {r.name: r for r in rows}
    assert by_name[COMPARED_ESS].reference > 100  # NUTS's own smallest bulk ESS
    exact = compare_closed_form(np.random.default_rng(2).normal(size=(4, 300, 2)), np.zeros(2),
                                np.eye(2))  # fmt: skip
    assert {r.name: r for r in exact}[COMPARED_ESS].reference is None  # an exact law has none
    rng = np.random.default_rng(3)
    kernel = assess(rng.normal(size=(4, 200, 2)), ["a", "b"], space="parameter")
    nuts = assess(rng.normal(size=(4, 1000, 2)), ["a", "b"], space="parameter")
    shown = {r.name: r for r in convergence_rows(kernel, nuts)}
    assert shown["kernel max R̂ (parameter space)"].reference == pytest.approx(nuts.max_rhat)
    assert shown["kernel min bulk ESS (convergence)"].reference == pytest.approx(nuts.min_ess_bulk)
    assert shown["kernel min tail ESS (convergence)"].reference == pytest.approx(nuts.min_ess_tail)
    assert shown["kernel stuck chains"].reference == 0


def test_a_negative_energy_distance_is_shown_as_about_zero():
    row = Row("energy distance (sd units)", -0.00024, None, "<= 0.02", True, nonnegative=True)
    assert row.value == -0.00024  # the unbiased estimate is kept
    assert row.shown() == "≈ 0" and "≈ 0" in row.format() and "-0.00024" not in row.format()
    assert Row("max |standardised mean error|", -0.5, None, "", None).shown() == "-0.5"
    stored = {"name": "energy distance (sd units)", "value": -0.00024, "passed": True,
              "threshold": "<= 0.02", "rule": "<= 0.01 + MC"}  # fmt: skip
    assert page._cell(stored, marks=False) == "≈ 0"  # results stored before the flag existed
    assert page._cell({**stored, "value": 0.003}, marks=False) == "0.003"


def test_a_model_compiled_from_a_dict_gets_a_name():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 2)).astype(np.float32)
    y = (x @ np.array([1.0, -1.0]) + 0.5 * rng.normal(size=40)).astype(np.float32)

    def model(name="model"):
        return bdl.Model(
            network=lambda p, x: x @ p["w"], params={"w": jnp.zeros(2)},
            likelihood=bdl.Gaussian(scale=0.5), prior=bdl.Normal(1.0), name=name,
        )  # fmt: skip

    unnamed = bdl.compile(model(), {"x": x, "y": y})
    assert unnamed.name == "data"
    assert model_label(unnamed) == "unnamed model (Gaussian likelihood, n = 40)"
    assert model_label(bdl.compile(model("mine"), {"x": x, "y": y})) == "mine"
    assert model_label(load_spec("linear_regression").compile()) == "linear_regression"


def test_validate_prints_nuts_values_beside_the_kernels():
    """A short run against a reference of draws: the convergence rows carry NUTS's own R̂ and
    ESS, and the printed table says what the NUTS column is."""
    target = load_spec("linear_regression").compile()
    kernel = bdl.kernels.get("sghmc", step_size=5e-3, friction=20.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        draws = bdl.sample(target, kernel, num_steps=2_000, burn_in=200, thin=2, seed=5)
    reference = bdl.validation.Reference(
        positions=draws.positions, space="parameter", monitored=np.zeros((4, 10, 1)),
        max_rhat=1.0, min_ess=1e4, settings={},
    )  # fmt: skip
    report = bdl.validate(target, kernel, num_steps=300, burn_in=100, reference=reference)
    by_name = {r.name: r for r in report.rows}
    rhat = by_name["kernel max R̂ (parameter space)"]
    assert rhat.reference is not None and rhat.reference < rhat.value  # NUTS's draws mixed
    ess = by_name["kernel min bulk ESS (convergence)"]
    assert ess.reference is not None and ess.reference > ess.value
    table = report.table()
    assert f"{rhat.reference:.4g}" in table.splitlines()[3 + [r.name for r in report.rows].index(
        rhat.name)]  # fmt: skip
    assert "(NUTS: its own value" in table

"""scripts/posteriordb_suite.py: NUTS and adapting kernels against Stan's posteriordb draws.

The default suite runs one small posterior briefly (NUTS 4 × 250 draws, SGHMC 3,000 steps);
the ``slow`` tests run the others at the suite's own settings. Every verdict is the one of
``bdl.validate``'s gates, whose thresholds carry the Monte Carlo error of both runs.
"""

from __future__ import annotations

import posteriordb_suite as suite
import pytest
from posteriordb_page import render

from bdl.validation import posteriordb

QUICK_RUN = {"num_steps": 3_000, "burn_in": 1_000, "thin": 2}
QUICK_NUTS = {"num_warmup": 250, "num_samples": 250}
GATES = ("max |standardised mean error|", "min sd ratio", "max sd ratio")


def gated(entry: dict, names=GATES) -> dict[str, bool]:
    return {row[0]: row[4] for row in entry["rows"] if row[0] in names}


def test_the_adapting_kernels_are_those_built_without_a_step_size():
    kernels = suite.adapting_kernels()
    assert {"sgld", "sghmc", "sgnht", "cyclical", "entropy"} <= set(kernels)
    assert "nnsghmc" not in kernels and "wenzel" not in kernels  # they have default steps


def test_a_small_posterior_against_stan():
    result = suite.run_posterior(
        "kidiq_with_mom_work-kidscore_interaction_c", ["sghmc"], run=QUICK_RUN, nuts=QUICK_NUTS
    )
    nuts, sghmc = result["rows"]["NUTS"], result["rows"]["sghmc"]
    assert nuts["against"] == "Stan's draws"
    assert all(gated(nuts).values()), nuts["rows"]
    assert sghmc["passed"], sghmc["rows"]
    assert sghmc["min_ess"] >= 100 and sghmc["ess_per_second"] > 0
    assert set(gated(sghmc)) == set(GATES)
    page = render({"posteriors": {result["posterior"]: result}})
    assert "| kidiq_with_mom_work-kidscore_interaction_c | `sghmc` | exact | **PASS** |" in page


SLOW = [n for n in posteriordb.names() if n != "kidiq_with_mom_work-kidscore_interaction_c"]
#: the ODE posteriors (diffrax; Stan's reference draws for both)
ODE = ("hudson_lynx_hare-lotka_volterra", "one_comp_mm_elim_abs-one_comp_mm_elim_abs")


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_nuts_and_sghmc_against_stan(name):
    """At the suite's settings: NUTS, where its own trust gate holds, agrees with Stan's draws
    (or moments); SGHMC at its defaults passes every gate, except on accel_gp, where
    docs/posteriordb.md explains its failure (its chains do not mix in the GP's funnel). The
    ODE posteriors run the kernel first, as the suite runs it apart from NUTS: a float64 NUTS
    run leaves float64 constants behind that a later float32 ODE run trips on."""
    if name in ODE:
        pytest.importorskip("diffrax")
        result = suite.run_posterior(name, ["sghmc"], stage="kernels")  # Stan's draws
        result["rows"].update(suite.run_posterior(name, [], stage="nuts")["rows"])
    else:
        result = suite.run_posterior(name, ["sghmc"])
    nuts, sghmc = result["rows"]["NUTS"], result["rows"]["sghmc"]
    if nuts["trusted"]:
        assert all(gated(nuts).values()), nuts["rows"]
    if name == "mcycle_gp-accel_gp":
        assert not sghmc["passed"], sghmc["rows"]
        return
    assert sghmc["passed"], sghmc["rows"]

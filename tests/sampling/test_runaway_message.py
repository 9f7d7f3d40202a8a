"""The RunawayWarning of a run with many chains stays short: a summary line naming the chains,
the reasons of a few, the rest counted by kind; every chain's reason stays in
samples.runaway_reason."""

import warnings

import jax.numpy as jnp

import bdl
from bdl.diagnostics.runaway import DETAILED, chain_ranges, flagged_report


def test_chain_ranges_compress_runs_of_chains():
    assert chain_ranges([0, 1, 2, 3, 5, 8, 9]) == "0–3, 5, 8–9"
    assert chain_ranges([4]) == "4" and chain_ranges([]) == ""


def test_a_report_of_many_chains_details_a_few_and_counts_the_rest():
    flags = [c % 4 != 1 for c in range(40)]
    steps = [1_000 + 10 * c if f else -1 for c, f in enumerate(flags)]
    hot = "it ran hot: configurational temperature 3.1·T ± 0.1, " + "x" * 120
    grew = "its energy kept growing, U/T from 10 through 20 to 30, " + "y" * 120
    reasons = [(hot if c % 2 else grew) if f else "" for c, f in enumerate(flags)]
    text = flagged_report(flags, steps, reasons)
    lines = text.splitlines()
    assert len(lines) == 1 + DETAILED + 1
    assert lines[0].startswith("30 of 40 chains ran away or ran hot while staying finite")
    assert "chains 0, 2–4, 6–8," in lines[0] and "from step 1000 on" in lines[0]
    assert len(lines[0]) < 300
    detailed = [line.split(":")[0] for line in lines[1:4]]  # the earliest to fail
    assert detailed == [
        "  chain 0 from step 1000",
        "  chain 2 from step 1020",
        "  chain 3 from step 1030",
    ]
    assert lines[-1].startswith("  and 27 more (chains 4, 6–8,")
    assert "ran hot 9, energy kept growing 18" in lines[-1]
    assert "samples.runaway_reason" in lines[-1]
    assert len(text) < 1_200  # thirty reasons in full would be over 5,000 characters
    assert flagged_report([False, False], [-1, -1], ["", ""]) == ""


def test_the_warning_of_a_run_with_many_chains_is_short():
    """SGLD at h = 1.5 on N(0, I) runs at 4·T in every chain (tests/sampling/test_runaway.py):
    24 chains, all flagged, one warning of a few lines."""
    gaussian = bdl.compile(
        bdl.Potential(lambda t: -0.5 * jnp.sum(t**2), init=jnp.zeros(50), name="gauss")
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = bdl.sample(
            gaussian, bdl.kernels.sgld(1.5), num_steps=1_500, burn_in=100, thin=10,
            num_chains=24, seed=0,
        )  # fmt: skip
    messages = [str(w.message) for w in caught if issubclass(w.category, bdl.RunawayWarning)]
    assert len(messages) == 1
    lines = messages[0].splitlines()
    assert lines[0].startswith("24 of 24 chains ran away or ran hot") and "chains 0–23" in lines[0]
    assert len(lines) <= 1 + DETAILED + 1 and len(messages[0]) < 1_500
    assert lines[-1].startswith("  and 21 more") and "ran hot 21" in lines[-1]
    assert all(s.runaway) and all("ran hot" in reason for reason in s.runaway_reason)
    assert s.runaway_report() in messages[0]

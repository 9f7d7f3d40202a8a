"""How far the README example's printed figures move between runs: runs its one ```python block
as written but for the seed (``bdl.sample(..., seed=S)``) for several seeds, and prints the range
of each quoted figure as JSON.

A different processor or library version changes the last bits of the first steps, after which
the chains follow other paths, as another seed's do; the README quotes its seed-0 output with
the ranges printed here, measured over seeds, as the tolerance its figures hold to.

usage: python scripts/readme_spread.py [--seeds 0 1 2 3 4] [--out docs/readme_spread.json]

About 2–4 minutes a seed on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
#: the call the seed is added to
SAMPLE_CALL = "num_chains=4,"


def readme_block() -> str:
    """The README's one ```python block."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python[^\n]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    if len(blocks) != 1 or blocks[0].count(SAMPLE_CALL) != 1:
        raise SystemExit(f"readme_spread: README.md should hold one block with {SAMPLE_CALL!r}.")
    return blocks[0]


def run(seed: int) -> dict[str, float]:
    """The figures the README quotes, from one run of its block with ``seed``."""
    code = readme_block().replace(SAMPLE_CALL, f"{SAMPLE_CALL} seed={seed},")
    scope: dict = {"__name__": "__readme__"}
    here = Path.cwd()
    with tempfile.TemporaryDirectory() as directory:
        os.chdir(directory)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(code, "README.md", "exec"), scope)
        finally:
            os.chdir(here)
    convergence = scope["samples"].convergence
    bias, stability = convergence.bias, convergence.stability
    return {
        "accuracy": float(scope["accuracy"]),
        "configurational_temperature_min": float(np.min(bias.temperature)),
        "configurational_temperature_max": float(np.max(bias.temperature)),
        "kinetic_temperature_min": float(np.min(bias.kinetic)),
        "kinetic_temperature_max": float(np.max(bias.kinetic)),
        "max_rhat": float(convergence.max_rhat),
        "min_ess_bulk": float(convergence.min_ess_bulk),
        "min_ess_tail": float(convergence.min_ess_tail),
        "judged_predictions": float(convergence.quantities),
        "saturated": float(convergence.saturated),
        "bma_agreement": float(stability.agreement),
        "bma_total_variation": float(stability.total_variation),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here too")
    args = parser.parse_args()
    runs = {}
    for seed in args.seeds:
        runs[seed] = run(seed)
        print(f"seed {seed}: {json.dumps(runs[seed])}", flush=True)
    names = next(iter(runs.values())).keys()
    spread = {
        n: [min(r[n] for r in runs.values()), max(r[n] for r in runs.values())] for n in names
    }
    result = {"seeds": args.seeds, "runs": runs, "range": spread}
    print(json.dumps(spread, indent=1))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

"""Copy the posteriors of the posteriordb suite from a posteriordb checkout into bdl.

posteriordb (https://github.com/stan-dev/posteriordb, BSD-3-Clause) keeps, per posterior, a Stan
program, its data and reference draws of Stan's NUTS. This script reads those files from a
checkout's ``posterior_database/`` folder and writes, under
``bdl/validation/posteriordb/vendored/``:

* ``posteriors.json``: per posterior, posteriordb's description (model, data, dimensions,
  keywords, references), the reference run's settings and its per-parameter diagnostics;
* ``draws/<posterior>.npz``: the reference draws, one array ``(chains, draws, *shape)`` per Stan
  parameter, rounded to float32 (7 significant digits; posteriordb stores 15);
* ``data/<data>.json.gz``: the data, as posteriordb's JSON, gzipped;
* ``stan/<model>.stan``: the Stan programs, verbatim;
* ``LICENCE.md``: posteriordb's licence, verbatim.

A posterior whose draws file is not in the checkout (stored outside git) keeps its reference
means and mean squares (posteriordb's summary statistics) in ``posteriors.json`` instead.

    python scripts/posteriordb_vendor.py --source PATH/TO/posteriordb
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bdl" / "validation" / "posteriordb" / "vendored"
POSTERIORS = (
    "arma-arma11",
    "earnings-earn_height",
    "earnings-logearn_interaction_z",
    "earnings-logearn_logheight_male",
    "gp_pois_regr-gp_regr",
    "kidiq_with_mom_work-kidscore_interaction_c",
    "mcycle_gp-accel_gp",
    "hudson_lynx_hare-lotka_volterra",
    "one_comp_mm_elim_abs-one_comp_mm_elim_abs",
)


def read_json(path: Path) -> Any:
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as archive:
            return json.loads(archive.read(archive.namelist()[0]))
    return json.loads(path.read_text(encoding="utf-8"))


def grouped(names: list[str], columns: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Stan's scalar columns ``beta[1]``, ``beta[2]`` … as one array per parameter, the entries
    on the trailing axes (1-based indices made 0-based)."""
    parts: dict[str, list[tuple[tuple[int, ...], np.ndarray]]] = {}
    for name, column in zip(names, columns, strict=True):
        match = re.fullmatch(r"([^\[]+)(?:\[([\d,]+)\])?", name)
        base, index = match.group(1), match.group(2)
        key = tuple(int(i) - 1 for i in index.split(",")) if index else ()
        parts.setdefault(base, []).append((key, column))
    out = {}
    for base, entries in parts.items():
        if entries[0][0] == ():
            out[base] = entries[0][1]
            continue
        shape = tuple(max(k[i] for k, _ in entries) + 1 for i in range(len(entries[0][0])))
        array = np.empty(entries[0][1].shape + shape, entries[0][1].dtype)
        for key, column in entries:
            array[(..., *key)] = column
        out[base] = array
    return out


def vendor(source: Path, out: Path) -> dict[str, Any]:
    db = source / "posterior_database"
    for sub in ("draws", "data", "stan"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {}
    for name in POSTERIORS:
        posterior = read_json(db / "posteriors" / f"{name}.json")
        model, data = posterior["model_name"], posterior["data_name"]
        info = read_json(db / "reference_posteriors" / "draws" / "info" / f"{name}.info.json")
        diagnostics = info["diagnostics"]
        names = diagnostics["diagnostic_information"]["names"]
        entry = {
            "model": model,
            "data": data,
            "dimensions": posterior["dimensions"],
            "keywords": posterior["keywords"],
            "urls": posterior["urls"],
            "references": posterior["references"],
            "model_title": read_json(db / "models" / "info" / f"{model}.info.json")["title"],
            "data_title": read_json(db / "data" / "info" / f"{data}.info.json")["title"],
            "reference": {
                "method": info["inference"]["method"],
                "method_arguments": info["inference"]["method_arguments"],
                "names": names,
                "ess_bulk": diagnostics["effective_sample_size_bulk"],
                "ess_tail": diagnostics["effective_sample_size_tail"],
                "r_hat": diagnostics["r_hat"],
                "versions": info["versions"].get("rstan_version")
                or info["versions"].get("cmdstan_version"),
            },
        }
        draws_file = db / "reference_posteriors" / "draws" / "draws" / f"{name}.json.zip"
        if draws_file.is_file():
            chains = read_json(draws_file)
            columns = [np.asarray([c[k] for c in chains], np.float32) for k in chains[0]]
            arrays = grouped(list(chains[0]), columns)
            np.savez_compressed(out / "draws" / f"{name}.npz", **arrays)
            entry["draws"] = f"draws/{name}.npz"
        else:  # stored outside git: the summary statistics are what the checkout has
            stats = db / "reference_posteriors" / "summary_statistics"
            mean = read_json(stats / "mean_value" / "mean_value" / f"{name}.json")
            square = read_json(stats / "mean_squared_value" / "mean_squared_value" / f"{name}.json")
            assert mean["names"] == square["names"] == names
            entry["draws"] = None
            entry["summary"] = {
                "mean": mean["mean_value"],
                "mcse_mean": mean["mcse_mean"],
                "mean_squared": square["mean_squared_value"],
                "mcse_mean_squared": square["mcse_mean"],
            }
        raw = read_json(db / "data" / "data" / f"{data}.json.zip")
        with gzip.open(out / "data" / f"{data}.json.gz", "wt", encoding="utf-8") as f:
            f.write(json.dumps(raw, separators=(",", ":")))
        stan = db / "models" / "stan" / f"{model}.stan"
        (out / "stan" / f"{model}.stan").write_text(stan.read_text(encoding="utf-8"))
        manifest[name] = entry
    (out / "posteriors.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    licence = source / "LICENCE.md"
    (out / "LICENCE.md").write_text(licence.read_text(encoding="utf-8"), encoding="utf-8")
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", type=Path, required=True, help="a posteriordb checkout")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    manifest = vendor(args.source, args.out)
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"{len(manifest)} posteriors in {args.out} ({size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()

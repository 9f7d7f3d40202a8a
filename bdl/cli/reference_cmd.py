"""``bdl reference MODEL``: the trusted NUTS draws of a model, summarised and optionally saved.

Every argument is checked before anything is compiled; exit 0 when the reference passes the
gate (R̂ < 1.01, bulk ESS ≥ 400), 2 for bad usage or an untrusted reference (the message says
what to change), as for ``bdl validate``.
"""

from __future__ import annotations

import argparse
import sys

from bdl.cli.options import (
    MODEL_HELP,
    add_integer,
    add_option_argument,
    add_path,
    at_least,
    check_seed,
    parse_options,
)

#: formats ``--out`` writes, by suffix
OUT_SUFFIXES = (".npz", ".nc")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reference", help="the trusted NumPyro NUTS draws of a model")
    p.add_argument("model", help=MODEL_HELP)
    add_option_argument(p)
    add_integer(
        p, "--warmup", "NUTS warm-up steps per chain (default: the model file's, else 1000)"
    )
    add_integer(p, "--samples", "NUTS draws per chain (default: the model file's, else 1000)")
    add_integer(p, "--chains", "NUTS chains (at least 4)", default=4)
    add_integer(p, "--seed", "seed of NUTS's starts and steps (default 0)", default=0)
    p.add_argument("--no-cache", action="store_true", help="rerun NUTS even if cached")
    add_path(p, "--out", "save the draws (.npz or .nc)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bdl.model_files import load_spec
    from bdl.validation import UntrustedReferenceError
    from bdl.validation.reference_draws import reference

    check_seed(args.seed)
    if args.warmup is not None:
        at_least("--warmup", f"--warmup {args.warmup}", args.warmup, 0, "NUTS warm-up steps")
    if args.samples is not None:
        at_least("--samples", f"--samples {args.samples}", args.samples, 1, "NUTS draws per chain")
    at_least("--chains", f"--chains {args.chains}", args.chains, 4, "chains for R̂")
    if args.out is not None and args.out.suffix.lower() not in OUT_SUFFIXES:
        raise ValueError(
            f"--out {args.out}: the format comes from the suffix, one of "
            f"{', '.join(OUT_SUFFIXES)}; e.g. --out {args.out.with_suffix('.npz')}."
        )
    spec = load_spec(args.model, **parse_options(args.option, "--option"))
    try:
        ref = reference(
            spec,
            num_chains=args.chains,
            **spec.nuts_settings(args.warmup, args.samples),
            seed=args.seed,
            use_cache=not args.no_cache,
        )
    except UntrustedReferenceError as err:
        print(f"bdl reference: error: {err}", file=sys.stderr)
        return 2
    print(f"{ref.meta['model']}: NUTS, {ref.num_chains} chains x {ref.num_draws} draws")
    print(ref.summary())
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        print(f"saved: {ref.save(args.out)}")
    return 0

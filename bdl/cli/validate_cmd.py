"""``bdl validate MODEL --kernel NAME``: NUTS reference vs kernel; table, plot, exit code.

Every argument is checked before anything is compiled; exit 0 when every gated quantity is
within its threshold, 1 when one is not (a kernel run that has not converged is not compared with
NUTS and fails), 2 for bad usage or an untrusted NUTS reference.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bdl.cli.options import (
    MODEL_HELP,
    add_hyper_and_option_arguments,
    add_integer,
    add_path,
    at_least,
    check_kernel,
    check_seed,
    kernel_run,
    tuned_hint,
)
from bdl.cli.report_option import add_report_argument, check_report_path, write_report

#: figure formats the plot is written in (by its suffix)
PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate", help="compare a kernel with NumPyro NUTS (exit 1 if outside the thresholds)"
    )
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--kernel", required=True, help="kernel name (see `bdl kernels`)")
    add_hyper_and_option_arguments(
        p, hyper_note="; without a step size the kernel adapts it during burn-in"
    )
    add_integer(
        p,
        "--steps",
        "the kernel's total steps per chain, burn-in included (default: the model file's)",
    )
    add_integer(p, "--burn-in", "the kernel's steps discarded first (default: the model file's)")
    add_integer(p, "--thin", "keep every THIN-th step after burn-in (default: the model file's)")
    add_integer(p, "--chains", "the kernel's chains (default 4)", default=4)
    add_integer(p, "--seed", "the kernel run's seed (default 0)", default=0)
    p.add_argument(
        "--init", default=None, help="start: auto, network, perturbed, prior, map or fixed"
    )
    p.add_argument(
        "--tuned", action="store_true", help="use the model file's validated hyper-parameters"
    )
    add_integer(
        p,
        "--nuts-warmup",
        "NUTS warm-up steps per chain of the reference (default: the model file's, else 1000)",
    )
    add_integer(
        p,
        "--nuts-samples",
        "NUTS draws per chain of the reference (default: the model file's, else 1000)",
    )
    add_path(p, "--plot", "figure path (default: bdl-output/validate_MODEL_KERNEL.png)")
    add_report_argument(p, default_path=True)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bdl.validation import UntrustedReferenceError, validate

    check_seed(args.seed)
    check_kernel(args.kernel)
    if args.nuts_warmup is not None:
        at_least(
            "--nuts-warmup",
            f"--nuts-warmup {args.nuts_warmup}",
            args.nuts_warmup,
            0,
            "NUTS warm-up steps per chain",
        )
    if args.nuts_samples is not None:
        at_least(
            "--nuts-samples",
            f"--nuts-samples {args.nuts_samples}",
            args.nuts_samples,
            1,
            "NUTS draws per chain",
        )
    check_plot(args.plot)
    check_report_path(args.report)
    chosen = kernel_run(args)
    spec, kernel, lengths = chosen.spec, chosen.kernel, chosen.lengths
    target = spec.compile()
    plot = args.plot or Path("bdl-output") / f"validate_{target.name}_{args.kernel}.png"
    try:
        report = validate(
            target,
            kernel,
            num_steps=lengths.steps,
            burn_in=lengths.burn_in,
            thin=lengths.thin,
            num_chains=lengths.chains,
            seed=args.seed,
            init=spec.init if args.init is None else args.init,
            nuts=spec.nuts_settings(args.nuts_warmup, args.nuts_samples),
            plot=plot,
            progress=True,
            parameter_labels=spec.parameter_labels,
        )
    except UntrustedReferenceError as err:
        print(f"bdl validate: error: {err}", file=sys.stderr)
        return 2
    print(report)
    print(f"plot: {report.plot}")
    if args.report is not None:
        default = Path("bdl-output") / f"validate_{target.name}_{args.kernel}.html"
        write_report(report.samples, args.report, target, report, default)
    verdict = report.samples.convergence
    if verdict is not None and not verdict.mixing_ok:  # the failing rows' reason, what to change
        print(
            f"bdl validate: the kernel's run was not compared: {verdict.report()}", file=sys.stderr
        )
        hint = tuned_hint(args.model, spec, args.kernel, kernel, chosen.given, args.tuned)
        if hint:
            print(f"bdl validate: {hint}", file=sys.stderr)
    return 0 if report.passed else 1


def check_plot(plot: Path | None) -> None:
    """``--plot`` must be a file name with a figure suffix, not a directory."""
    if plot is None:
        return
    if plot.is_dir():
        raise ValueError(
            f"--plot {plot} is a directory; pass a file name such as {plot / 'validate.png'}."
        )
    if plot.suffix.lower() not in PLOT_SUFFIXES:
        raise ValueError(
            f"--plot {plot}: the figure's format comes from its suffix, one of "
            f"{', '.join(PLOT_SUFFIXES)}; e.g. --plot {plot.with_suffix('.png')}."
        )

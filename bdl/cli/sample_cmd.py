"""``bdl sample MODEL --kernel NAME``: run a kernel on a model file and summarise the draws.

Every argument is checked before anything is compiled. Ctrl-C (or SIGTERM) at any moment ends the
command with status 130; once sampling has started, the draws collected so far are first
summarised (and saved with ``--out``), and with ``--checkpoint`` the run's state is kept so that
``bdl sample --resume DIR`` goes on where it stopped. The exit status says how the run went
(docs/cli.md): 0, 3 when a chain diverged, 4 when the draws failed the convergence check's
mixing criteria, 5 when they mixed but failed its bias check.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bdl.cli.options import (
    MODEL_HELP,
    add_hyper_and_option_arguments,
    add_integer,
    add_path,
    check_kernel,
    check_seed,
    kernel_run,
    tuned_hint,
)
from bdl.cli.report_option import add_report_argument, check_report_path, write_report
from bdl.cli.resume_record import record_command, resumed_command

if TYPE_CHECKING:
    from bdl.sampling import Samples


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sample", help="draw samples of MODEL with a kernel")
    p.add_argument("model", nargs="?", help=MODEL_HELP)
    p.add_argument("--kernel", default=None, help="kernel name (see `bdl kernels`)")
    add_integer(p, "--steps", "total steps per chain")
    add_integer(p, "--burn-in", "steps discarded first")
    add_integer(p, "--thin", "keep every THIN-th step")
    add_integer(
        p, "--chains", "chains run in parallel (default 4, rounded up to a multiple of the devices)"
    )
    add_integer(p, "--seed", "the run's seed (default 0)")
    p.add_argument(
        "--init",
        default=None,
        help="start: auto, network, perturbed, prior, map or fixed (default: the model "
        "file's, else auto)",
    )
    p.add_argument(
        "--tuned",
        action="store_true",
        help="use the model file's validated hyper-parameters for the kernel instead of "
        "adapting step size, mass and friction during burn-in",
    )
    add_path(p, "--out", "save draws (.npz, or .nc for ArviZ)")
    add_path(
        p,
        "--checkpoint",
        "keep the run's state in DIR, so that --resume DIR can continue it",
        metavar="DIR",
    )
    p.add_argument(
        "--checkpoint-every",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="seconds between checkpoints (default 60)",
    )
    add_path(
        p,
        "--resume",
        "continue the run checkpointed in DIR (its settings are read back; --steps may extend it)",
        metavar="DIR",
    )
    p.add_argument(
        "--evaluate",
        action="store_true",
        help="score the draws on the model's test split as they are produced: the BMA's "
        "accuracy, NLL, ECE and Brier score (RMSE and NLL for a regressor) and its curve",
    )
    p.add_argument(
        "--no-keep-draws",
        action="store_true",
        help="keep no draws in memory (implies --evaluate unless --stream-to is given): memory "
        "does not grow with the number of draws",
    )
    add_path(
        p,
        "--stream-to",
        "write the draws to DIR part by part as they are produced (read back with "
        "bdl.load_samples(DIR))",
        metavar="DIR",
    )
    add_path(
        p,
        "--curve",
        "with --evaluate: plot the test BMA against the number of draws into PNG",
        metavar="PNG",
    )
    p.add_argument(
        "--devices",
        type=int,
        default=None,
        metavar="N",
        help="split the chains over N local devices (default: all, or 1 for a single chain)",
    )
    p.add_argument(
        "--data-devices",
        type=int,
        default=1,
        metavar="D",
        help="of those, split each minibatch over D devices (default 1); the chains go over N/D",
    )
    p.add_argument(
        "--distributed",
        action="store_true",
        help="one process of a multi-process run: jax.distributed.initialize() finds the "
        "coordinator (SLURM, Open MPI, ...; or --coordinator); each process runs its chains and "
        "writes OUT with .process-I before the suffix (`bdl merge` joins them)",
    )
    p.add_argument(
        "--coordinator",
        default=None,
        metavar="HOST:PORT",
        help="with --distributed: the coordinator's address (process 0's host), with "
        "--num-processes and --process-id, where no cluster manager sets them",
    )
    add_integer(p, "--num-processes", "with --coordinator")
    add_integer(p, "--process-id", "with --coordinator")
    add_hyper_and_option_arguments(p)
    add_report_argument(p, default_path=False)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import jax

    from bdl.cli.summary import NOT_CONVERGED, exit_status, summary_lines
    from bdl.kernels import registry
    from bdl.sampling import (
        ConvergenceWarning,
        DivergenceWarning,
        check_output_path,
        sample,
    )
    from bdl.sampling.checkpoints import lock as checkpoint_lock
    from bdl.sampling.checkpoints import state as checkpoint_io
    from bdl.sampling.kept import stream as stream_io

    processes = start_processes(args)
    if processes is not None and args.out is not None:
        args.out = process_path(args.out, *processes)
    if args.out is not None:
        check_output_path(args.out)  # before any work: a bad --out must not cost the run
    check_report_path(args.report)
    if args.curve is not None and args.curve.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise ValueError(f"--curve {args.curve}: give a .png, .pdf or .svg file name.")
    if args.resume is not None:
        resumed_command(args)
        checkpoint_lock.check_free(own_directory(args.resume))  # another process runs it: exit 2
    elif args.model is None or args.kernel is None:
        raise ValueError(
            "bdl sample needs a MODEL and --kernel NAME (or --resume DIR to continue a run)."
        )
    elif args.checkpoint is not None:
        checkpoint_io.check_directory(args.checkpoint, "--checkpoint")
        if checkpoint_io.exists(args.checkpoint):
            raise ValueError(
                f"--checkpoint {args.checkpoint} already holds a run; continue it with "
                f"--resume {args.checkpoint}, or give an empty directory."
            )
    if args.stream_to is not None:
        args.stream_to = Path(args.stream_to)
        kept_in = args.checkpoint or args.resume
        if kept_in is not None and Path(kept_in).resolve() == args.stream_to.resolve():
            raise ValueError(
                f"--stream-to {args.stream_to} is the checkpoint's directory; the draws need a "
                "directory of their own."
            )
        stream_io.check_directory(args.stream_to, resuming=args.resume is not None)
    args.evaluate = args.evaluate or (args.no_keep_draws and args.stream_to is None)
    if args.curve is not None and not args.evaluate:
        raise ValueError("--curve plots the test BMA scored while sampling; add --evaluate.")
    mesh = device_mesh(args)
    if args.chains is None:  # 4, or the next multiple of the devices the chains are split over
        devices = jax.local_device_count() if mesh is None else mesh.shape["chain"]
        per = jax.process_count() * devices
        args.chains = -(-4 // per) * per
    args.seed = 0 if args.seed is None else args.seed
    if not args.checkpoint_every >= 0:
        raise ValueError(f"--checkpoint-every must be >= 0 seconds; got {args.checkpoint_every}.")
    check_seed(args.seed)
    check_kernel(args.kernel)
    chosen = kernel_run(args)
    spec, kernel, lengths = chosen.spec, chosen.kernel, chosen.lengths
    target = spec.compile()
    steps, burn_in, thin = lengths.steps, lengths.burn_in, lengths.thin
    print(
        f"{target.name}: {args.kernel} {chosen.hyper or registry.defaults(args.kernel)}, "
        f"{lengths.chains} chains x {steps} steps (burn-in {burn_in}, thin {thin})"
    )
    directory = args.resume or args.checkpoint
    # held from recording the command to the run's end: a second process is refused, not mixed in
    held = (
        contextlib.nullcontext()
        if directory is None
        else checkpoint_lock.hold(own_directory(directory))
    )
    with held, warnings.catch_warnings():
        if directory is not None:  # a resumed run records its (possibly extended) length
            record_command(args, directory, steps, burn_in, thin)
        start = time.perf_counter()
        # an interruption is reported below, with what was kept
        warnings.filterwarnings("ignore", "sampling interrupted", UserWarning)
        warnings.filterwarnings("ignore", category=DivergenceWarning)  # reported below
        warnings.filterwarnings("ignore", category=ConvergenceWarning)  # reported below
        samples = sample(
            target,
            kernel,
            num_steps=steps,
            burn_in=burn_in,
            thin=thin,
            num_chains=lengths.chains,
            seed=args.seed,
            init=spec.init if args.init is None else args.init,
            progress=True,
            checkpoint=args.checkpoint,
            checkpoint_every=args.checkpoint_every,
            resume=args.resume,
            keep_draws=not args.no_keep_draws,
            evaluate=args.evaluate,
            stream_to=args.stream_to,
            mesh=mesh,
        )
    print(f"{samples} in {time.perf_counter() - start:.1f} s")
    if samples.interrupted:
        print(f"bdl sample: {interruption(samples, steps, burn_in)}", file=sys.stderr)
        if directory is not None:
            print(f"bdl sample: continue with: bdl sample --resume {directory}", file=sys.stderr)
    if args.stream_to is not None:
        print(f"draws streamed to {args.stream_to} (read with bdl.load_samples)")
    if samples.evaluation is not None:
        print(evaluation_line(samples.evaluation))
        if args.curve is not None and samples.evaluation.draws.size:
            save_curve(samples.evaluation, args.curve, f"{target.name}, {args.kernel}")
            print(f"BMA curve plotted to {args.curve}")
    if not samples.kept_draws:
        if samples.adapted is not None:
            print("adapted (per chain): " + adapted_line(samples.adapted))
        if args.out is not None:
            samples.save(args.out)
            print(f"run (no draws) written to {args.out}")
        if args.report is not None:
            write_report(samples, args.report, target)
        return exit_status(samples)
    if samples.num_draws == 0:
        if not samples.interrupted:
            print("no draws were kept (every step was marked as a non-sample); run longer.")
        return 130 if samples.interrupted else 0
    if args.out is not None:  # first: an interruption while summarising loses nothing
        samples.save(args.out)
        print(f"draws written to {args.out}")
    if samples.adapted is not None:
        print("adapted (per chain): " + adapted_line(samples.adapted))
    if samples.healthy_chains.size:
        print("\n".join(summary_lines(target, samples, spec.parameter_labels)))
    else:
        print(
            "no chain ran to the end without diverging: no summary (the draws before each "
            "divergence are in samples.valid" + (f", saved in {args.out})." if args.out else ").")
        )
    if args.report is not None:
        write_report(samples, args.report, target)
    status = exit_status(samples)
    if status == NOT_CONVERGED:
        hint = tuned_hint(args.model, spec, args.kernel, kernel, chosen.given, args.tuned)
        if hint:
            print(f"bdl sample: {hint}", file=sys.stderr)
    return status


def evaluation_line(evaluation: Any) -> str:
    """The streamed BMA's final metrics and how many draws it averaged."""
    draws = int(evaluation.draws[-1]) if evaluation.draws.size else 0
    shown = "  ".join(f"{k} {v:.4f}" for k, v in evaluation.metrics.items())
    return f"test BMA over {draws} draws per chain (scored while sampling): {shown}"


def save_curve(evaluation: Any, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = evaluation.plot()
    axes[0].figure.suptitle(title)
    axes[0].figure.tight_layout()
    axes[0].figure.savefig(path)
    plt.close(axes[0].figure)


def start_processes(args: argparse.Namespace) -> tuple[int, int] | None:
    """``jax.distributed.initialize`` for ``--distributed``; (process index, count), or None."""
    import jax

    explicit = (args.coordinator, args.num_processes, args.process_id)
    if not args.distributed:
        if any(v is not None for v in explicit):
            raise ValueError("--coordinator, --num-processes and --process-id need --distributed.")
        return None
    if any(v is not None for v in explicit) and any(v is None for v in explicit):
        raise ValueError(
            "--coordinator, --num-processes and --process-id go together (give all three, or "
            "none to let jax.distributed.initialize() read them from the cluster manager)."
        )
    if args.coordinator is None:
        jax.distributed.initialize()
    else:
        jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id)
    return jax.process_index(), jax.process_count()


def process_path(path: Path, index: int, count: int) -> Path:
    """``draws.npz`` → ``draws.process-1.npz``: each process's own file of draws."""
    return path.with_name(f"{path.stem}.process-{index}{path.suffix}")


def device_mesh(args: argparse.Namespace) -> Any:
    """The mesh of ``--devices`` and ``--data-devices`` (None: ``bdl.sample``'s default)."""
    import jax

    from bdl.sampling import make_mesh

    data = args.data_devices
    if data is None or data < 1:
        raise ValueError(f"--data-devices must be >= 1; got {data}.")
    if args.devices is None and data == 1:
        return None
    local = jax.local_device_count()
    devices = local if args.devices is None else args.devices
    if not 1 <= devices <= local:
        raise ValueError(
            f"--devices {devices}: this process has {local} {jax.default_backend()} device(s); "
            f"give 1 to {local}."
        )
    if devices % data:
        raise ValueError(
            f"--data-devices {data} does not divide --devices {devices}; the chains are split "
            f"over devices / data-devices; give a divisor of {devices}."
        )
    return make_mesh(chains=devices // data, data=data, devices=jax.local_devices()[:devices])


def own_directory(directory: Path) -> Path:
    """The checkpoint directory of this process (``process-I`` inside ``directory`` in a
    multi-process run), which ``bdl.sample`` locks."""
    from bdl.sampling.checkpoints.policy import own

    return own(Path(directory))


def interruption(samples: Samples, steps: int, burn_in: int) -> str:
    """One line saying where Ctrl-C stopped the run and what is kept."""
    where = f"interrupted after {samples.steps_done} of {steps} steps"
    if samples.num_draws:
        return f"{where}; summarising the {samples.num_draws} draws per chain collected."
    phase = " (during burn-in)" if samples.steps_done < burn_in else ""
    return f"{where}{phase}: no draws yet, nothing to summarise or save."


def adapted_line(adapted: dict) -> str:
    """The adapted step sizes and frictions, and the mass's range, on one line."""
    import jax
    import numpy as np

    parts = [
        f"{k} " + " ".join(f"{v:.3g}" for v in np.asarray(adapted[k]))
        for k in ("step_size", "friction")
        if k in adapted
    ]
    if "mass" in adapted:
        m = np.concatenate([np.ravel(x) for x in jax.tree.leaves(adapted["mass"])])
        parts.append(f"mass from {m.min():.3g} to {m.max():.3g}")
    if "control_variate" in adapted:
        on = np.asarray(adapted["control_variate"], bool)
        parts.append(f"gradients re-centred on the mode in {int(on.sum())} of {on.size} chains")
    return "; ".join(parts)

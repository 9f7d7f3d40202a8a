"""Parsing and checking command-line arguments, before anything is compiled.

Every check names the flag and says what to pass instead; a value given on the command line is
never replaced by a default (``is None`` tests, not truthiness: ``--thin 0`` is an error, not
"the model file's thin").
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import math
from pathlib import Path
from typing import Any

#: the largest seed: JAX keys take 32-bit seeds, and a larger one would silently wrap around
MAX_SEED = 2**31 - 1
#: the starts of ``bdl.sample``'s ``init`` for models and for potentials
MODEL_INITS = ("auto", "network", "perturbed", "map", "prior", "fixed")
POTENTIAL_INITS = ("auto", "fixed")
#: the help of a command's MODEL argument (docs/models.md, "How `bdl sample MODEL` finds a model")
MODEL_HELP = (
    "a model name (./models/NAME.py in the working directory, else a model shipped with bdl) or "
    "a path to a .py file defining build()"
)


def parse_options(items: list[str] | None, flag: str) -> dict[str, Any]:
    """``["step_size=1e-3", "friction=2", "raw=true"]`` -> ``{"step_size": 0.001, "friction": 2,
    "raw": True}``: Python literals, ``true``/``false`` in any case as booleans, anything else as
    a string."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            example = "step_size=1e-3" if flag == "--hyper" else "depth=3"
            raise ValueError(f"{flag} expects KEY=VALUE, e.g. {flag} {example}; got {item!r}.")
        if value.strip().lower() in ("true", "false"):
            out[key] = value.strip().lower() == "true"
            continue
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


@dataclasses.dataclass(frozen=True)
class RunLengths:
    """The run's lengths, checked: ``steps`` ≥ 1, 0 ≤ ``burn_in`` < ``steps``, ``thin`` ≥ 1,
    at least one draw, ``chains`` ≥ 1."""

    steps: int
    burn_in: int
    thin: int
    chains: int

    @property
    def draws(self) -> int:
        """Draws per chain."""
        return (self.steps - self.burn_in) // self.thin


def run_lengths(args: argparse.Namespace, spec: Any) -> RunLengths:
    """``--steps``, ``--burn-in``, ``--thin`` (each the given value, or the model file's when not
    given: with ``--tuned``, its run lengths for ``--kernel`` where it has them) and
    ``--chains``, checked; ``ValueError`` naming the flag and the fix."""
    own = spec.kernel_lengths(args.kernel) if getattr(args, "tuned", False) else {}

    def pick(flag: str, given: int | None, default: int) -> tuple[int, str]:
        if given is None:
            return default, f"{flag} (the model file's default, {default})"
        return given, f"{flag} {given}"

    steps, steps_src = pick("--steps", args.steps, own.get("num_steps", spec.num_steps))
    burn_in, burn_src = pick("--burn-in", args.burn_in, own.get("burn_in", spec.burn_in))
    thin, thin_src = pick("--thin", args.thin, own.get("thin", spec.thin))
    at_least("--steps", steps_src, steps, 1, "total steps per chain, burn-in included")
    at_least("--burn-in", burn_src, burn_in, 0, "steps discarded before the first draw")
    at_least("--thin", thin_src, thin, 1, "keep every THIN-th step after burn-in")
    at_least("--chains", f"--chains {args.chains}", args.chains, 1, "chains run in parallel")
    if burn_in >= steps:
        raise ValueError(
            f"{burn_src} must be smaller than {steps_src}: nothing would be collected; pass "
            f"--burn-in {steps // 5} (or any value below {steps}), or more --steps."
        )
    if thin > steps - burn_in:
        raise ValueError(
            f"{thin_src} is larger than the {steps - burn_in} steps after burn-in ({steps_src}, "
            f"{burn_src}): nothing would be collected; pass --thin {steps - burn_in} or less, or "
            "more --steps."
        )
    return RunLengths(steps, burn_in, thin, args.chains)


def add_hyper_and_option_arguments(p: argparse.ArgumentParser, hyper_note: str = "") -> None:
    """``--hyper KEY=VALUE`` and ``--option KEY=VALUE`` (both repeatable) of a command that runs
    a kernel on a model file; ``hyper_note`` ends the help of ``--hyper``."""
    p.add_argument(
        "--hyper",
        action="append",
        metavar="KEY=VALUE",
        help=f"kernel hyper-parameter (repeatable), e.g. --hyper step_size=1e-3{hyper_note}",
    )
    add_option_argument(p)


def add_integer(
    p: argparse.ArgumentParser, flag: str, help: str, default: int | None = None
) -> None:
    """``flag``, a whole number (a count of steps, draws or chains, or a seed), ``default`` when
    not given."""
    p.add_argument(flag, type=int, default=default, help=help)


def add_path(p: argparse.ArgumentParser, flag: str, help: str, metavar: str | None = None) -> None:
    """``flag``, a file or directory path, ``None`` when not given."""
    p.add_argument(flag, type=Path, default=None, metavar=metavar, help=help)


def add_option_argument(p: argparse.ArgumentParser) -> None:
    """``--option KEY=VALUE`` (repeatable): a model option passed to the model file's build()."""
    p.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="model option passed to build() (repeatable), e.g. --option depth=3",
    )


@dataclasses.dataclass(frozen=True)
class KernelRun:
    """A command's kernel and model file, read from its arguments and checked, nothing compiled.

    Attributes:
        spec: the model file's :class:`bdl.ModelSpec` (``--option`` passed to its build()).
        given: the ``--hyper`` values.
        hyper: the hyper-parameters the kernel is built with (with ``--tuned``, the model
            file's suggestion under ``given``).
        kernel: the kernel, built.
        lengths: the run's lengths.
    """

    spec: Any
    given: dict[str, Any]
    hyper: dict[str, Any]
    kernel: Any
    lengths: RunLengths


def kernel_run(args: argparse.Namespace) -> KernelRun:
    """The model file, kernel and run lengths of ``bdl sample`` and ``bdl validate``, from MODEL,
    ``--option``, ``--kernel``, ``--hyper``, ``--tuned``, ``--init`` and the run lengths, each
    checked (``ValueError``) before anything is compiled."""
    from bdl.kernels import registry
    from bdl.model_files import load_spec

    given = parse_options(args.hyper, "--hyper")
    spec = load_spec(args.model, **parse_options(args.option, "--option"))
    lengths = run_lengths(args, spec)
    check_init(args.init, spec)
    hyper = kernel_hyper(args.model, spec, args.kernel, given, args.tuned)
    kernel = registry.get(args.kernel, **hyper)
    check_adaptable(kernel, lengths.burn_in)
    return KernelRun(spec, given, hyper, kernel, lengths)


def at_least(flag: str, described: str, value: int, minimum: int, meaning: str) -> None:
    """``ValueError`` unless ``value`` ≥ ``minimum``; ``described`` is the flag with its value
    as the user gave it (or where the value came from)."""
    if value < minimum:
        raise ValueError(
            f"{described} must be >= {minimum} ({meaning}); pass {flag} {minimum} or more."
        )


def check_seed(seed: int) -> None:
    """Seeds are 32-bit: a larger or negative one would wrap around to another run's seed."""
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"--seed {seed}: must be an integer in [0, {MAX_SEED}].")


def check_init(init: str | None, spec: Any) -> None:
    """``--init`` must be a start the model supports (potentials: auto or fixed)."""
    if init is None:
        return
    from bdl.dsl.potential import Potential

    allowed = POTENTIAL_INITS if isinstance(spec.model, Potential) else MODEL_INITS
    if init not in allowed:
        what = "a potential" if isinstance(spec.model, Potential) else "a model"
        raise ValueError(f"--init {init!r}: the start of {what} is one of {', '.join(allowed)}.")


def check_kernel(name: str, what: str = "--kernel") -> None:
    """A kernel name (``what``: how the command line calls it) must be registered;
    ``ValueError`` listing the kernels otherwise."""
    from bdl.kernels import registry

    if name not in registry.names():
        import difflib

        close = difflib.get_close_matches(name, registry.names(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"{what} {name!r} is not a registered kernel{hint}; the kernels are "
            f"{', '.join(registry.names())} (see `bdl kernels`)."
        )


def check_finite(flag: str, value: float, minimum: float = 0.0) -> None:
    """``ValueError`` unless ``value`` is a finite number ≥ ``minimum``."""
    if not (math.isfinite(value) and value >= minimum):
        raise ValueError(f"{flag} {value}: must be a finite number >= {minimum:g}.")


def kernel_hyper(
    model: str, spec: Any, kernel: str, given: dict[str, Any], tuned: bool
) -> dict[str, Any]:
    """The hyper-parameters a command builds ``kernel`` with: the ``--hyper`` values; with
    ``--tuned``, the model file's suggestion for the kernel with the ``--hyper`` values over it (a
    value of one parameterisation drops the suggestion's values of the other: ``step_size``
    replaces a suggested ``learning_rate`` and ``momentum``). ``--tuned`` for a kernel the model
    suggests nothing for is an error naming the kernels it has suggestions for."""
    if not tuned:
        return given
    from bdl.kernels import registry

    suggested = spec.kernel_hyper(kernel)
    if not suggested:
        known = ", ".join(sorted(spec.kernels)) or "none"
        raise ValueError(
            f"--tuned: {model} suggests no hyper-parameters for {kernel} (it has suggestions "
            f"for: {known}); leave --tuned out to adapt the kernel, or give --hyper."
        )
    return registry.merge(suggested, given)


def tuned_hint(
    model: str, spec: Any, name: str, kernel: Any, hyper: dict[str, Any], tuned: bool
) -> str:
    """For a run that did not converge: the model file's validated settings for the kernel, when
    the run did not use them (no ``--tuned``), as one line naming ``--tuned``; ``""`` otherwise.

    Args:
        model: MODEL as given on the command line.
        spec: the model file's :class:`bdl.ModelSpec`.
        name: ``--kernel``, the kernel's registered name.
        kernel: the kernel as run (``registry.get(...)``).
        hyper: the ``--hyper`` values given.
        tuned: whether ``--tuned`` was given.

    Returns:
        the line, or ``""``.
    """
    suggested = spec.kernel_hyper(name)
    if tuned or not suggested:
        return ""
    from bdl.sampling import warmup

    if warmup.needs_adaptation(kernel):
        ran = "adapted its step size, mass and friction during burn-in instead"
    else:
        given = " ".join(f"--hyper {k}={v}" for k, v in hyper.items())
        ran = f"ran with {given or 'the kernel defaults'} instead"
    shown = ", ".join(f"{k}={v}" for k, v in suggested.items())
    return (
        f"{model} has validated settings for {name} ({shown}) and this run {ran}: rerun with "
        "--tuned to use them."
    )


def check_adaptable(kernel: Any, burn_in: int) -> None:
    """A kernel built without a step size adapts during burn-in, which needs at least
    :data:`bdl.sampling.warmup.MIN_BURN_IN` steps: else ``ValueError`` naming the flags, before
    the model is compiled."""
    from bdl.sampling import warmup

    if warmup.needs_adaptation(kernel) and burn_in < warmup.MIN_BURN_IN:
        raise ValueError(
            f"--burn-in {burn_in} is too short to adapt {kernel.name}'s step size and mass (at "
            f"least {warmup.MIN_BURN_IN} steps); give a longer --burn-in, or a step size with "
            "--hyper step_size=... (or --tuned for the model file's)."
        )

"""Entry point of the ``bdl`` console script.

The command modules import the heavy parts of the library (JAX programs, NumPyro, ArviZ,
Matplotlib) inside their ``run`` functions, so that building the parser, ``--help`` and the quick
commands (``bdl kernels``) start fast.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings
from collections.abc import Iterator

from bdl.cli import (
    check_cmd,
    demo,
    kernels_cmd,
    merge_cmd,
    meta_train_cmd,
    reference_cmd,
    sample_cmd,
    validate_cmd,
)

#: the exit statuses of every command (docs/cli.md)
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_DIVERGED = 3
EXIT_NOT_CONVERGED = 4  # bdl.cli.summary.NOT_CONVERGED, which bdl sample returns
EXIT_BIASED = 5  # bdl.cli.summary.BIASED, which bdl sample returns
EXIT_INTERRUPTED = 130
EXIT_PIPE_CLOSED = 141

EPILOG = """\
exit status:
  0    success (bdl check: the kernel is exact)
  1    a verdict failed: bdl validate outside its thresholds, bdl check approximate
  2    bad usage: an invalid argument, unknown model or kernel, a broken model file, an
       untrusted NUTS reference (bdl validate, bdl reference); the message names the
       argument and the fix
  3    a chain diverged (bdl sample: the draws are still summarised and saved)
  4    not converged (bdl sample: R-hat, bulk or tail ESS outside Vehtari et al.'s
       thresholds, or a stuck chain; the draws are still summarised and saved)
  5    biased (bdl sample: the chains mixed, but the Stein identities of the target fail
       beyond their Monte Carlo error: the draws are too wide, too narrow or shifted;
       they are still summarised and saved)
  130  interrupted (Ctrl-C): bdl sample first summarises and saves the draws it has
  141  the output pipe was closed early (e.g. `bdl kernels | head`)

Commands: bdl COMMAND --help. Documentation: docs/cli.md."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bdl",
        description="Bayesian deep learning with stochastic-gradient MCMC.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands = (
        demo,
        sample_cmd,
        merge_cmd,
        kernels_cmd,
        check_cmd,
        validate_cmd,
        reference_cmd,
        meta_train_cmd,
    )
    for command in commands:
        command.add_parser(sub)
    # each command's module docstring is its description in `bdl COMMAND --help`
    for command, command_parser in zip(commands, sub.choices.values(), strict=True):
        command_parser.description = (command.__doc__ or "").replace("``", "").strip()
        command_parser.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one ``bdl`` command and return its exit status (never raises ``SystemExit``).

    Usage errors, errors in model files and Ctrl-C end in one line on stderr and the statuses of
    :data:`EPILOG`; warnings print as ``bdl: warning: <message>``. Errors that are bugs (anything
    not raised by a check of the user's input) keep their traceback.
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # argparse: --help (0) or a usage error (2), already printed
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    name = f"bdl {args.command}"
    try:
        with _clean_warnings():
            return args.run(args)
    except KeyboardInterrupt:
        # commands keep what they collected before this propagates (draws, checkpoints)
        print(f"{name}: interrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_PIPE_CLOSED
    except (ValueError, TypeError, FileNotFoundError, NotADirectoryError) as err:
        print(f"{name}: error: {_message(err)}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as err:
        from bdl.model_files import describe, user_frame

        if user_frame(err.__traceback__) is None:
            raise  # not the user's model code: a bug, keep the traceback
        print(f"{name}: error in the model file: {describe(err)}", file=sys.stderr)
        return EXIT_USAGE


def console_main() -> int:
    """The ``bdl`` console script: :func:`main` with the persistent XLA compilation cache
    (``bdl.enable_compilation_cache``) unless ``BDL_XLA_CACHE=0``."""
    try:
        if os.environ.get("BDL_XLA_CACHE", "1") != "0":
            from bdl.compilation_cache import enable_compilation_cache

            enable_compilation_cache()
        status = main()
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return status
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_PIPE_CLOSED
    except KeyboardInterrupt:
        print("bdl: interrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED


def _message(err: BaseException) -> str:
    """The error's message, with the model file and line where the user's code raised it (or
    raised the error the library's message is about)."""
    from bdl.model_files import ModelFileError, describe, locate, user_frame

    if isinstance(err, ModelFileError):
        return str(err)
    if user_frame(err.__traceback__) is not None:
        return describe(err)
    frame = locate(err)
    if frame is None:
        return str(err)
    return f"{err} (raised at {frame.filename}:{frame.lineno}, in {frame.name}: {frame.line})"


def _silence_stdout() -> None:
    """After the reader of stdout went away (``| head``): point stdout at devnull, so that
    Python's final flush does not fail again (the recipe of the ``signal`` module's docs)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # stdout is not a file (captured, replaced)
        pass


@contextlib.contextmanager
def _clean_warnings() -> Iterator[None]:
    """Warnings as one line, ``bdl: warning: <message>``, without the source line that Python
    shows by default; for the command line only (library users keep Python's format)."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        stream = sys.stderr if file is None else file
        with contextlib.suppress(OSError, ValueError):
            stream.write(f"bdl: warning: {message}\n")

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


if __name__ == "__main__":
    sys.exit(console_main())

"""The command line a checkpoint keeps: ``bdl sample --checkpoint DIR`` records it in
``DIR/command.json`` (:func:`record_command`), and ``bdl sample --resume DIR`` rebuilds the run
from it (:func:`resumed_command`), refusing a flag given again with another value. ``--hyper``
and ``--option`` are compared as the values they parse to, so ``step_size=0.005`` matches a
recorded ``step_size=5e-3``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bdl.cli.options import parse_options

__all__ = ["RUN_FILE", "record_command", "resumed_command"]

#: what ``--checkpoint`` records of the command line, so that ``--resume`` can rebuild the run
RUN_FILE = "command.json"
_RECORDED = (
    "model",
    "kernel",
    "hyper",
    "option",
    "tuned",
    "chains",
    "seed",
    "burn_in",
    "thin",
    "evaluate",
    "no_keep_draws",
    "stream_to",
)


def record_command(
    args: argparse.Namespace, directory: Path, steps: int, burn_in: int, thin: int
) -> None:
    """Write what ``--resume`` needs to rebuild this run into the checkpoint directory; paths
    (a model file, the stream's directory) absolute, so that the run resumes from anywhere."""
    record = {name: getattr(args, name) for name in _RECORDED}
    record["model"] = _absolute_model(args.model)
    record["stream_to"] = None if args.stream_to is None else str(Path(args.stream_to).resolve())
    record.update(steps=steps, burn_in=burn_in, thin=thin, init=args.init)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / RUN_FILE).write_text(json.dumps(record, indent=1))


def _absolute_model(model: str) -> str:
    """MODEL as recorded: a model file's absolute path, a model's name as it is."""
    path = Path(model)
    return str(path.resolve()) if path.suffix == ".py" and path.is_file() else model


def resumed_command(args: argparse.Namespace) -> None:
    """Fill ``args`` from the command recorded in ``--resume DIR``; a flag given again with
    another value is an error naming it (``--steps`` may grow: the run is extended)."""
    path = args.resume / RUN_FILE
    if not path.is_file():
        raise ValueError(
            f"--resume {args.resume}: no {RUN_FILE} there; give a directory that "
            "`bdl sample ... --checkpoint DIR` wrote."
        )
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"--resume {args.resume}: {path} cannot be read ({err}).") from None
    if args.checkpoint is not None and args.checkpoint != args.resume:
        raise ValueError(
            "--checkpoint with --resume: a resumed run goes on checkpointing into the directory "
            "it resumes; leave --checkpoint out."
        )
    for name in (*_RECORDED, "init"):
        given, saved = getattr(args, name), record.get(name)
        if name == "stream_to" and given is not None:
            given = str(Path(given).resolve())
        if name == "model" and given is not None:
            given = _absolute_model(given)
        flag = "MODEL" if name == "model" else "--" + name.replace("_", "-")
        if given not in (None, False, []) and not _same(flag, given, saved):
            raise ValueError(_conflict(flag, given, saved, args.resume))
        setattr(args, name, saved)
    if args.steps is None:
        args.steps = record.get("steps")


def _same(flag: str, given: Any, saved: Any) -> bool:
    """Whether a flag given again says what the record says: ``--hyper`` and ``--option`` as
    the values they parse to, in any order (``step_size=0.005`` is ``step_size=5e-3``), any
    other flag as given."""
    if flag in ("--hyper", "--option") and isinstance(saved, list):
        try:
            return parse_options(given, flag) == parse_options(saved, flag)
        except ValueError:  # a record that does not parse: it is not what was given
            return False
    return given == saved


def _conflict(flag: str, given: object, saved: object, directory: Path) -> str:
    return (
        f"{flag} {given} conflicts with the run in --resume {directory}, which has {saved}; "
        f"leave {flag} out to continue it."
    )

"""``--report``: the run report (docs/report.md) that ``bdl sample`` and ``bdl validate`` write."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bdl.utils.files import can_create_in


def add_report_argument(p: argparse.ArgumentParser, *, default_path: bool) -> None:
    """Add ``--report`` to ``p``.

    Args:
        p: the command's parser.
        default_path: whether ``--report`` may be given without a file name (``bdl validate``
            then writes ``bdl-output/validate_MODEL_KERNEL.html``).
    """
    if default_path:
        p.add_argument(
            "--report",
            type=Path,
            nargs="?",
            const=Path(""),
            default=None,
            metavar="HTML",
            help="write the run report, one self-contained HTML file (default with no file "
            "name: bdl-output/validate_MODEL_KERNEL.html)",
        )
    else:
        p.add_argument(
            "--report",
            type=Path,
            default=None,
            metavar="HTML",
            help="write the run report, one self-contained HTML file (e.g. run.html)",
        )


#: where ``bdl validate --report`` without a file name writes
DEFAULT_DIRECTORY = Path("bdl-output")


def check_report_path(path: Path | None) -> None:
    """Refuse a ``--report`` that is not an ``.html`` file name in a directory this process can
    write in, before any work: a report that cannot be written would otherwise end the whole
    run in an error.

    Args:
        path: ``--report`` as given (``None``: not given; ``Path("")``: given without a file
            name, for :data:`DEFAULT_DIRECTORY`).

    Raises:
        ValueError: naming ``--report`` and what to give instead.
    """
    if path is None:
        return
    if path == Path(""):
        directory = DEFAULT_DIRECTORY
        if directory.exists() and not directory.is_dir():
            raise ValueError(
                f"--report writes into {directory}/, but {directory} is a file; remove it, or "
                "give --report a file name, e.g. --report run.html."
            )
        where = directory if directory.is_dir() else Path.cwd()  # created there when missing
        if not can_create_in(where):
            raise ValueError(
                f"--report writes into {directory}/, but this process cannot create files in "
                f"{where}; run from a directory you can write in, or give --report a file name "
                "there, e.g. --report /tmp/run.html."
            )
        return
    if path.is_dir():
        raise ValueError(
            f"--report {path} is a directory; pass a file name such as {path / 'run.html'}."
        )
    if path.suffix.lower() not in (".html", ".htm"):
        raise ValueError(
            f"--report {path}: the report is an HTML file; give a name ending in .html, e.g. "
            f"--report {path.with_suffix('.html')}."
        )
    if not path.parent.is_dir():
        raise ValueError(
            f"--report {path}: the directory {path.parent} does not exist; create it first."
        )
    if not can_create_in(path.parent):
        raise ValueError(
            f"--report {path}: this process cannot create files in {path.parent} (no write "
            "permission, or a read-only file system); give a file name in a directory you can "
            f"write in, e.g. --report /tmp/{path.name}."
        )


def write_report(
    samples: Any, path: Path, target: Any, validation: Any = None, default: Path | None = None
) -> Path:
    """Write the report to ``path`` (``default`` when ``--report`` came without a file name)
    and say where."""
    from bdl.report import write_report as write

    if path == Path(""):
        assert default is not None
        path = default  # in DEFAULT_DIRECTORY
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        written = write(samples, path, target=target, validation=validation)
    except OSError as err:  # checked before the run; a disk that fills since is still no traceback
        raise ValueError(
            f"--report {path}: the report could not be written ({err}); what the run printed "
            "and saved above stands."
        ) from None
    print(f"report: {written}")
    return written

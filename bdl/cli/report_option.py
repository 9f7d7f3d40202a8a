"""``--report``: the run report (docs/report.md) that ``bdl sample`` and ``bdl validate`` write."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


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


def check_report_path(path: Path | None) -> None:
    """Refuse a ``--report`` that is not an ``.html`` file name, before any work.

    Raises:
        ValueError: naming ``--report`` and what to give instead.
    """
    if path is None or path == Path(""):
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


def write_report(
    samples: Any, path: Path, target: Any, validation: Any = None, default: Path | None = None
) -> Path:
    """Write the report to ``path`` (``default`` when ``--report`` came without a file name)
    and say where."""
    from bdl.report import write_report as write

    if path == Path(""):
        assert default is not None
        path = default
        path.parent.mkdir(parents=True, exist_ok=True)
    written = write(samples, path, target=target, validation=validation)
    print(f"report: {written}")
    return written

"""Figures written to files with Matplotlib, imported only when a figure is drawn."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend, which writes files and needs no display.

    Returns:
        The ``matplotlib.pyplot`` module.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(
    fig: Any, path: Path, title: str, *, dpi: float, title_size: float | None = None
) -> Path:
    """Title ``fig``, lay it out, write it to ``path`` (making its folder) and close it.

    Args:
        fig: the Matplotlib figure.
        path: the image file to write.
        title: the figure's title.
        dpi: the image's resolution.
        title_size: the title's font size (default: Matplotlib's for figure titles).

    Returns:
        ``path``.
    """
    fig.suptitle(title, **({} if title_size is None else {"fontsize": title_size}))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path

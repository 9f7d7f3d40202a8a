"""The run report's page: its sections, in order, and the self-contained HTML they are written in.

Every figure is embedded in the page as a base64 PNG (``<img src="data:image/png;base64,…">``)
and the style sheet is inline, so the file opens anywhere, with no network and nothing beside it.
Each section is a ``<section id=… data-section=…>`` named in :data:`SECTIONS`, each figure a
``<figure data-figure=…>`` named in :data:`FIGURES`: what the report's tests look for.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["FIGURES", "SECTIONS", "figure", "note", "page", "section", "table"]

#: the sections of a report, in order: id → heading
SECTIONS: dict[str, str] = {
    "settings": "Run settings and provenance",
    "convergence": "Convergence: R̂, ESS and the verdict",
    "bias": "Bias: do the draws follow the target? (Stein identities)",
    "traces": "Traces and rank plots",
    "chains": "Chains: divergences and run-aways",
    "adapted": "Adapted hyper-parameters per chain",
    "temperatures": "Kinetic and configurational temperature",
    "validation": "Validation against NUTS",
    "bma": "Held-out BMA against the number of draws",
}

#: the figures a report may hold: id → what it shows
FIGURES: dict[str, str] = {
    "trace": "per-chain traces of the worst quantities by R̂",
    "rank": "per-chain rank plots of the same quantities",
    "kinetic-temperature": "kinetic temperature per draw and chain with its χ² band",
    "configurational-temperature": "configurational temperature per draw with its band",
    "marginals": "the kernel's marginals over NUTS's",
    "validation-plot": "the figure bdl.validate wrote",
    "bma-curve": "the BMA's test metrics against the draws per chain",
}

_STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1100px;
padding:1em 2em;color:#222;line-height:1.4}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;
margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#1a7f37;font-weight:600}.fail{color:#c0392b;font-weight:600}
.verdict{font-size:1.1em;padding:.4em .8em;border-radius:4px;display:inline-block}
.verdict.ok{background:#e6f4ea}.verdict.fail{background:#fdecea}
.note{color:#555;font-style:italic}
figure{margin:1em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85em;color:#555}nav ul{columns:2;font-size:.9em}
code{background:#f4f4f4;padding:0 .2em}
"""


def escape(text: Any) -> str:
    """``text`` as HTML text."""
    return html.escape(str(text), quote=True)


def figure(fig: Any, name: str, caption: str, dpi: int = 80) -> str:
    """A matplotlib figure as an embedded PNG ``<figure data-figure=name>``; closes ``fig``.

    Args:
        fig: the matplotlib figure.
        name: one of :data:`FIGURES`.
        caption: what it shows, one sentence.
        dpi: the PNG's resolution.

    Returns:
        the HTML of the figure.

    Raises:
        ValueError: ``name`` is not one of :data:`FIGURES`.
    """
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=dpi)
    finally:
        plt.close(fig)
    return image(buffer.getvalue(), name, caption)


def image(png: bytes, name: str, caption: str, mime: str = "image/png") -> str:
    """Image bytes (PNG, or another ``mime``) as an embedded ``<figure data-figure=name>``."""
    if name not in FIGURES:
        raise ValueError(f"figure name {name!r} is not one of {sorted(FIGURES)}.")
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<figure data-figure="{name}"><img alt="{escape(FIGURES[name])}" '
        f'src="data:{mime};base64,{data}"><figcaption>{escape(caption)}</figcaption></figure>'
    )


def note(text: str) -> str:
    """A paragraph saying why something is absent or how to read it."""
    return f'<p class="note">{escape(text)}</p>'


def paragraph(text: str, css: str = "") -> str:
    """A plain paragraph (``css``: its class)."""
    return f'<p class="{css}">{escape(text)}</p>' if css else f"<p>{escape(text)}</p>"


def table(head: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """An HTML table; numbers are right-aligned, ``True``/``False`` shown as ok/FAIL."""
    out = ["<table><thead><tr>", *(f"<th>{escape(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>")
        for cell in row:
            if cell is True or cell is False:
                css = "ok" if cell else "fail"
                out.append(f'<td class="{css}">{"ok" if cell else "FAIL"}</td>')
            elif isinstance(cell, int | float):
                out.append(f'<td class="num">{escape(_number(cell))}</td>')
            else:
                out.append(f"<td>{escape('' if cell is None else cell)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def section(name: str, body: Sequence[str]) -> str:
    """The section ``name`` (one of :data:`SECTIONS`) holding the HTML pieces ``body``."""
    if name not in SECTIONS:
        raise ValueError(f"section name {name!r} is not one of {list(SECTIONS)}.")
    inner = "\n".join(body)
    return (
        f'<section id="{name}" data-section="{name}"><h2>{escape(SECTIONS[name])}</h2>\n'
        f"{inner}\n</section>"
    )


def page(title: str, verdict: tuple[str, bool | None], sections: dict[str, str]) -> str:
    """The whole document: a title, the run's verdict, a table of contents, the sections.

    Args:
        title: the page's title.
        verdict: one line and whether it is good (``None``: neither).
        sections: section name → its HTML (:func:`section`), in :data:`SECTIONS`' order.
    """
    text, good = verdict
    css = "verdict" + ("" if good is None else " ok" if good else " fail")
    contents = "".join(f'<li><a href="#{k}">{escape(SECTIONS[k])}</a></li>' for k in sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>\n<body>\n"
        f'<header><h1>{escape(title)}</h1><p class="{css}">{escape(text)}</p></header>\n'
        f"<nav><ul>{contents}</ul></nav>\n" + "\n".join(sections.values()) + "\n</body></html>\n"
    )


def _number(value: float) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    return format(value, ".4g")

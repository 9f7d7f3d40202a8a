"""Hooks of the documentation site (mkdocs.yml).

The pages of docs/ are also read as files in the repository, where they link to files outside
docs/ (``../README.md``, ``../benchmarks/``). The site has no copy of those files: each such link
becomes its text followed by the file's path in the repository, and a link whose target does not
exist in the repository either is reported as a warning (which fails ``mkdocs build --strict``).

In a table row, a ``|`` inside a code span is written ``\\|``, as GitHub needs it; Python-Markdown
keeps code spans whole when it splits a row into cells, and would show the backslash, so the
site drops it there.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.plugins.bdl")

_LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_TABLE_ROW = re.compile(r"^[ ]{0,3}\|.*$", re.MULTILINE)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def _table_code_pipes(markdown: str) -> str:
    """``markdown`` with each ``\\|`` inside a code span of a table row made a plain ``|``."""

    def row(match: re.Match[str]) -> str:
        return _CODE_SPAN.sub(lambda m: m.group(0).replace("\\|", "|"), match.group(0))

    return _TABLE_ROW.sub(row, markdown)


def _outside_links(markdown: str, page_file: Path, docs_dir: Path, repo: Path, name: str) -> str:
    def replace(match: re.Match[str]) -> str:
        text, link = match.group(1), match.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:", link) or link.startswith(("#", "/")):
            return match.group(0)
        target = (page_file.parent / link.split("#")[0]).resolve()
        if target.is_relative_to(docs_dir):
            return match.group(0)
        if not target.is_relative_to(repo) or not target.exists():
            log.warning("Doc file '%s' links to '%s', which is not in the repository.", name, link)
            return match.group(0)
        path = target.relative_to(repo).as_posix() + ("/" if target.is_dir() else "")
        return f"{text} (`{path}` in the repository)"

    def prose(text: str) -> str:
        return _table_code_pipes(_LINK.sub(replace, text))

    # leave fenced code alone: split around the fences and rewrite the prose between them
    parts, last = [], 0
    for fence in _FENCE.finditer(markdown):
        parts.append(prose(markdown[last : fence.start()]))
        parts.append(fence.group(0))
        last = fence.end()
    parts.append(prose(markdown[last:]))
    return "".join(parts)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs_dir = Path(config["docs_dir"]).resolve()
    repo = Path(config["config_file_path"]).resolve().parent
    page_file = docs_dir / page.file.src_path
    return _outside_links(markdown, page_file, docs_dir, repo, page.file.src_path)

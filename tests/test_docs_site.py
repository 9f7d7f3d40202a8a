"""The documentation site builds with ``mkdocs build --strict`` and renders in a browser.

The strict build fails on any warning: a link to a missing page or file, a page of docs/ left out
of the navigation, a docstring whose ``Args:`` name a parameter the signature does not have, a
reference mkdocstrings cannot resolve. The build is made once per run (shared between pytest-xdist
workers under a file lock) and then checked: every page of docs/ and every public name has its
page, and headless Chromium shows the index, the API page of ``bdl.sample`` and search results.

Without the ``docs`` extra (mkdocs) the tests are skipped, except under CI (``CI`` set), where
scripts/test.sh installs it and a missing mkdocs is an error.
"""

from __future__ import annotations

import fcntl
import html
import importlib.util
import inspect
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from browser import needs_chromium, render, serve

import bdl

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: the subpackages with a page of the API reference (docs/api/)
SUBPACKAGES = (
    "dsl",
    "data",
    "augment",
    "layers",
    "kernels",
    "sampling",
    "evaluation",
    "diagnostics",
    "metrics",
    "validation",
    "optimise",
    "schedules",
)
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}


def _require_mkdocs() -> None:
    missing = [m for m in ("mkdocs", "material", "mkdocstrings") if not importlib.util.find_spec(m)]
    if missing:
        message = f"the docs extra is missing ({', '.join(missing)}): pip install -e '.[docs]'"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)]
    return subprocess.run(cmd, cwd=config.parent, env=ENV, capture_output=True, text=True)


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The site built from mkdocs.yml once per run: its folder (the build's log beside it)."""
    _require_mkdocs()
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, log, done = shared / "docs-site", shared / "docs-site.log", shared / "docs-site.ok"
    with open(shared / "docs-site.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            start = time.perf_counter()
            result = mkdocs_build(ROOT / "mkdocs.yml", folder)
            log.write_text(result.stdout + result.stderr)
            assert result.returncode == 0, f"mkdocs build --strict failed:\n{log.read_text()}"
            done.write_text(f"{time.perf_counter() - start:.1f}")
    return folder


def public_names(module) -> list[str]:
    """``module.__all__``, or the functions and classes it defines where it has none."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isfunction(value) or inspect.isclass(value))
        and value.__module__ == module.__name__
    ]


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def test_every_page_of_docs_is_built(site):
    pages = sorted(DOCS.rglob("*.md"))
    assert len(pages) > 40
    for page in pages:
        rel = page.relative_to(DOCS).with_suffix("")
        built = site / (rel.parent if rel.name == "index" else rel) / "index.html"
        assert built.is_file(), f"{page.relative_to(ROOT)} has no page in the site"
    log = (site.parent / "docs-site.log").read_text()
    assert "WARNING" not in log, log


def test_every_public_name_has_an_api_entry(site):
    """Each name of ``bdl.__all__`` (submodules aside) is a heading of the API page of bdl, and
    each name of a public subpackage's ``__all__`` is on that subpackage's page or on bdl's."""
    top = _text(site / "api" / "bdl" / "index.html")
    names = [n for n in bdl.__all__ if not isinstance(getattr(bdl, n), type(bdl))]
    missing = [n for n in names if not re.search(rf"^\s*bdl\.{n}\s*$", top, re.M)]
    assert not missing, f"not on the API page of bdl: {missing}"
    for sub in SUBPACKAGES:
        module = __import__(f"bdl.{sub}", fromlist=["__all__"])
        page = (site / "api" / sub / "index.html").read_text(encoding="utf-8")
        ids = set(re.findall(r'id="(bdl\.[^"]+)"', page)) | set(
            re.findall(r'id="(bdl\.[^"]+)"', (site / "api" / "bdl" / "index.html").read_text())
        )
        short = {i.rsplit(".", 1)[-1] for i in ids}
        text = _text(site / "api" / sub / "index.html")
        absent = [
            n
            for n in public_names(module)
            if n not in short
            and n not in names
            # a submodule in __all__: a section of the page, or a page of its own
            and not (
                isinstance(getattr(module, n), type(bdl))
                and (f"bdl.{sub}.{n}" in text or (site / "api" / n / "index.html").is_file())
            )
        ]
        assert not absent, f"bdl.{sub}: no API entry for {absent}"


def test_the_api_page_shows_signatures_and_examples(site):
    page = _text(site / "api" / "bdl" / "index.html")
    assert re.search(r"sample\(\s*target: Target,\s*kernel: Kernel,", page)
    assert "num_steps: int | None = None" in page
    for section in ("Parameters:", "Returns:", "Raises:", "Examples:"):
        assert section in page, section
    # a Returns: section of several lines is one entry, not a row per line
    assert re.search(r"stops the run within\s+about a second", page)


def _prose(page: Path) -> str:
    """The text of a built page without its code and its maths."""
    source = page.read_text(encoding="utf-8")
    source = re.sub(r"<(code|pre)\b.*?</\1>", "", source, flags=re.S)
    source = re.sub(r'<(span|div) class="arithmatex">.*?</\1>', "", source, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", source))


def _pages_with_maths(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("index.html") if 'class="arithmatex"' in p.read_text())


def test_api_pages_link_the_pages_they_name(site):
    """A docstring that sends the reader to a page of docs/ links it: no page path is left as
    plain text in the API reference (a value shown as code may still name one)."""
    named = {}
    for page in sorted((site / "api").rglob("index.html")):
        found = re.findall(r"docs/[\w/-]+\.md", _prose(page))
        if found:
            named[str(page.relative_to(site))] = found
    assert not named, f"page paths written as text instead of links: {named}"


def test_maths_is_marked_up_and_katex_is_served_with_the_site(site):
    """Every formula is inside an arithmatex element (no ``$`` of the pages' ``$…$`` and
    ``$$…$$`` left in the text), and KaTeX, its stylesheet and every font the stylesheet names
    come with the site."""
    pages = _pages_with_maths(site)
    assert len(pages) >= 20
    raw = {
        str(p.relative_to(site)): re.findall(r".{0,40}(?:\$|\\\(|\\\[).{0,40}", _prose(p))
        for p in site.rglob("*.html")
    }
    raw = {page: found for page, found in raw.items() if found}
    assert not raw, f"maths not typeset (raw delimiters in the text): {raw}"
    katex = site / "assets" / "katex"
    for name in ("katex.min.js", "katex.min.css", "LICENSE"):
        assert (katex / name).is_file(), name
    fonts = re.findall(r"url\((fonts/[^)]+\.woff2)\)", (katex / "katex.min.css").read_text())
    assert len(fonts) >= 20
    missing = [font for font in fonts if not (katex / font).is_file()]
    assert not missing, f"fonts the stylesheet names that the site lacks: {missing}"
    page = (site / "kernels" / "sghmc" / "index.html").read_text(encoding="utf-8")
    for asset in ("assets/katex/katex.min.js", "assets/katex/katex.min.css", "katex-render.js"):
        assert asset in page, asset
    assert not re.search(r"""(src|href)="https?://[^"]*katex""", page), "KaTeX from a CDN"


def test_table_code_keeps_its_pipes(site):
    """A ``\\|`` in a table's code span (GitHub's escape) shows as ``|`` in the site."""
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "<code>bdl kernels [NAME ...] [--check | --no-check]</code>" in index
    escaped = [
        str(p.relative_to(site))
        for p in site.rglob("index.html")
        if re.search(r"<code>[^<]*\\\|", p.read_text(encoding="utf-8"))
    ]
    assert not escaped, f"a backslash before | in code: {escaped}"


def test_strict_build_fails_on_a_broken_link(tmp_path):
    """The site's own settings (validation, hooks) turn a broken link into a failed build."""
    _require_mkdocs()
    import yaml  # a dependency of mkdocs

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the kernels](kernels.md).\n")
    small = {
        "site_name": "t",
        "strict": True,
        "theme": {"name": "material"},
        "validation": config["validation"],
        "hooks": [str(ROOT / hook) for hook in config["hooks"]],
        "nav": [{"Home": "index.md"}],
    }
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(small))
    result = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert "kernels.md" in result.stdout + result.stderr
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the readme](../missing.md).\n")
    result = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0, "a link out of docs/ to a missing file must fail the build"


def test_strict_build_fails_on_a_docstring_naming_a_missing_parameter(tmp_path):
    """The API reference's settings turn an ``Args:`` entry the signature lacks into a failed
    build (and the same page with the entry right builds)."""
    _require_mkdocs()
    import yaml  # a dependency of mkdocs

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    handler = config["plugins"][1]["mkdocstrings"]["handlers"]["python"]
    options = dict(handler["options"])
    options["extensions"] = [str(ROOT / e) for e in options["extensions"]]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# API\n\n::: tiny\n")
    small = {
        "site_name": "t",
        "strict": True,
        "theme": {"name": "material"},
        "validation": config["validation"],
        "nav": [{"API": "index.md"}],
        "plugins": [
            {"mkdocstrings": {"handlers": {"python": {"paths": ["."], "options": options}}}}
        ],
    }
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(small))
    source = 'def double(x: int) -> int:\n    """Twice.\n\n    Args:\n        {}: a number.\n\n'
    source += '    Returns:\n        2x.\n    """\n    return 2 * x\n'
    (tmp_path / "tiny.py").write_text(source.format("y"))
    result = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert "'y' does not appear in the function signature" in result.stdout + result.stderr
    (tmp_path / "tiny.py").write_text(source.format("x"))
    result = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_chromium
def test_site_renders_in_chromium(site, tmp_path):
    def search(page):
        page.locator("input.md-search__input").click()
        page.keyboard.type("load_samples")
        page.wait_for_selector(".md-search-result__item", state="visible")

    with serve(site) as url:
        index = render(url + "index.html", tmp_path / "index.png", wait_for=".md-content")
        api = render(
            url + "api/bdl/", tmp_path / "api-bdl.png", wait_for=".md-content", full_page=False
        )
        found = render(url + "index.html", tmp_path / "search.png", interact=search)
    assert "bdl documentation" in index
    assert "A complete run" in index
    assert "bdl.sample" in api
    assert re.search(r"sample\(\s*target: Target,\s*kernel: Kernel,", api)
    assert re.search(r"matching documents?", found)
    assert "bdl.load_samples" in found
    for name in ("index.png", "api-bdl.png", "search.png"):
        png = (tmp_path / name).read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 10_000, name


@needs_chromium
def test_maths_renders_in_chromium(site, tmp_path):
    """On every page with maths, KaTeX has typeset each formula: one ``.katex`` per arithmatex
    element, no ``.katex-error`` (a formula KaTeX cannot read), and the text outside code and
    typeset maths shows no ``\\(``, ``\\[`` or ``$``."""
    found: dict[str, dict] = {}
    script = """() => {
        const prose = document.querySelector(".md-content").cloneNode(true);
        prose.querySelectorAll("code, pre, .katex").forEach(e => e.remove());
        return {
            formulas: document.querySelectorAll(".arithmatex").length,
            typeset: document.querySelectorAll(".arithmatex .katex").length,
            errors: [...document.querySelectorAll(".katex-error")].map(e => e.title),
            raw: prose.textContent.match(/.{0,30}(\\\\\\(|\\\\\\[|\\$).{0,30}/g) || [],
        };
    }"""

    def typeset(name: str):
        def interact(page) -> None:
            page.wait_for_selector(".arithmatex .katex", state="attached")
            found[name] = page.evaluate(script)

        return interact

    pages = _pages_with_maths(site)
    with serve(site) as url:
        for page in pages:
            name = page.parent.relative_to(site).as_posix()
            shot = tmp_path / f"{name.replace('/', '-') or 'index'}.png"
            text = render(url + f"{name}/", shot, interact=typeset(name), full_page=False)
            assert "\\(" not in text and "\\[" not in text, name
    assert len(found) == len(pages) >= 20
    for name, result in found.items():
        assert result["formulas"] > 0 and result["typeset"] == result["formulas"], (name, result)
        assert not result["errors"], (name, result["errors"])
        assert not result["raw"], (name, result["raw"])
    png = (tmp_path / "kernels-sghmc.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000

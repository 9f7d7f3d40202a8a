"""Headless Chromium for the tests: open a page, return its text, write a screenshot of it.

``render(url_or_path, screenshot_path)`` is the whole interface most tests need::

    from browser import needs_chromium, render

    @needs_chromium
    def test_page(tmp_path):
        text = render(tmp_path / "report.html", tmp_path / "report.png")
        assert "bdl" in text

The browser is Chromium driven by Playwright (the ``docs`` extra). Playwright's own browser
download is not used: it needs a host that is not a package registry. The Chromium is the
system's — Debian's ``chromium-headless-shell`` (or ``chromium``), which scripts/test.sh installs
with apt-get where it can — or the executable named by ``BDL_CHROMIUM``. Where neither Playwright
nor a Chromium is there, ``needs_chromium`` skips the test and says which is missing.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import http.server
import importlib.util
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

#: executables tried in turn when BDL_CHROMIUM is not set
CANDIDATES = (
    "chromium-headless-shell",
    "chromium",
    "chromium-browser",
    "google-chrome-stable",
    "google-chrome",
)


def chromium() -> str | None:
    """The Chromium executable to drive: ``$BDL_CHROMIUM``, else the first of CANDIDATES found."""
    named = os.environ.get("BDL_CHROMIUM")
    if named:
        return shutil.which(named) or (named if Path(named).is_file() else None)
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def unavailable() -> str | None:
    """Why no browser test can run here, or ``None`` when one can."""
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed (pip install -e '.[docs]')"
    if chromium() is None:
        return (
            "no Chromium executable (apt-get install chromium-headless-shell, or set "
            "BDL_CHROMIUM to one)"
        )
    return None


#: marks a test that needs the browser: skipped, with the reason, where there is none
needs_chromium = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))


@contextlib.contextmanager
def serve(directory: str | os.PathLike) -> Iterator[str]:
    """Serve ``directory`` over HTTP on the loopback interface; yields its base URL.

    Pages whose scripts fetch files (a site's search index, say) need this: a browser refuses
    those requests for a ``file://`` page."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # the test's output stays clean
        pass


def render(
    url_or_path: str | os.PathLike,
    screenshot_path: str | os.PathLike,
    *,
    wait_for: str | None = None,
    interact: Callable[[Any], None] | None = None,
    width: int = 1280,
    height: int = 900,
    full_page: bool = True,
    timeout_s: float = 30.0,
) -> str:
    """Open a page in headless Chromium and return the text it shows.

    Args:
        url_or_path: an ``http://``, ``https://`` or ``file://`` URL, or the path of a local file.
        screenshot_path: where the PNG screenshot is written (its folder is made if needed).
        wait_for: a CSS selector that must be visible before the page counts as rendered.
        interact: called with the Playwright ``Page`` once it has loaded (to type into a field,
            click, wait for a result), before the screenshot and the text are taken.
        width: the viewport's width in pixels.
        height: the viewport's height in pixels.
        full_page: screenshot the whole page (``False``: the viewport only, for a long page).
        timeout_s: how long loading, ``wait_for`` and each action of ``interact`` may take.

    Returns:
        The page's ``document.body.innerText`` (what a reader sees, without markup).

    Raises:
        AssertionError: a script of the page threw an uncaught exception.
        RuntimeError: no browser here (the reason of :func:`unavailable`).
    """
    reason = unavailable()
    if reason is not None:
        raise RuntimeError(reason)
    target = str(url_or_path)
    if "://" not in target:
        target = Path(target).resolve().as_uri()
    shot = Path(screenshot_path)
    shot.parent.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    context = _browser().new_context(viewport={"width": width, "height": height})
    try:
        page = context.new_page()
        page.set_default_timeout(timeout_s * 1000)
        page.on("pageerror", lambda err: errors.append(str(err)))
        page.goto(target, wait_until="load")
        if wait_for is not None:
            page.wait_for_selector(wait_for, state="visible")
        if interact is not None:
            interact(page)
        page.screenshot(path=str(shot), full_page=full_page)
        text = page.evaluate("document.body.innerText")
    finally:
        context.close()  # each page starts with no cookies, storage or cache of another's
    assert not errors, f"{target}: uncaught script errors: {errors}"
    return text


@functools.cache
def _browser() -> Any:
    """One Chromium per test process, started on first use and closed when the process ends."""
    from playwright.sync_api import sync_playwright

    driver = sync_playwright().start()
    browser = driver.chromium.launch(executable_path=chromium(), headless=True)

    def close() -> None:
        browser.close()
        driver.stop()

    atexit.register(close)
    return browser

"""The README's screenshot of a run report: runs the README's example as written (the digits MLP,
SGHMC adapted in burn-in; it prints its result and writes run.html) in bdl-output/readme/, and
photographs the report in headless Chromium.

usage: python scripts/report_screenshot.py [--dir bdl-output/readme] [--out docs/img/report.png]
                                           [--height 2300] [--reuse]

Needs a Chromium (Debian: `apt-get install chromium-headless-shell` or `chromium`); it is
driven through its command line (`--screenshot`), and the PNG is scaled to 900 pixels wide with
Pillow. About 3–6 minutes on 2 CPU cores, most of it the run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Chromium executables tried, in order
CHROMIUM = ("chromium", "chromium-headless-shell", "chromium-browser", "google-chrome")
#: width of the page as laid out, and of the PNG kept (pixels)
WINDOW_WIDTH, IMAGE_WIDTH = 1200, 900


def run_readme_example(directory: Path) -> Path:
    """Run the README's example (its one ```python block, as written) in ``directory``, where it
    writes ``run.html``; what it prints is printed here too (the README quotes it)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python[^\n]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    if len(blocks) != 1:
        sys.exit(f"report_screenshot: README.md has {len(blocks)} python blocks; expected one.")
    directory.mkdir(parents=True, exist_ok=True)
    here = Path.cwd()
    os.chdir(directory)
    try:
        exec(compile(blocks[0], "README.md", "exec"), {"__name__": "__readme__"})
    finally:
        os.chdir(here)
    return directory / "run.html"


def screenshot(html: Path, out: Path, height: int) -> None:
    """Photograph ``html`` in headless Chromium, ``height`` pixels of it, scaled to
    :data:`IMAGE_WIDTH`."""
    from PIL import Image

    chromium = next((shutil.which(n) for n in CHROMIUM if shutil.which(n)), None)
    if chromium is None:
        sys.exit(
            "report_screenshot: no Chromium found (tried " + ", ".join(CHROMIUM) + "); install "
            "one, e.g. apt-get install chromium-headless-shell."
        )
    with tempfile.TemporaryDirectory() as home:
        raw = Path(home) / "raw.png"
        subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--window-size={WINDOW_WIDTH},{height}", f"--screenshot={raw}",
             html.resolve().as_uri()],
            check=True, capture_output=True, timeout=300, env={**os.environ, "HOME": home},
        )  # fmt: skip
        image = Image.open(raw).convert("RGB")
        scaled = image.resize((IMAGE_WIDTH, round(image.height * IMAGE_WIDTH / image.width)))
        out.parent.mkdir(parents=True, exist_ok=True)
        scaled.save(out, optimize=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=Path("bdl-output/readme"))
    parser.add_argument("--out", type=Path, default=Path("docs/img/report.png"))
    parser.add_argument("--height", type=int, default=2300, help="page height shown (pixels)")
    parser.add_argument(
        "--reuse", action="store_true", help="photograph DIR/run.html as it is, do not run"
    )
    args = parser.parse_args()
    html = args.dir / "run.html" if args.reuse else run_readme_example(args.dir)
    screenshot(html, args.out, args.height)
    print(f"report: {html}\nscreenshot: {args.out}")


if __name__ == "__main__":
    main()

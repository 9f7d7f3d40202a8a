#!/usr/bin/env bash
# Build the environment from nothing (if needed) and run the test suite (slow tests excluded).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m slow` for the long statistical runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the documentation site's strict build and its browser test (tests/test_docs_site.py)
.venv/bin/python -m pip install --quiet -e '.[docs]'
bash scripts/install_chromium.sh
if [ "$#" -eq 0 ]; then set -- -m "not slow"; fi
.venv/bin/ruff check .
exec .venv/bin/python -m pytest -n 2 "$@"

#!/usr/bin/env bash
# Build the environment from nothing (if needed) and run the main job, `bdl demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/bdl demo "$@"

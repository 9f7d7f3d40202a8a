#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv with bdl and its dev tools.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi
# an environment made before the distribution was named bdl-sgmcmc holds an editable install
# named bdl, which would stay beside the new one: remove it
if .venv/bin/python -m pip show bdl >/dev/null 2>&1; then
  .venv/bin/python -m pip uninstall --quiet --yes bdl
fi
# ode: the optional ODE solver, so that the tests of the posteriordb suite's ODE posteriors run
.venv/bin/python -m pip install --quiet -e '.[dev,ode]'

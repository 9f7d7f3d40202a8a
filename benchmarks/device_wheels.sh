#!/usr/bin/env bash
# Wheels for benchmarks/device_run.sh: the device machine reaches no package registry, so the
# benchmarks' pure dependencies that its python may lack (BlackJAX for the peers table; ArviZ
# and what it imports for time_to_fidelity.py) travel with the checkout as wheels.
#
#   bash benchmarks/device_wheels.sh [DIR] [PYTHON_VERSION]
#
# DIR (default .whl, in the repository root so that the device tool copies it) then goes to
# device_run.sh as WHEELS=DIR. PYTHON_VERSION is the device's (default 3.12); the versions are
# this environment's, so the benchmarks run the same libraries on both machines.
set -euo pipefail
dir=${1:-.whl}
pyver=${2:-3.12}
py=${PYTHON:-.venv/bin/python}
version() { $py -c "import importlib.metadata as m; print(m.version('$1'))"; }
specs=()
for dist in platformdirs pandas h5py h5netcdf xarray xarray-einstats arviz fastprogress blackjax; do
    if v=$(version "$dist" 2>/dev/null); then specs+=("$dist==$v"); else specs+=("$dist"); fi
done
mkdir -p "$dir"
$py -m pip download --quiet --no-deps --only-binary=:all: --python-version "$pyver" \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any \
    -d "$dir" "${specs[@]}"
ls "$dir"

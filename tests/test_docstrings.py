"""The docstrings of the public surface: their examples run, and their sections do not regress.

* The main entry points (``ENTRY_POINTS``) each have an ``Examples:`` section whose ``>>>``
  lines run as doctests, in a fresh process (its own cache folder; XLA's compilation cache on,
  so that the examples' identical tiny model compiles once).
* ``DOCUMENTED`` lists the public functions and classes whose docstrings are complete: an
  ``Args:`` section naming every parameter where they take any, ``Returns:`` where a function
  returns a value (``Yields:`` for a generator). The checker walks them with ``inspect``;
  a new public name of the API reference must either be complete or be counted in
  ``INCOMPLETE_BUDGET`` (the remainder still to document), which may only go down.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ENTRY_POINTS = (
    "bdl.Model",
    "bdl.compile",
    "bdl.kernels.get",
    "bdl.sample",
    "bdl.Samples.save",
    "bdl.load_samples",
    "bdl.reference",
    "bdl.validate",
)

RUNNER = r"""
import doctest, importlib, sys, time, warnings
import bdl
bdl.enable_compilation_cache(sys.argv[1], min_compile_seconds=0)
warnings.simplefilter("ignore")
failed = 0
for name in sys.argv[2:]:
    parts = name.split(".")
    obj = importlib.import_module(parts[0])
    for part in parts[1:]:
        obj = getattr(obj, part)
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, globs={})
    assert tests and tests[0].examples, f"{name}: no examples"
    start = time.perf_counter()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    failed += result.failed
    seconds = time.perf_counter() - start
    print(f"{name}: {result.attempted} examples, {result.failed} failed ({seconds:.1f} s)")
sys.exit(1 if failed else 0)
"""


def resolve(name: str):
    import importlib

    parts = name.split(".")
    obj = importlib.import_module(parts[0])
    for part in parts[1:]:
        obj = getattr(obj, part)
    return obj


def test_entry_points_have_examples():
    for name in ENTRY_POINTS:
        doc = inspect.getdoc(resolve(name)) or ""
        assert re.search(r"^Examples:\n(.*\n)*\s+>>> ", doc, re.M), f"{name}: no Examples: section"


def test_entry_point_examples_run(tmp_path):
    env = {**os.environ, "BDL_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-c", RUNNER, str(tmp_path / "xla"), *ENTRY_POINTS]
    result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    for name in ENTRY_POINTS:
        line = rf"^{re.escape(name)}: [1-9]\d* examples, 0 failed \("
        assert re.search(line, report, re.M), report

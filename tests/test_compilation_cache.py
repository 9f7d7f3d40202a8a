"""The persistent XLA compilation cache: written where asked, enabled by the console script."""

import os
import subprocess
import sys

import pytest

import bdl
from bdl.cli import main as cli_main


def test_enable_compilation_cache_writes_compiled_programs(tmp_path):
    code = (
        "import jax, bdl\n"
        "path = bdl.enable_compilation_cache(min_compile_seconds=0)\n"
        "jax.block_until_ready(jax.jit(lambda x: x * 2 + 1)(1.0))\n"
        "print(path)\n"
    )
    env = {**os.environ, "BDL_CACHE_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    cache = tmp_path / "xla"
    assert out.stdout.strip() == str(cache)
    assert any(cache.iterdir()), "no compiled program was written to the cache"


def test_enable_compilation_cache_rejects_a_negative_threshold(tmp_path):
    with pytest.raises(ValueError, match="min_compile_seconds"):
        bdl.enable_compilation_cache(tmp_path, min_compile_seconds=-1)


@pytest.mark.parametrize(("setting", "enabled"), [(None, True), ("0", False)])
def test_console_script_enables_the_cache_unless_told_not_to(monkeypatch, setting, enabled):
    calls = []
    monkeypatch.setattr("bdl.compilation_cache.enable_compilation_cache", lambda: calls.append(1))
    monkeypatch.setattr(cli_main, "main", lambda: 0)
    if setting is None:
        monkeypatch.delenv("BDL_XLA_CACHE", raising=False)
    else:
        monkeypatch.setenv("BDL_XLA_CACHE", setting)
    assert cli_main.console_main() == 0
    assert bool(calls) is enabled

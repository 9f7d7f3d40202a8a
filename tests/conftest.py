"""Fixtures shared by every test module."""

import jax
import pytest

from bdl.sampling import run as run_module


@pytest.fixture(autouse=True)
def _fresh_chunk_sizes(monkeypatch):
    """Each test starts with no remembered chunk sizes: a size carried over from an earlier
    test's run of the same target would override the test's own ``_ChunkSizer.FIRST``."""
    monkeypatch.setattr(run_module._ChunkSizer, "_reached", {})


@pytest.fixture(autouse=True, scope="module")
def _drop_compiled_programs():
    """Each test module's compiled programs go when the module ends. A worker runs hundreds
    of modules, and every program XLA:CPU keeps is machine code in memory mappings of its own;
    a worker holding ``vm.max_map_count`` (65,530) of them crashes in its next compilation."""
    yield
    jax.clear_caches()

"""Fixtures shared by every test module."""

import pytest

from bdl.sampling import run as run_module


@pytest.fixture(autouse=True)
def _fresh_chunk_sizes(monkeypatch):
    """Each test starts with no remembered chunk sizes: a size carried over from an earlier
    test's run of the same target would override the test's own ``_ChunkSizer.FIRST``."""
    monkeypatch.setattr(run_module._ChunkSizer, "_reached", {})

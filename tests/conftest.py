"""Fixtures shared by every test module."""

import jax
import pytest


@pytest.fixture(autouse=True, scope="module")
def _drop_compiled_programs():
    """Each test module's compiled programs go when the module ends. A worker runs hundreds
    of modules, and every program XLA:CPU keeps is machine code in memory mappings of its own;
    a worker holding ``vm.max_map_count`` (65,530) of them crashes in its next compilation."""
    yield
    jax.clear_caches()

"""Random draws for initialisation, in the Threefry form that compiles fastest."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax


@contextlib.contextmanager
def initialisation_draws() -> Iterator[None]:
    """Trace the draws inside with Threefry in its original (non-partitionable) form.

    JAX's default partitionable Threefry generates each array's bits from a counter over the
    whole shape; XLA on the CPU compiles that form about twice as slowly, and a network's
    initialiser draws one array per weight, so a cold ``bdl.compile`` and the first
    ``bdl.sample`` spent most of their time compiling the start. Starts are drawn once per
    run, never sharded across their own elements, so the original form loses nothing there.
    The values differ from the partitionable form's for the same key; both are deterministic
    and independent of how chains are laid out on devices. Sampling itself (noise, minibatch
    order) keeps the caller's setting.
    """
    with jax.threefry_partitionable(False):
        yield

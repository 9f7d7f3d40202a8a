"""``run_chain``'s loops: a loop of traced bounds run in blocks is ``lax.fori_loop``."""

import jax
import jax.numpy as jnp
import pytest

from bdl.sampling.run.chain import fori_in_blocks


@pytest.mark.parametrize("block", [1, 3, 4])
@pytest.mark.parametrize("bounds", [(0, 0), (0, 1), (2, 5), (0, 12), (3, 17)])
def test_loop_in_blocks_runs_every_iteration_in_order(block, bounds):
    """``fori_in_blocks`` with traced bounds is ``lax.fori_loop``: every index once, in order."""

    def body(i, c):
        return c * 3 + i + 1  # order-sensitive

    lower, upper = bounds
    run = jax.jit(lambda lo, hi: fori_in_blocks(lo, hi, body, jnp.int32(0), block=block))
    want = jax.lax.fori_loop(lower, upper, body, jnp.int32(0))
    assert int(run(jnp.int32(lower), jnp.int32(upper))) == int(want)

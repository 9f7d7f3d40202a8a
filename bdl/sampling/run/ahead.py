"""A run's first chunk program, compiled while its start program compiles and runs.

A run's first call of the loop waits for two XLA compilations one after the other: the start
program's (:mod:`bdl.sampling.run.start`), then that of the chunk program
(:mod:`bdl.sampling.run.program`), which holds the step two or three times and is the larger.
Neither needs the other's values, only shapes that are known before either runs, and XLA
compiles with Python's lock released. So :func:`compile_ahead` lowers and compiles the chunk
program of the loop's first call in a thread, from stand-in arguments of the start's output
shapes (zeros on the host; nothing runs), while the main thread compiles and runs the start;
the loop's first call then finds the program in JAX's cache. The program is the one that call
would compile, so the draws are the same; a stand-in that does not match (a shape or dtype the
start does not produce) costs a compilation and changes nothing else. The same thread then
compiles programs that the run calls later on its kept draws (a network's predictions, which
the convergence check reads), while the first calls run.

Only a run of one process on one device, from its start (not resumed), compiles ahead: the
programs of a mesh are placed by their arguments' shardings, which stand-ins do not have.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from bdl.sampling.kept.buffers import Records
from bdl.sampling.run.program import Lengths, Phase, Programs, lower_chunk


def compile_ahead(
    programs: Programs,
    chains: Any,
    buffers: Records,
    warming: bool,
    then: Sequence[Callable[[], Any]] = (),
) -> threading.Event | None:
    """Compile, in a thread, the program of the loop's first call: warm-up's when ``warming``,
    else the sampling program writing into ``buffers`` (the first call's own; lowering reads
    only their shapes). ``chains``: the shapes of the start's chains (``jax.eval_shape``), and
    ``programs`` built with stand-in chain keys. ``then``: functions returning other programs
    of the run lowered, compiled after it in the same thread (while the first calls run).
    Returns an event set once the first program is compiled (wait for it before the first
    call; the compilations after it go on), or ``None`` where no stand-in can be made (a key
    of another implementation)."""
    standing = stand_ins(chains, programs.run_key)
    if standing is None:
        return None
    phase = Phase.WARMUP if warming else Phase.SAMPLE
    lengths = Lengths.of(0, 1, 1)  # traced: any values give the same program
    args = (
        programs.target, programs.kernel, programs.warmup, standing, programs.chain_keys,
        lengths, programs.shape(phase), programs.layout, programs.run_key,
    )  # fmt: skip

    first = threading.Event()

    def compile_programs() -> None:
        lowerings = [lambda: lower_chunk(*args, None, None if warming else buffers), *then]
        for lowering in lowerings:
            # a program that fails here is compiled again by its own call, which raises there
            with contextlib.suppress(Exception):
                lowering().compile()
            first.set()

    thread = threading.Thread(target=compile_programs, name="bdl-compile-ahead", daemon=True)
    thread.start()
    return first


def stand_ins(shapes: Any, key: jax.Array) -> Any:
    """Host zeros shaped like ``shapes`` (``jax.ShapeDtypeStruct`` leaves); a key leaf is a key
    of ``key``'s implementation made from zeros. ``None`` when a key leaf has another dtype."""
    data = jax.random.key_data(key)  # of a concrete key: nothing is traced or compiled
    impl = jax.random.key_impl(key)
    leaves, treedef = jax.tree.flatten(shapes)
    made = []
    for leaf in leaves:
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            if leaf.dtype != key.dtype:
                return None
            zeros = np.zeros((*leaf.shape, *data.shape), data.dtype)
            made.append(jax.random.wrap_key_data(zeros, impl=impl))
        else:
            made.append(np.zeros(leaf.shape, leaf.dtype))
    return jax.tree.unflatten(treedef, made)

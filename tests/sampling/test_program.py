"""The compiled chunk: the accelerator's blocked loop and the CPU's give the same draws; a call
that compiled is not taken for the steps' cost; a fixed-step run compiles two programs and an
adapted one three."""

import jax
import numpy as np
import pytest
from loop_helpers import Counted

import bdl
from bdl.sampling import LoopOptions, TimedChunks
from bdl.sampling.run.program import compiled_chunk


@pytest.mark.parametrize(("thin", "adapted"), [(1, False), (3, False), (40, False), (3, True)])
def test_blocked_loop_gives_the_unblocked_draws(target, thin, adapted):
    """The accelerator loop (blocks of static length, static ``thin``), run here on the CPU,
    gives the draws of the CPU loop, burn-in and warm-up included."""
    kernel = bdl.kernels.get("sghmc") if adapted else bdl.kernels.get("sghmc", step_size=1e-2)
    burn_in = 200 if adapted else 13
    args = dict(num_steps=burn_in + 9 * thin, burn_in=burn_in, thin=thin, num_chains=2, seed=3)
    plain = bdl.sample(target, kernel, progress=False, **args)
    blocked = bdl.sample(target, kernel, progress=False, loop=LoopOptions(block=4), **args)
    np.testing.assert_array_equal(plain.positions["net"]["w"], blocked.positions["net"]["w"])
    np.testing.assert_array_equal(plain.info["energy"], blocked.info["energy"])
    np.testing.assert_array_equal(plain.steps, blocked.steps)


class CountedTimed(TimedChunks):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0

    def budget(self) -> int:
        self.calls += 1
        return super().budget()


def test_a_call_that_compiles_does_not_shrink_later_calls(target):
    """A run whose one call compiled its program (slow) leaves the next run with the same policy
    in one call: the compilation's time is not taken for the steps' cost."""
    policy = CountedTimed(target_seconds=0.05, first=256)
    loop = LoopOptions(chunks=policy, block=4)  # a static-length program of its own per thin
    kernel = bdl.kernels.get("sghmc", step_size=1e-2, friction=5.0)
    args = dict(num_steps=200, thin=200, num_chains=2, seed=5, progress=False, loop=loop)
    bdl.sample(target, kernel, **args)  # compiles: far longer than 0.05 s for 200 steps
    policy.calls = 0
    bdl.sample(target, kernel, **args)
    assert policy.calls == 1


class CompileCounter:
    """XLA backend compilations while it is installed (``jax.monitoring``), by program name."""

    def __init__(self) -> None:
        self.names: list[str] = []
        jax.monitoring.register_event_duration_secs_listener(self._listen)

    @property
    def count(self) -> int:
        return len(self.names)

    def _listen(self, event: str, duration: float, **kwargs) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            self.names.append(str(kwargs.get("fun_name", "?")))


#: the programs of the checks after a run (the full-data energies and gradients the run-away and
#: bias checks share; a network's convergence check's)
CHECKS = ("full_data_at", "function_values")


def _fresh_target():
    """A target no earlier test compiled for (its network is a new function)."""
    import jax.numpy as jnp

    rng = np.random.default_rng(3)
    x = rng.normal(size=(50, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -1.0, 0.5]) + 0.3 * rng.normal(size=50)).astype(np.float32)
    model = bdl.Model(
        network=lambda p, x: x @ p["w"] + 0.0, params={"w": jnp.zeros(3)},
        likelihood=bdl.Gaussian(0.3),
    )  # fmt: skip
    return bdl.compile(model, (x, y), batch_size=10)


@pytest.mark.parametrize("block", [1, 4], ids=["cpu-loop", "blocked-loop"])
@pytest.mark.parametrize(("name", "programs"), [("fixed", 2), ("adapted", 3)])
def test_a_run_compiles_two_programs_or_three_when_adapted(name, programs, block):
    """The start and the chunk for a kernel with a step size; the start (with warm-up's first
    values), the warm-up chunk (adapting at its points) and the sampling chunk when adapted.
    Policies of 37 steps cut the run into many calls of every kind: burn-in, parts of a draw
    (thin 40 > 37) and, with thin 8, whole draws, which the accelerator's blocked loop
    (``block=4``, run here on the CPU) runs in loops of static length inside the same sampling
    program. The checks after the run compile one program of their own (the full-data energies
    and gradients that the run-away and bias checks share; this model is checked in parameter
    space, so no network predictions), once per target."""
    target = _fresh_target()
    kernel = bdl.kernels.get("sghmc", **({"step_size": 1e-2} if name == "fixed" else {}))
    counter = CompileCounter()
    loop = LoopOptions(chunks=Counted(37), block=block)
    for thin in (8, 40):
        bdl.sample(
            target, kernel, num_steps=400 + 20 * thin, burn_in=400, thin=thin, num_chains=2,
            progress=False, loop=loop,
        )  # fmt: skip
        if block == 1:  # the CPU's program takes any thin; the accelerator's is per thin
            break
    run = [name for name in counter.names if not any(check in name for check in CHECKS)]
    runs = 1 if block == 1 else 2  # the second (thin 40) recompiles only the sampling chunk
    assert len(run) == programs + runs - 1, counter.names
    assert counter.count - len(run) == 1, counter.names


def test_sampling_many_targets_holds_a_bounded_number_of_programs(monkeypatch):
    """A plain module-level ``eqx.filter_jit`` would hold one sampling program per target."""
    import gc

    from bdl.kernels.sghmc import sghmc
    from bdl.model_files import load_spec

    monkeypatch.setattr(compiled_chunk, "max_released", 2)
    compiled_chunk.clear_cache()
    for seed in range(5):
        target = load_spec("two_mode").compile()
        bdl.sample(target, sghmc(0.1, 1.0), num_steps=20, num_chains=2, seed=seed)
        del target
        gc.collect()
    assert 0 < compiled_chunk.cache_size() <= 3

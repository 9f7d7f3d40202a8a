"""Checkpoint and resume: a run interrupted at any point (Ctrl-C, SIGTERM, a killed process) and
resumed, or a finished run extended, gives bitwise the draws of the uninterrupted run."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import jax
import numpy as np
import pytest
from loop_helpers import StopAfter

import bdl
from bdl.sampling import FixedChunks, LoopOptions
from bdl.sampling.checkpoints import lock as checkpoint_lock
from bdl.sampling.checkpoints import state as checkpoint_io

MODEL = textwrap.dedent(
    """
    import jax.numpy as jnp
    import numpy as np

    import bdl


    def build():
        rng = np.random.default_rng(0)
        x = rng.normal(size=(60, 2)).astype(np.float32)
        y = (x @ np.array([1.0, -1.0]) + 0.3 * rng.normal(size=60)).astype(np.float32)
        model = bdl.Model(
            network=lambda p, x: x @ p["w"],
            params={"w": jnp.zeros(2)},
            likelihood=bdl.Gaussian(0.3),
        )
        return bdl.compile(model, (x, y), batch_size=20)
    """
)
namespace: dict = {}
exec(MODEL, namespace)
build = namespace["build"]


@pytest.fixture(scope="module")
def target():
    return build()


def assert_same(a: bdl.Samples, b: bdl.Samples) -> None:
    for x, y in zip(jax.tree.leaves(a.positions), jax.tree.leaves(b.positions), strict=True):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(jax.tree.leaves(a.extra), jax.tree.leaves(b.extra), strict=True):
        np.testing.assert_array_equal(x, y)
    for k in a.info:
        np.testing.assert_array_equal(a.info[k], b.info[k])
    np.testing.assert_array_equal(a.steps, b.steps)
    np.testing.assert_array_equal(a.diverged, b.diverged)
    assert a.steps_done == b.steps_done
    for x, y in zip(
        jax.tree.leaves(a.adapted or {}), jax.tree.leaves(b.adapted or {}), strict=True
    ):
        np.testing.assert_array_equal(x, y)


RUN = dict(num_steps=1_200, burn_in=400, thin=8, num_chains=3, seed=3, progress=False)
KERNELS = {
    "adapted sghmc": lambda: bdl.kernels.get("sghmc"),
    "psgld (preconditioner statistics)": lambda: bdl.kernels.get("psgld", step_size=1e-5),
    "entropy (a guide, extras)": lambda: bdl.kernels.get("entropy", base="sgld", step_size=1e-3),
    "sgnht (a thermostat)": lambda: bdl.kernels.get("sgnht", step_size=1e-2),
}


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("where", ["burn-in", "sampling"])
def test_interrupted_and_resumed_run_is_bitwise_the_uninterrupted_one(
    target, tmp_path, name, where
):
    whole = bdl.sample(target, KERNELS[name](), **RUN)
    stop_at = 250 if where == "burn-in" else 700
    # calls of 37 steps: they cut draws (thin 8) and warm-up segments anywhere
    loop = LoopOptions(chunks=StopAfter(37, stop=stop_at))
    with pytest.warns(UserWarning, match="interrupted"):
        part = bdl.sample(target, KERNELS[name](), checkpoint=tmp_path, loop=loop, **RUN)
    assert part.interrupted and part.steps_done < RUN["num_steps"]
    resumed = bdl.sample(target, KERNELS[name](), resume=tmp_path, progress=False)
    assert not resumed.interrupted
    assert_same(whole, resumed)


def test_a_finished_run_extends(target, tmp_path):
    """num_steps larger than before goes on from the last step; the schedule of draws and every
    random number are those of the longer run."""
    kernel = bdl.kernels.get("sghmc")
    longer = bdl.sample(target, kernel, **{**RUN, "num_steps": 2_000})
    bdl.sample(target, kernel, checkpoint=tmp_path, **RUN)
    extended = bdl.sample(target, kernel, resume=tmp_path, num_steps=2_000, progress=False)
    assert_same(longer, extended)
    again = bdl.sample(target, kernel, resume=tmp_path, progress=False)  # nothing left to run
    assert_same(longer, again)


SCRIPT = MODEL + textwrap.dedent(
    """
    import sys

    target = build()
    bdl.sample(
        target, bdl.kernels.get("sghmc"), num_steps=int(sys.argv[3]), burn_in=int(sys.argv[2]),
        thin=8, num_chains=3, seed=3, checkpoint=sys.argv[1], checkpoint_every=0.0,
        progress=False,
    )
    """
)
#: burn-in and total steps of the killed run: killed in sampling (after three parts of draws)
#: or in warm-up (once a checkpoint past step 1,000 is written, far from the burn-in's end)
PHASES = {"sampling": (400, 400_000), "warm-up": (40_000, 400_000)}


@pytest.mark.parametrize("phase", sorted(PHASES))
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_process_resumes(tmp_path, sig, phase):
    """A process killed mid-run (SIGKILL: no chance to clean up) or stopped (SIGTERM: writes its
    checkpoint and exits), in warm-up or while sampling, resumes from its last checkpoint to the
    uninterrupted run's draws."""
    burn_in, num_steps = PHASES[phase]
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    directory = tmp_path / "ck"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    argv = [sys.executable, str(script), str(directory), str(burn_in), str(num_steps)]
    proc = subprocess.Popen(argv, env=env)

    def ready() -> bool:
        if phase == "sampling":
            return (directory / "draws-000003.npz").exists()
        return checkpoint_io.exists(directory) and checkpoint_io.read(directory).step >= 1_000

    try:
        deadline = time.time() + 120
        while not ready():
            assert proc.poll() is None, "the run ended before it was killed"
            assert time.time() < deadline, "no checkpoint within 120 s"
            time.sleep(0.05)
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == (-signal.SIGKILL if sig == signal.SIGKILL else 0)
    steps = checkpoint_io.read(directory).step
    assert (steps < burn_in) == (phase == "warm-up")
    num_steps = max(steps, burn_in) + 800
    target = build()
    resumed = bdl.sample(
        target, bdl.kernels.get("sghmc"), resume=directory, num_steps=num_steps, progress=False
    )
    run = {**RUN, "burn_in": burn_in, "num_steps": num_steps}
    whole = bdl.sample(target, bdl.kernels.get("sghmc"), **run)
    assert_same(whole, resumed)


# ------------------------------------------------------------------ one run at a time
#: a process that holds a directory's lock until it is killed
HOLDER = (
    "import sys, time\n"
    "from bdl.sampling.checkpoints import lock as checkpoint_lock\n"
    "checkpoint_lock.acquire(sys.argv[1])\n"
    "print('held', flush=True)\n"
    "time.sleep(600)\n"
)


def hold_in_another_process(directory) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory)], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )  # fmt: skip
    assert proc.stdout.readline().strip() == "held"
    return proc


def is_free(directory) -> bool:
    """Whether another thread can lock ``directory`` now: fails for a lock still held by this
    process (re-entrant only for its own thread) as for one held by another process."""
    found = []

    def probe() -> None:
        try:
            checkpoint_lock.check_free(directory)
            found.append(True)
        except checkpoint_lock.CheckpointInUseError:
            found.append(False)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return found[0]


def test_a_directory_another_process_runs_in_is_refused(target, tmp_path):
    """Two runs in one checkpoint directory at once: the second is refused, naming the holder;
    once the holder is killed (SIGKILL: no clean-up), the operating system has dropped its lock."""
    directory = tmp_path / "ck"
    kernel = bdl.kernels.get("sgld", step_size=1e-3)
    bdl.sample(target, kernel, checkpoint=directory, num_steps=50, progress=False)
    proc = hold_in_another_process(directory)
    try:
        with pytest.raises(ValueError, match=rf"in use by another run \(process {proc.pid} on"):
            bdl.sample(target, kernel, resume=directory, num_steps=100, progress=False)
        with pytest.raises(ValueError, match="in use by another run"):
            bdl.sample(target, kernel, checkpoint=directory, num_steps=100, progress=False)
    finally:
        proc.kill()
        proc.wait()
    assert is_free(directory)
    assert bdl.sample(target, kernel, resume=directory, num_steps=100).steps_done == 100


class FailAfter(FixedChunks):
    """Calls of ``steps`` steps, then an error from inside the run."""

    def __init__(self, steps: int, stop: int) -> None:
        super().__init__(steps)
        self.stop, self.done = stop, 0

    def budget(self) -> int:
        if self.done >= self.stop:
            raise RuntimeError("an error inside the run")
        return self.steps

    def record(self, steps: int, seconds: float, compiled: bool = False) -> None:
        self.done += steps


def test_the_lock_is_released_after_a_run_an_error_and_ctrl_c(target, tmp_path):
    directory = tmp_path / "ck"
    kernel = bdl.kernels.get("sgld", step_size=1e-3)
    bdl.sample(target, kernel, checkpoint=directory, num_steps=50, progress=False)
    assert is_free(directory)  # after a run
    with pytest.raises(ValueError, match="seed=9 conflicts"):
        bdl.sample(target, kernel, resume=directory, seed=9)
    assert is_free(directory)  # after a refused resume
    with pytest.raises(RuntimeError, match="inside the run"):
        bdl.sample(
            target, kernel, resume=directory, num_steps=500, progress=False,
            loop=LoopOptions(chunks=FailAfter(20, stop=100)),
        )  # fmt: skip
    assert is_free(directory)  # after an error while sampling
    with pytest.warns(UserWarning, match="interrupted"):
        part = bdl.sample(
            target, kernel, resume=directory, num_steps=500, progress=False,
            loop=LoopOptions(chunks=StopAfter(20, stop=100)),
        )  # fmt: skip
    assert part.interrupted
    assert is_free(directory)  # after Ctrl-C

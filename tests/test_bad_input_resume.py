"""Bad input to checkpoint and resume: each case names what is wrong, before any compilation
where it can be known then."""

import json
import os
import shutil
import subprocess
import sys
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bdl
from bdl.cli.main import main
from bdl.sampling.checkpoints import state as checkpoint_io

RUN = dict(num_steps=120, burn_in=20, thin=4, num_chains=2, seed=1, progress=False)


def linear(p, x):
    return x @ p["w"]


def _model(size: int = 2):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, size)).astype(np.float32)
    y = (x.sum(1) + 0.3 * rng.normal(size=40)).astype(np.float32)
    model = bdl.Model(network=linear, params={"w": jnp.zeros(size)}, likelihood=bdl.Gaussian(0.3))
    return bdl.compile(model, (x, y), batch_size=20)


def _kernel(step_size: float = 1e-3):
    return bdl.kernels.get("sgld", step_size=step_size)


@pytest.fixture(scope="module")
def target():
    return _model()


@pytest.fixture(scope="module")
def finished(target, tmp_path_factory):
    directory = tmp_path_factory.mktemp("ck") / "run"
    bdl.sample(target, _kernel(), checkpoint=directory, **RUN)
    return directory


def _copy(finished, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(finished, copy)
    return copy


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _rewrite_header(path, **changes):
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    header = json.loads(bytes(arrays["__header__"]).decode())
    header.update(changes)
    arrays["__header__"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
    np.savez(path, **arrays)


def _not_bdl(path):
    np.savez(path, a=np.zeros(3))


def _garbage(path):
    path.write_bytes(b"not a zip file at all")


# (id, what to do to a copy of the finished checkpoint, sample() arguments, error, fragment)
CASES = [
    ("missing state", lambda d: (d / "state.npz").unlink(), {}, FileNotFoundError, "no checkpoint"),
    ("truncated state", lambda d: _truncate(d / "state.npz"), {}, ValueError, "truncated"),
    ("garbage state", lambda d: _garbage(d / "state.npz"), {}, ValueError, "corrupt"),
    ("state of no header", lambda d: _not_bdl(d / "state.npz"), {}, ValueError, "not a bdl"),
    (
        "newer format",
        lambda d: _rewrite_header(d / "state.npz", format=checkpoint_io.FORMAT + 1),
        {},
        ValueError,
        "Upgrade bdl",
    ),
    (
        "older format",
        lambda d: _rewrite_header(d / "state.npz", format=checkpoint_io.FORMAT - 1),
        {},
        ValueError,
        "Start the run again",
    ),
    ("missing draws", lambda d: (d / "draws-000001.npz").unlink(), {}, ValueError, "is missing"),
    ("truncated draws", lambda d: _truncate(d / "draws-000001.npz"), {}, ValueError, "truncated"),
    ("another seed", None, {"seed": 2}, ValueError, "seed=2 conflicts"),
    ("another thin", None, {"thin": 2}, ValueError, "thin=2 conflicts"),
    ("another burn-in", None, {"burn_in": 10}, ValueError, "burn_in=10 conflicts"),
    ("another chain count", None, {"num_chains": 3}, ValueError, "num_chains=3 conflicts"),
    ("fewer steps than done", None, {"num_steps": 50}, ValueError, "smaller than the 120"),
    (
        "another step size",
        None,
        {"kernel": _kernel(2e-3)},
        ValueError,
        "another kernel configuration",
    ),
    (
        "another kernel",
        None,
        {"kernel": bdl.kernels.get("sghmc", step_size=1e-3)},
        ValueError,
        "kernel 'sgld'",
    ),
    (
        "another model's shapes",
        None,
        {"target": "wide"},
        ValueError,
        "the network and the data changed",
    ),
    ("a second checkpoint directory", None, {"checkpoint": "elsewhere"}, ValueError, "leave"),
]


@pytest.mark.parametrize(
    "damage, arguments, error, fragment", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_resume(target, finished, tmp_path, damage, arguments, error, fragment):
    directory = _copy(finished, tmp_path)
    if damage is not None:
        damage(directory)
    arguments = dict(arguments)
    kernel = arguments.pop("kernel", _kernel())
    model = _model(3) if arguments.pop("target", None) == "wide" else target
    if "checkpoint" in arguments:
        arguments["checkpoint"] = tmp_path / arguments["checkpoint"]
    with pytest.raises(error, match=fragment):
        bdl.sample(model, kernel, resume=directory, progress=False, **arguments)


def test_resume_of_an_unfinished_zip_is_refused(target, finished, tmp_path):
    """A zip whose members are cut (not only a short file) is reported as corrupt."""
    directory = _copy(finished, tmp_path)
    path = directory / "state.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("a0000.npy", b"\x93NUMPY broken")
    with pytest.raises(ValueError, match=r"not a bdl checkpoint|corrupt"):
        bdl.sample(target, _kernel(), resume=directory, progress=False)


CHECKPOINT_CASES = [
    ("directory holds a run", "finished", {}, ValueError, "already holds a run"),
    ("a file, not a directory", "file", {}, ValueError, "is a file"),
    ("negative interval", "new", {"checkpoint_every": -1.0}, ValueError, ">= 0"),
    ("interval as text", "new", {"checkpoint_every": "60"}, TypeError, "seconds"),
    ("path of the wrong type", 3, {}, TypeError, "directory path"),
]


@pytest.mark.parametrize(
    "where, arguments, error, fragment",
    [c[1:] for c in CHECKPOINT_CASES],
    ids=[c[0] for c in CHECKPOINT_CASES],
)
def test_bad_checkpoint(target, finished, tmp_path, where, arguments, error, fragment):
    if where == "finished":
        directory = _copy(finished, tmp_path)
    elif where == "file":
        directory = tmp_path / "a-file"
        directory.write_text("")
    elif where == "new":
        directory = tmp_path / "new"
    else:
        directory = where
    with pytest.raises(error, match=fragment):
        bdl.sample(target, _kernel(), checkpoint=directory, **{**RUN, **arguments})


# ------------------------------------------------------------- the model a checkpoint records
class CompileCounter:
    """XLA backend compilations while it is installed (``jax.monitoring``)."""

    def __init__(self) -> None:
        self.count = 0
        jax.monitoring.register_event_duration_secs_listener(self._listen)

    def _listen(self, event: str, duration: float, **_) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            self.count += 1


def _variant(part: str):
    """``_model()`` with one part changed (``"energy"``: the network's code, not its name)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 2)).astype(np.float32)
    y = (x.sum(1) + 0.3 * rng.normal(size=40)).astype(np.float32)

    def doubled(p, x):
        return 2.0 * (x @ p["w"])

    doubled.__qualname__ = "linear"  # the original network's name

    def other_network(p, x):
        return x @ p["w"]

    declared = dict(network=linear, params={"w": jnp.zeros(2)}, likelihood=bdl.Gaussian(0.3))
    data, batch_size = (x, y), 20
    if part == "prior":
        declared["prior"] = bdl.Normal(0.01)
    elif part == "likelihood":
        declared["likelihood"] = bdl.Gaussian(0.5)
    elif part == "data":
        data = (x, y + 1.0)
    elif part == "network":
        declared["network"] = other_network
    elif part == "tempering":
        declared["temperature"] = 0.5
    elif part == "minibatches":
        batch_size = 10
    elif part == "energy":
        declared["network"] = doubled
    return bdl.compile(bdl.Model(**declared), data, batch_size=batch_size)


PARTS = ["prior", "likelihood", "data", "network", "tempering", "minibatches"]


@pytest.mark.parametrize("part", PARTS)
def test_a_changed_declaration_is_refused_by_name_before_compiling(finished, tmp_path, part):
    """What the failure mode looked like: the prior changed between checkpoint and resume, and
    the resumed run mixed two posteriors. Each part of the model is compared, and named."""
    directory = _copy(finished, tmp_path)
    changed = _variant(part)
    counter = CompileCounter()
    with pytest.raises(ValueError, match=rf"resume: the {part} changed since the checkpoint"):
        bdl.sample(changed, _kernel(), resume=directory, progress=False)
    assert counter.count == 0  # refused before anything compiled, the energy included


def test_a_changed_energy_under_the_same_declarations_is_refused(finished, tmp_path):
    """A network of the same name whose code changed: only the energy tells."""
    directory = _copy(finished, tmp_path)
    with pytest.raises(ValueError, match=r"the model.s energy changed .*\(U at fixed point 1"):
        bdl.sample(_variant("energy"), _kernel(), resume=directory, progress=False)


def test_the_same_model_rebuilt_resumes(finished, tmp_path):
    """Another compile of the same declarations and data (new objects, a new lambda) resumes."""
    directory = _copy(finished, tmp_path)
    samples = bdl.sample(_model(), _kernel(), resume=directory, num_steps=160, progress=False)
    assert samples.steps_done == 160


def test_a_checkpoint_without_a_model_record_resumes_with_a_warning(target, finished, tmp_path):
    """Checkpoints of a bdl that did not record the model: resumed, with a warning; the next
    checkpoint records it."""
    directory = _copy(finished, tmp_path)
    with np.load(directory / "state.npz") as data:
        arrays = {k: data[k] for k in data.files}
    header = json.loads(bytes(arrays["__header__"]).decode())
    del header["target"]
    arrays["__header__"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
    np.savez(directory / "state.npz", **arrays)
    with pytest.warns(UserWarning, match="did not record the model"):
        bdl.sample(target, _kernel(), resume=directory, num_steps=160, progress=False)
    assert "target" in checkpoint_io.read(directory).header


MODEL_FILE = """\
import jax.numpy as jnp
import numpy as np

import bdl


def linear(params, x):
    return x @ params["w"]


def build():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 2)).astype(np.float32)
    y = (x.sum(1) + 0.3 * rng.normal(size=40)).astype(np.float32)
    model = bdl.Model(network=linear, params={{"w": jnp.zeros(2)}},
                      likelihood=bdl.Gaussian(0.3), prior=bdl.Normal({scale}))
    return bdl.ModelSpec(model, (x, y), batch_size=20)
"""


def test_cli_resume_of_a_changed_model_file_exits_2_naming_it(tmp_path, capsys):
    model = tmp_path / "m.py"
    model.write_text(MODEL_FILE.format(scale=5.0))
    run = ["sample", str(model), "--kernel", "sgld", "--hyper", "step_size=1e-3", "--chains", "2"]
    directory = tmp_path / "ck"
    started = main([*run, "--steps", "60", "--burn-in", "20", "--checkpoint", str(directory)])
    assert started in (0, 4)  # 4: a run this short has not converged, and says so
    model.write_text(MODEL_FILE.format(scale=0.01))
    capsys.readouterr()
    assert main(["sample", "--resume", str(directory), "--steps", "120"]) == 2
    err = capsys.readouterr().err
    assert "resume: the prior changed since the checkpoint" in err
    assert "scale=5.0" in err and "scale=0.01" in err


def test_cli_resume_of_a_directory_in_use_exits_2_naming_the_holder(tmp_path, capsys):
    """A second `bdl sample --resume DIR` while another process runs in DIR."""
    model = tmp_path / "m.py"
    model.write_text(MODEL_FILE.format(scale=5.0))
    run = ["sample", str(model), "--kernel", "sgld", "--hyper", "step_size=1e-3", "--chains", "2"]
    directory = tmp_path / "ck"
    started = main([*run, "--steps", "60", "--burn-in", "20", "--checkpoint", str(directory)])
    assert started in (0, 4)  # 4: a run this short has not converged, and says so
    holder = (
        "import sys, time\nfrom bdl.sampling.checkpoints import lock as checkpoint_lock\n"
        "checkpoint_lock.acquire(sys.argv[1])\nprint('held', flush=True)\ntime.sleep(600)\n"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    argv = [sys.executable, "-c", holder, str(directory)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "held"
        capsys.readouterr()
        assert main(["sample", "--resume", str(directory), "--steps", "120"]) == 2
        assert f"in use by another run (process {proc.pid} on" in capsys.readouterr().err
    finally:
        proc.kill()
        proc.wait()
    assert main(["sample", "--resume", str(directory), "--steps", "120"]) in (0, 4)

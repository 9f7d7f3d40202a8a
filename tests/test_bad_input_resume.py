"""Bad input to checkpoint and resume: each case names what is wrong, before any compilation
where it can be known then."""

import json
import shutil
import zipfile

import jax.numpy as jnp
import numpy as np
import pytest

import bdl
from bdl.sampling import checkpoint as checkpoint_io

RUN = dict(num_steps=120, burn_in=20, thin=4, num_chains=2, seed=1, progress=False)


def _model(size: int = 2):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, size)).astype(np.float32)
    y = (x.sum(1) + 0.3 * rng.normal(size=40)).astype(np.float32)
    model = bdl.Model(
        network=lambda p, x: x @ p["w"], params={"w": jnp.zeros(size)}, likelihood=bdl.Gaussian(0.3)
    )
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
    ("another model's shapes", None, {"target": "wide"}, ValueError, "another model"),
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

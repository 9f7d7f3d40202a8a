"""Samples.save / bdl.load_samples: every array bit for bit, the pytree structure and the run's
meta survive .npz and .nc, for every network flavour, a kernel with extras, an adapted kernel and
a diverged chain; writes are atomic; ArviZ reads the .nc; `bdl sample --out` uses all of it."""

import json
import os
from collections import namedtuple

import arviz as az
import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import bdl
from bdl.sampling.kept import writing as storage
from bdl.sampling.kept.names import join_name, split_name

RNG = np.random.default_rng(0)
X = RNG.normal(size=(16, 3)).astype(np.float32)
Y = (X @ np.array([1.0, -2.0, 0.5]) + 0.1 * RNG.normal(size=16)).astype(np.float32)
SUFFIXES = [".npz", ".nc"]
Pair = namedtuple("Pair", ["mean", "scale"])


class LinenMLP(nn.Module):
    width: int = 4

    @nn.compact
    def __call__(self, x):
        return nn.Dense(1)(nn.tanh(nn.Dense(self.width)(x)))


class NNXMLP(nnx.Module):
    def __init__(self, rngs):
        self.l1 = nnx.Linear(3, 4, rngs=rngs)
        self.l2 = nnx.Linear(4, 1, rngs=rngs)

    def __call__(self, x):
        return self.l2(jnp.tanh(self.l1(x)))


def function_mlp(params, x):
    return (jnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"])[:, 0]


def _equinox():
    return eqx.nn.MLP(3, 1, width_size=4, depth=1, activation=jnp.tanh, key=jax.random.key(2))


def _compile(network, **kw):
    model = bdl.Model(network, bdl.Gaussian(0.5), name=kw.pop("name", "tiny"), **kw)
    return bdl.compile(model, (X, Y[:, None] if kw.get("params") is None else Y), batch_size=8)


NETWORKS = {
    "linen": lambda: _compile(LinenMLP(), name="linen"),
    "nnx": lambda: _compile(NNXMLP(nnx.Rngs(1)), name="nnx"),
    "equinox": lambda: _compile(_equinox(), name="equinox"),
    "function": lambda: _compile(
        function_mlp,
        name="function",
        params={"w1": jnp.full((3, 4), 0.1), "b1": jnp.zeros(4), "w2": jnp.full((4, 1), 0.1)},
    ),
}


def _run(compiled, kernel, **kw):
    settings = {"num_steps": 300, "burn_in": 150, "thin": 10, "num_chains": 2, "seed": 3}
    return bdl.sample(compiled, kernel, **{**settings, **kw})


# ------------------------------------------------------------------------- comparison
def _bits(x):
    x = np.asarray(x)
    return x.dtype, x.shape, x.tobytes()


def _same_tree(a, b, what):
    assert jax.tree.structure(a) == jax.tree.structure(b), what
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert _bits(x) == _bits(y), what


def assert_same(loaded, saved):
    """Every array bitwise equal with its dtype, the same structures and the same meta."""
    _same_tree(loaded.positions, saved.positions, "positions")
    assert list(loaded.extra) == list(saved.extra)
    for k in saved.extra:
        _same_tree(loaded.extra[k], saved.extra[k], f"extra {k}")
    assert list(loaded.info) == list(saved.info)
    _same_tree(loaded.info, saved.info, "info")
    for field in ("steps", "diverged", "divergence_step"):
        assert _bits(getattr(loaded, field)) == _bits(getattr(saved, field)), field
    assert (loaded.adapted is None) == (saved.adapted is None)
    if saved.adapted is not None:
        assert list(loaded.adapted) == list(saved.adapted)
        _same_tree(loaded.adapted, saved.adapted, "adapted")
    assert (loaded.kernel, loaded.steps_done, loaded.interrupted) == (
        saved.kernel,
        saved.steps_done,
        saved.interrupted,
    )
    assert loaded.meta == saved.meta
    assert json.loads(json.dumps(saved.meta)) == saved.meta


def _round_trip(samples, tmp_path, suffix, **kw):
    path = samples.save(tmp_path / f"draws{suffix}")
    assert path == tmp_path / f"draws{suffix}"
    assert sorted(os.listdir(tmp_path)) == [path.name]  # no temporary file left behind
    return bdl.load_samples(path, **kw)


def tiny_samples(**overrides):
    """A hand-built Samples (no sampling): nested containers and awkward keys."""
    positions = {
        "net": {"Dense_0": {"kernel": np.arange(12, dtype=np.float32).reshape(2, 3, 2)}},
        "a.b": np.ones((2, 3), np.float32),
        "a": {"b": np.zeros((2, 3), np.float32), "c_d": [np.full((2, 3), 2.0, np.float32)]},
        "e/f%2E": (np.full((2, 3, 1), 3.0, np.float32), None),
        "layers": {0: np.arange(6, dtype=np.int32).reshape(2, 3), 1: np.ones((2, 3), bool)},
    }
    info = {k: RNG.normal(size=(2, 3)).astype(np.float32) for k in ("energy", "grad_norm")}
    fields = {
        "positions": positions,
        "extra": {},
        "info": info,
        "steps": np.array([9, 19, 29]),
        "kernel": "sgld",
        "steps_done": 30,
        "meta": {"model": "hand", "settings": {"seed": 0, "init": "auto"}, "x": [1.5, None]},
    }
    return bdl.Samples(**{**fields, **overrides})


# ------------------------------------------------------------------------- networks
@pytest.fixture(scope="module", params=sorted(NETWORKS))
def flavour_run(request):
    compiled = NETWORKS[request.param]()
    return request.param, compiled, _run(compiled, bdl.kernels.sgld(1e-3))


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_round_trip_every_network_flavour(flavour_run, suffix, tmp_path):
    flavour, compiled, samples = flavour_run
    if flavour == "equinox":
        # an Equinox module's structure needs its class: restored from like=, else as dicts
        loaded = _round_trip(samples, tmp_path, suffix, like=compiled.initial_position)
        plain = bdl.load_samples(tmp_path / f"draws{suffix}")
        assert sorted(plain.positions["net"]) == ["activation", "final_activation", "layers"]
        _same_tree(
            plain.positions["net"]["layers"][0]["weight"],
            loaded.positions["net"].layers[0].weight,
            "eqx",
        )
    else:
        loaded = _round_trip(samples, tmp_path, suffix)
    assert_same(loaded, samples)
    assert loaded.meta["model"] == flavour
    probs = compiled.predict(loaded.flat(), jnp.asarray(X))  # the loaded draws are usable
    np.testing.assert_array_equal(probs, compiled.predict(samples.flat(), jnp.asarray(X)))


def test_meta_records_the_run(flavour_run):
    flavour, _, samples = flavour_run
    meta = samples.meta
    assert meta["model"] == flavour and meta["bdl_version"] == bdl.__version__
    assert meta["settings"] == {
        "seed": 3,
        "num_steps": 300,
        "burn_in": 150,
        "thin": 10,
        "num_chains": 2,
        "init": "auto",
    }
    assert meta["kernel"]["name"] == "sgld" and meta["kernel"]["step_size"] == 1e-3
    assert meta["kernel"]["recipe"]["type"] == "Langevin"


# ------------------------------------------------------------------------- kernels
@pytest.fixture(scope="module")
def function_model():
    return NETWORKS["function"]()


@pytest.fixture(scope="module")
def entropy_run(function_model):
    kernel = bdl.kernels.get("entropy", base="sgld", eta=0.5, step_size=1e-3)
    return _run(function_model, kernel)


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_round_trip_kernel_with_extras(entropy_run, suffix, tmp_path):
    assert list(entropy_run.extra) == ["guide"]
    loaded = _round_trip(entropy_run, tmp_path, suffix)
    assert_same(loaded, entropy_run)
    assert loaded.meta["kernel"]["name"] == "entropy(sgld)"
    assert loaded.meta["kernel"]["eta"] == 0.5 and loaded.meta["kernel"]["inner"]["name"] == "sgld"


@pytest.fixture(scope="module")
def adapted_run():
    # 3·32 + 32 + 32 + 1 = 161 parameters, above the dense mass's 100: a mass pytree like θ
    # (a dense inverse_mass is an array like any other: the hand-built Samples below and the
    # command-line run on the 5-parameter linear regression have one)
    return _run(_compile(LinenMLP(width=32)), bdl.kernels.get("sghmc"))


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_round_trip_adapted_kernel(adapted_run, suffix, tmp_path):
    assert set(adapted_run.adapted) == {"step_size", "friction", "mass"}
    assert adapted_run.meta["kernel"]["step_size"] is None
    loaded = _round_trip(adapted_run, tmp_path, suffix)
    assert_same(loaded, adapted_run)


@pytest.fixture(scope="module")
def diverged_run():
    quartic = bdl.compile(
        bdl.Potential(lambda t: -0.25 * jnp.sum(t["x"] ** 4), init={"x": jnp.zeros(2)})
    )
    init = {"x": jnp.array([[100.0, 100.0], [0.1, 0.0]])}
    return bdl.sample(
        quartic, bdl.kernels.sgld(0.01), num_steps=300, thin=10, num_chains=2, init=init
    )


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_round_trip_diverged_chain(diverged_run, suffix, tmp_path):
    assert diverged_run.diverged.tolist() == [True, False]
    loaded = _round_trip(diverged_run, tmp_path, suffix)
    assert_same(loaded, diverged_run)
    assert loaded.meta["settings"]["init"] == "<positions>"
    assert loaded.divergence_report() == diverged_run.divergence_report()
    np.testing.assert_array_equal(loaded.valid, diverged_run.valid)


# ------------------------------------------------------------------------- structures and dtypes
@pytest.mark.parametrize("suffix", SUFFIXES)
def test_round_trip_awkward_keys_and_containers(suffix, tmp_path):
    samples = tiny_samples()
    loaded = _round_trip(samples, tmp_path, suffix)
    assert_same(loaded, samples)
    assert isinstance(loaded.positions["e/f%2E"], tuple)
    assert isinstance(loaded.positions["a"]["c_d"], list)
    assert list(loaded.positions["layers"]) == [0, 1]  # integer keys, as nnx layer lists have


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_round_trip_dtypes_bare_arrays_and_named_tuples(suffix, tmp_path):
    positions = Pair(
        np.arange(6, dtype=jnp.bfloat16).reshape(2, 3),
        {
            "half": np.full((2, 3), 0.1, np.float16),
            "double": np.full((2, 3), np.pi, np.float64),
            "flag": np.array([[True, False, True]] * 2),
            "count": np.arange(6, dtype=np.uint8).reshape(2, 3),
        },
    )
    info = {"energy": np.array([[np.nan, -np.inf, 1.0], [-np.nan, 0.0, -0.0]], np.float32)}
    samples = tiny_samples(
        positions=positions,
        extra={"guide": np.ones((2, 3, 2), np.float32)},  # a bare-array extra
        info=info,
        adapted={"step_size": np.array([0.1, 0.2]), "inverse_mass": np.eye(2)[None].repeat(2, 0)},
        interrupted=True,
        diverged=np.array([False, True]),
        divergence_step=np.array([-1, 12]),
    )
    loaded = _round_trip(samples, tmp_path, suffix)
    assert_same(loaded, samples)  # NaN, −NaN, −0.0 and bfloat16 bit for bit
    assert type(loaded.positions) is Pair  # an imported named tuple class is found again
    bare = tiny_samples(positions=np.zeros((2, 3, 4), np.float32))
    assert "position" in bare.posterior_names()
    (tmp_path / "bare").mkdir()
    assert_same(_round_trip(bare, tmp_path / "bare", suffix), bare)


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_round_trip_no_draws(suffix, tmp_path):
    """A run interrupted before its first draw still saves and loads."""
    empty = {"w": np.zeros((2, 0, 3), np.float32)}
    samples = tiny_samples(
        positions=empty,
        info={"energy": np.zeros((2, 0), np.float32)},
        steps=np.zeros((0,), np.int64),
        steps_done=4,
        interrupted=True,
    )
    assert_same(_round_trip(samples, tmp_path, suffix), samples)


# ------------------------------------------------------------------------- names and ArviZ
def test_names_escape_separators_and_round_trip():
    for keys in (["net", "Dense_0", "kernel"], ["a.b", "c"], ["a", "b.c"], ["e/f%2E", "_", "."]):
        for sep in "./":
            assert split_name(join_name(keys, sep), sep) == keys
    assert join_name(["net", "Dense_0", "kernel"]) == "net.Dense_0.kernel"
    assert join_name(["a.b", "e/f%2E"], "/") == "a%2Eb/e%2Ff%252E"


def test_to_arviz_writes_netcdf_with_readable_names(entropy_run, tmp_path):
    """The reported failure: to_arviz().to_netcdf() rejected 'net/w_dim_0'."""
    idata = entropy_run.to_arviz()
    assert "net.w1" in idata.posterior and "guide.net.w1" in idata.posterior
    assert bool(idata.sample_stats["diverging"].any()) is False
    idata.to_netcdf(str(tmp_path / "plain.nc"))
    back = az.from_netcdf(str(tmp_path / "plain.nc"))
    np.testing.assert_array_equal(back.posterior["net.w1"], entropy_run.positions["net"]["w1"])


def test_saved_nc_is_an_arviz_file(diverged_run, tmp_path):
    path = diverged_run.save(tmp_path / "d.nc")
    idata = az.from_netcdf(str(path))
    np.testing.assert_array_equal(idata.posterior["x"], diverged_run.positions["x"])
    np.testing.assert_array_equal(idata.sample_stats["diverging"], ~diverged_run.valid)
    np.testing.assert_array_equal(idata.sample_stats["energy"], diverged_run.info["energy"])
    header = json.loads(idata.attrs["bdl_header"])
    assert header["format_version"] == storage.FORMAT_VERSION


def test_npz_keys_are_readable_and_load_without_pickle(entropy_run, tmp_path):
    path = entropy_run.save(tmp_path / "e.npz")
    with np.load(path, allow_pickle=False) as data:
        assert {"position/net/w1", "extra/guide/net/w1", "info/energy", "steps"} <= set(data.files)
        header = json.loads(str(data["bdl_header"]))
    assert header["format"] == "bdl.Samples" and header["meta"] == entropy_run.meta


# ------------------------------------------------------------------------- atomic writes
@pytest.mark.parametrize("suffix", SUFFIXES)
def test_failed_write_keeps_the_previous_file(suffix, tmp_path, monkeypatch):
    samples = tiny_samples()
    path = samples.save(tmp_path / f"draws{suffix}")
    before = path.read_bytes()
    writer = "_write_npz" if suffix == ".npz" else "_write_nc"
    real = getattr(storage, writer)

    def broken(file, *args):
        real(file, *args)  # a complete temporary file, then a failure before the rename
        raise OSError("disk full")

    monkeypatch.setattr(storage, writer, broken)
    with pytest.raises(OSError, match="disk full"):
        tiny_samples(steps_done=99).save(path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == [path.name]
    with pytest.raises(OSError, match="disk full"):
        samples.save(tmp_path / f"new{suffix}")
    assert os.listdir(tmp_path) == [path.name]  # no partial new file either


def test_save_replaces_an_existing_file(tmp_path):
    path = tiny_samples().save(tmp_path / "d.npz")
    tiny_samples(steps_done=99).save(path)
    assert bdl.load_samples(path).steps_done == 99


# ------------------------------------------------------------------------- command line
def test_cli_sample_writes_a_readable_nc(tmp_path, capsys):
    from bdl.cli.main import main

    out = tmp_path / "x.nc"
    args = ["sample", "linear_regression", "--kernel", "sghmc", "--steps", "300"]
    assert main([*args, "--burn-in", "150", "--out", str(out)]) == 4  # saved, though not converged
    assert f"draws written to {out}" in capsys.readouterr().out
    loaded = bdl.load_samples(out)
    assert loaded.num_chains == 4 and loaded.adapted["inverse_mass"].shape == (4, 5, 5)
    assert loaded.meta["model"] == "linear_regression" and loaded.meta["kernel"]["name"] == "sghmc"
    assert loaded.meta["settings"]["num_steps"] == 300
    assert az.from_netcdf(str(out)).posterior["net.w"].shape[:2] == (4, loaded.num_draws)


def test_cli_bad_out_exits_2_before_compiling(tmp_path, capsys, monkeypatch):
    from bdl.cli.main import main
    from bdl.spec import ModelSpec

    def never(self):
        raise AssertionError("the model was compiled")

    monkeypatch.setattr(ModelSpec, "compile", never)
    args = ["sample", "linear_regression", "--kernel", "sghmc", "--steps", "300"]
    assert main([*args, "--out", "/nonexistent/x.npz"]) == 2
    out, err = capsys.readouterr()
    assert "does not exist" in err and "/nonexistent" in err
    assert "linear_regression:" not in out  # nothing ran
    assert main([*args, "--out", str(tmp_path / "x.csv")]) == 2
    assert "unknown suffix" in capsys.readouterr().err


# ------------------------------------------------------------------------- kernels.describe
@pytest.mark.parametrize("name", bdl.kernels.names())
def test_describe_every_registered_kernel_as_json(name):
    kernel = bdl.kernels.get(name)
    described = bdl.kernels.describe(kernel)
    assert described["name"] == kernel.name
    assert json.loads(json.dumps(described, allow_nan=False)) == described


def test_describe_records_schedules_wrappers_and_arrays_without_addresses():
    decay = bdl.schedules.polynomial_decay(1e-2, 1e-3, 0.5, 100)
    kernel = bdl.kernels.cyclical(bdl.kernels.sgld(decay), cycle_length=50)
    described = bdl.kernels.describe(kernel)
    assert described["type"] == "Cyclical" and described["cycle_length"] == 50
    assert described["inner"]["step_size"].endswith("polynomial_schedule.<locals>.schedule")
    assert "0x" not in json.dumps(described)
    mass = {"w": jnp.ones(3)}
    assert bdl.kernels.describe(bdl.kernels.sghmc(0.1, mass=mass))["recipe"]["mass"] == {
        "type": "Elementwise",
        "values": {"w": "float32[3]"},
    }

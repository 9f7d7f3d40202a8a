"""Bad paths and bad files for Samples.save / bdl.load_samples / check_output_path: each a clear
error of the right type naming the problem (never a raw zipfile, JSON or HDF5 traceback)."""

import json
import os
import zipfile

import arviz as az
import numpy as np
import pytest
from test_storage import tiny_samples

import bdl
from bdl.sampling.kept.writing import SamplesFileError, check_output_path


def _saved(tmp_path, suffix):
    return tiny_samples().save(tmp_path / f"good{suffix}")


def _rewrite_npz(path, edit):
    """Rewrite the .npz at ``path`` with ``edit(dict of arrays)`` applied."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    edit(arrays)
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def _edit_header(path, **changes):
    def edit(arrays):
        header = json.loads(str(arrays["bdl_header"]))
        header.update(changes)
        arrays["bdl_header"] = np.asarray(json.dumps(header))

    return _rewrite_npz(path, edit)


def _truncated(tmp_path, suffix):
    path = _saved(tmp_path, suffix)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _corrupt_nc(tmp_path):
    path = _saved(tmp_path, ".nc")
    data = bytearray(path.read_bytes())
    data[8:4096] = os.urandom(4088)  # keep the HDF5 signature, destroy the superblock after it
    path.write_bytes(bytes(data))
    return path


def _unwritable(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes to any directory")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    return locked / "x.npz"


def _file_as_parent(tmp_path):
    (tmp_path / "afile").write_text("x")
    return tmp_path / "afile" / "x.npz"


def _newer_format(tmp_path):
    return _edit_header(_saved(tmp_path, ".npz"), format_version=99, bdl_version="9.0")


def _newer_nc(tmp_path):
    import h5netcdf

    path = _saved(tmp_path, ".nc")
    with h5netcdf.File(path, "a") as f:
        header = json.loads(f.attrs["bdl_header"])
        header["format_version"] = 7
        f.attrs["bdl_header"] = json.dumps(header)
    return path


def _missing_array(tmp_path):
    return _rewrite_npz(_saved(tmp_path, ".npz"), lambda a: a.pop("info/energy"))


def _bad_json(tmp_path):
    path = _saved(tmp_path, ".npz")
    return _rewrite_npz(path, lambda a: a.update(bdl_header=np.asarray("{not json")))


def _foreign_npz(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, x=np.zeros(3))
    return path


def _foreign_zip(tmp_path):
    path = tmp_path / "other.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("readme.txt", "hello")
    return path


def _npy_as_npz(tmp_path):
    path = tmp_path / "array.npz"
    with open(path, "wb") as f:
        np.save(f, np.zeros(3))
    return path


def _text_as_npz(tmp_path):
    path = tmp_path / "notes.npz"
    path.write_text("just some text\n")
    return path


def _empty_nc(tmp_path):
    path = tmp_path / "empty.nc"
    path.touch()
    return path


def _arviz_nc(tmp_path):
    path = tmp_path / "arviz.nc"
    az.from_dict(posterior={"x": np.zeros((2, 10))}).to_netcdf(str(path))
    return path


def _not_bdl_format(tmp_path):
    return _edit_header(_saved(tmp_path, ".npz"), format="someone.else")


def _shape_mismatch(tmp_path):
    path = _saved(tmp_path, ".npz")
    return _rewrite_npz(path, lambda a: a.update({"steps": np.arange(5)}))


def _unknown_suffix_file(tmp_path):
    path = tmp_path / "draws.csv"
    path.write_text("1,2,3\n")
    return path


def _save(target):
    return lambda tmp_path: tiny_samples().save(target(tmp_path))


def _load(target, **kw):
    return lambda tmp_path: bdl.load_samples(target(tmp_path), **kw)


CASES = [
    # (id, action, exception type, message fragment)
    ("save-unknown-suffix", _save(lambda p: p / "x.txt"), ValueError, "unknown suffix '.txt'"),
    ("save-no-suffix", _save(lambda p: p / "draws"), ValueError, "unknown suffix '(none)'"),
    ("save-missing-dir", _save(lambda p: p / "nope" / "x.npz"), ValueError, "does not exist"),
    ("save-unwritable-dir", _save(_unwritable), ValueError, "is not writable"),
    ("save-parent-is-file", _save(_file_as_parent), ValueError, "is a file, not a directory"),
    (
        "save-path-is-dir",
        _save(lambda p: (p / "d.nc").mkdir() or p / "d.nc"),
        ValueError,
        "is a directory",
    ),
    (
        "save-meta-not-json",
        lambda p: tiny_samples(meta={"f": print}).save(p / "x.npz"),
        ValueError,
        "meta must hold only JSON values",
    ),
    (
        "save-nc-name-clash",
        lambda p: tiny_samples(
            positions={"guide": {"x": np.zeros((2, 3))}, "x": np.zeros((2, 3))},
            extra={"guide": {"x": np.zeros((2, 3))}},
        ).save(p / "x.nc"),
        ValueError,
        "would share the ArviZ/NetCDF variable name 'guide.x'",
    ),
    ("check-not-a-path", lambda p: check_output_path(3), TypeError, "must be a str or a path"),
    ("load-missing-file", _load(lambda p: p / "absent.npz"), FileNotFoundError, "no file"),
    ("load-unknown-suffix", _load(_unknown_suffix_file), ValueError, "unknown suffix '.csv'"),
    (
        "load-truncated-npz",
        _load(lambda p: _truncated(p, ".npz")),
        ValueError,
        "truncated or corrupt",
    ),
    (
        "load-truncated-nc",
        _load(lambda p: _truncated(p, ".nc")),
        ValueError,
        "truncated or corrupt",
    ),
    ("load-corrupt-nc", _load(_corrupt_nc), ValueError, "truncated or corrupt"),
    ("load-empty-nc", _load(_empty_nc), ValueError, "is empty"),
    ("load-text-as-npz", _load(_text_as_npz), ValueError, "not a zip archive"),
    ("load-npy-as-npz", _load(_npy_as_npz), ValueError, "a single NumPy array (.npy)"),
    ("load-foreign-npz", _load(_foreign_npz), ValueError, "no 'bdl_header' entry"),
    ("load-foreign-zip", _load(_foreign_zip), ValueError, "not a bdl samples file"),
    ("load-arviz-nc", _load(_arviz_nc), ValueError, "read it with arviz.from_netcdf"),
    ("load-other-format", _load(_not_bdl_format), ValueError, "names no 'bdl.Samples' format"),
    ("load-newer-npz", _load(_newer_format), ValueError, "format 99 (written by bdl 9.0)"),
    ("load-newer-nc", _load(_newer_nc), ValueError, "Upgrade bdl"),
    ("load-bad-header-json", _load(_bad_json), ValueError, "header is not valid JSON"),
    (
        "load-missing-array",
        _load(_missing_array),
        ValueError,
        "array 'info/energy' the file lacks",
    ),
    (
        "load-shape-mismatch",
        _load(_shape_mismatch),
        ValueError,
        "has shape (5,), its header says (3,)",
    ),
    (
        "load-like-mismatch",
        _load(lambda p: _saved(p, ".npz"), like={"w": np.zeros(2)}),
        ValueError,
        "do not match the saved positions",
    ),
]


@pytest.mark.parametrize(
    ("action", "error", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input(action, error, fragment, tmp_path):
    with pytest.raises(error) as caught:
        action(tmp_path)
    message = str(caught.value)
    assert fragment in message, message
    if isinstance(caught.value, SamplesFileError | FileNotFoundError):
        assert str(tmp_path) in message  # the file is named
        # no zipfile, JSON or HDF5 traceback chained above it
        err = caught.value
        assert err.__cause__ is None and (err.__context__ is None or err.__suppress_context__)


def test_newer_format_message_says_what_to_do(tmp_path):
    with pytest.raises(SamplesFileError) as caught:
        bdl.load_samples(_newer_format(tmp_path))
    message = str(caught.value)
    assert "good.npz" in message and "format 99" in message
    assert "reads formats up to 1" in message and "pip install --upgrade bdl-sgmcmc" in message


def test_a_failed_load_leaves_the_file_alone(tmp_path):
    path = _truncated(tmp_path, ".npz")
    before = path.read_bytes()
    with pytest.raises(SamplesFileError):
        bdl.load_samples(path)
    assert path.read_bytes() == before


def test_unwritable_directory_is_reported_even_as_root(tmp_path, monkeypatch):
    """Root may write anywhere, so the chmod case skips there; the check itself still runs."""
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(ValueError, match="is not writable; choose a directory"):
        check_output_path(tmp_path / "x.nc")

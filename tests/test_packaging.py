"""The built wheel is the product (README, "Install").

The checkout's package sources are built with ``python -m build`` (an sdist, then the wheel from
the sdist, so the sdist must hold everything the wheel needs), the wheel is installed into a
fresh virtual environment, and its ``bdl`` command runs in an empty directory with nothing of
the checkout on ``sys.path``: no ``PYTHONPATH``, no editable install, not the working directory.

The dependencies are not installed again: they are the ones of the environment running the
tests (installed from PyPI by scripts/setup.sh, within pyproject.toml's bounds). The fresh
environment sees that environment's site-packages as a plain path entry after its own, so the
``.pth`` files there, the editable install of the checkout among them, are never run.

The build runs without isolation (``--no-isolation``: the ``dev`` extra installs ``build`` and
setuptools), so it needs no network.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

import bdl

ROOT = Path(__file__).resolve().parent.parent
#: what the build reads: the package and the files pyproject.toml and MANIFEST.in name
BUILD_INPUTS = ("pyproject.toml", "MANIFEST.in", "README.md", "LICENSE", "CHANGELOG.md", "bdl")

PROBE = r"""
import importlib.metadata, json, sys
import bdl
from bdl.model_files import load_spec, model_dirs, resolve
try:
    resolve("no_such_model")
    unknown = None
except ValueError as err:
    unknown = str(err)
print(json.dumps({
    "file": bdl.__file__,
    "path": sys.path,
    "version": bdl.__version__,
    "distribution": importlib.metadata.version("bdl-sgmcmc"),
    "dirs": [str(d) for d in model_dirs()],
    "demo_model": str(resolve("logistic_breast_cancer")),
    "demo_description": load_spec("logistic_breast_cancer").description,
    "unknown": unknown,
}))
"""


@dataclass(frozen=True)
class Installed:
    """A fresh virtual environment holding the built wheel."""

    venv: Path
    site_packages: Path
    env: dict[str, str]

    def run(self, args: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
        """Run ``args`` (the environment's ``bdl`` or ``python`` first) in ``cwd``."""
        return subprocess.run(
            [str(self.venv / "bin" / args[0]), *args[1:]],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def empty_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    path = tmp_path_factory.mktemp(name)
    assert not any(path.iterdir())
    return path


@dataclass(frozen=True)
class Built:
    """The sources built (a copy of the checkout's build inputs) and the sdist and wheel."""

    source: Path
    out: Path

    def package_files(self) -> set[str]:
        """Every file of the package's sources (dotfiles and byte code aside), as
        ``bdl/...``."""
        return {
            p.relative_to(self.source).as_posix()
            for p in (self.source / "bdl").rglob("*")
            if p.is_file()
            and "__pycache__" not in p.parts
            and not p.name.startswith(".")
            and p.suffix != ".pyc"
        }


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Built:
    """The sdist and the wheel, built from a copy of the checkout's build inputs (the build
    writes its egg-info beside its sources: not in the checkout)."""
    try:
        import build  # noqa: F401
    except ImportError:
        pytest.fail("python -m build needs the dev extra: pip install -e '.[dev]'")
    source = tmp_path_factory.mktemp("source")
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return Built(source, out)


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory) -> Installed:
    (wheel,) = dist.out.glob("*.whl")
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install"]
    done = subprocess.run(
        [*pip, "--no-deps", "--no-index", "--no-compile", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site_packages = venv / "lib" / version / "site-packages"
    # the tested dependencies, after the wheel: a path entry, whose .pth files are not run
    (site_packages / "tested_dependencies.pth").write_text("\n".join(site.getsitepackages()))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV")
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["BDL_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))  # nothing cached beforehand
    return Installed(venv, site_packages, env)


def test_the_version_is_the_distributions():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "bdl-sgmcmc"
    assert project["version"] == bdl.__version__
    assert project["scripts"] == {"bdl": "bdl.cli.main:console_main"}


def test_the_sdist_and_the_wheel_hold_the_package(dist):
    """Every file under bdl/ (modules, shipped models, data files) is in both: a new kind of
    data file needs its pattern in pyproject.toml's package-data."""
    (sdist,) = dist.out.glob("bdl_sgmcmc-*.tar.gz")
    (wheel,) = dist.out.glob("bdl_sgmcmc-*-py3-none-any.whl")
    expected = dist.package_files()
    assert "bdl/models/logistic_breast_cancer.py" in expected
    assert "bdl/kernels/verdicts.json" in expected
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    assert not expected - in_wheel, f"not in the wheel: {sorted(expected - in_wheel)}"
    assert {n.split("/")[0] for n in in_wheel} == {"bdl", f"bdl_sgmcmc-{bdl.__version__}.dist-info"}
    with tarfile.open(sdist) as archive:
        top = f"bdl_sgmcmc-{bdl.__version__}/"
        in_sdist = {m.name.removeprefix(top) for m in archive.getmembers() if m.isfile()}
    assert not expected - in_sdist, f"not in the sdist: {sorted(expected - in_sdist)}"
    assert {"pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md"} <= in_sdist
    assert not [n for n in in_sdist if n.startswith("tests/")]


def test_the_installed_wheel_runs_from_an_empty_directory(installed, tmp_path_factory):
    """The wheel's ``bdl`` finds the shipped models and data files with no checkout about:
    ``bdl sample`` and ``bdl validate`` on a shipped model, and the model of ``bdl demo``."""
    here = empty_dir(tmp_path_factory, "empty")
    probe = installed.run(["python", "-c", PROBE], here, timeout=300)
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout.splitlines()[-1])
    package = installed.site_packages / "bdl"
    assert Path(found["file"]) == package / "__init__.py"
    for entry in found["path"]:
        entry = Path(entry or here).resolve()
        assert entry != ROOT and not entry.is_relative_to(ROOT / "bdl"), entry
        if (entry / "bdl" / "__init__.py").is_file():
            assert entry == installed.site_packages.resolve(), f"a second bdl on sys.path: {entry}"
    assert found["version"] == found["distribution"] == bdl.__version__
    assert found["dirs"] == [str(package / "models")]
    assert found["demo_model"] == str(package / "models" / "logistic_breast_cancer.py")
    assert "breast" in found["demo_description"]
    assert "unknown model 'no_such_model'" in found["unknown"]
    assert "linear_regression" in found["unknown"]

    sample = ["sample", "linear_regression", "--kernel", "sgld", "--tuned", "--chains", "2"]
    ran = installed.run(
        ["bdl", *sample, "--steps", "300", "--burn-in", "100", "--out", "draws.npz"], here
    )
    # 4: not converged, 5: biased — a short run; the draws are kept either way
    assert ran.returncode in (0, 4, 5), ran.stdout + ran.stderr
    assert "linear_regression: sgld" in ran.stdout and (here / "draws.npz").is_file()

    validate = ["validate", "linear_regression", "--kernel", "sgld", "--tuned"]
    lengths = ["--steps", "2000", "--burn-in", "500", "--nuts-warmup", "500"]
    checked = installed.run(["bdl", *validate, *lengths, "--nuts-samples", "500"], here)
    # 1: a threshold failed (a short run); 2 would be a refused NUTS reference or a usage error
    assert checked.returncode in (0, 1), checked.stdout + checked.stderr
    assert "verdict:" in checked.stdout
    assert (here / "bdl-output" / "validate_linear_regression_sgld.png").is_file()

    # a user's ./models/NAME.py takes precedence over the shipped model of that name
    mine = empty_dir(tmp_path_factory, "mine")
    (mine / "models").mkdir()
    (mine / "models" / "linear_regression.py").write_text(
        "def build():\n    raise RuntimeError('the working directory model ran')\n"
    )
    refused = installed.run(["bdl", *sample], mine, timeout=300)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "the working directory model ran" in refused.stderr


@pytest.mark.slow
def test_the_installed_wheel_runs_the_demo(installed, tmp_path_factory):
    """``bdl demo`` from the wheel, in an empty directory (a few minutes on 2 CPU cores)."""
    here = empty_dir(tmp_path_factory, "demo")
    demo = installed.run(["bdl", "demo", "--out-dir", "figures"], here, timeout=3600)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert demo.stdout.count("verdict: PASS") == 2
    assert "test-set BMA" in demo.stdout
    assert (here / "figures" / "demo_sghmc.png").is_file()
    assert (here / "figures" / "demo_sgld.png").is_file()

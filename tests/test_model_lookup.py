"""How a model name is found (docs/models.md, "How `bdl sample MODEL` finds a model"): the
working directory's ``./models/NAME.py`` first, then the models shipped inside the package
(``bdl/models/``), so that an installed bdl runs its models from any directory.

The installed wheel itself, run from an empty directory: tests/test_packaging.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import bdl
from bdl.model_files import SHIPPED, load_spec, model_dirs, model_names, resolve
from bdl.spec import ModelSpec


def test_the_shipped_models_live_inside_the_package(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./models here
    assert Path(bdl.__file__).resolve().parent / "models" == SHIPPED
    assert model_dirs() == [SHIPPED]
    assert resolve("logistic_breast_cancer") == SHIPPED / "logistic_breast_cancer.py"
    shipped = sorted(p.stem for p in SHIPPED.glob("*.py") if not p.stem.startswith("_"))
    assert model_names() == shipped
    assert {"logistic_breast_cancer", "linear_regression", "mlp_digits"} <= set(shipped)
    assert isinstance(load_spec("linear_regression"), ModelSpec)


def test_a_users_model_file_takes_precedence_over_the_shipped_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    text = resolve("linear_regression").read_text()
    mine = tmp_path / "models" / "linear_regression.py"
    mine.write_text(
        text
        + "\n\nshipped_build = build\n\n\ndef build(**options):\n"
        + "    import dataclasses\n\n"
        + "    spec = shipped_build(**options)\n"
        + '    return dataclasses.replace(spec, description="my own linear regression")\n'
    )
    (tmp_path / "models" / "mine.py").write_text(text)
    assert model_dirs() == [tmp_path / "models", SHIPPED]
    assert resolve("linear_regression") == mine
    assert load_spec("linear_regression").description == "my own linear regression"
    assert "mine" in model_names() and "logistic_breast_cancer" in model_names()
    # a path still names a file exactly, the shipped one included
    shipped = SHIPPED / "linear_regression.py"
    assert load_spec(str(shipped)).description != "my own linear regression"


def test_an_unknown_name_lists_the_models_of_both_places(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mine.py").write_text("def build():\n    pass\n")
    with pytest.raises(ValueError, match=r"unknown model 'no_such_model'") as info:
        resolve("no_such_model")
    message = str(info.value)
    assert "./models/" in message and "mine" in message and "logistic_breast_cancer" in message
    assert "path to a .py file" in message


def test_the_package_file_of_the_shipped_models_is_not_a_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert (SHIPPED / "__init__.py").is_file()
    assert "__init__" not in model_names()
    with pytest.raises(ValueError, match=r"unknown model '__init__'"):
        resolve("__init__")

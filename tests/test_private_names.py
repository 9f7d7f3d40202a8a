"""No test reads or patches a private name of bdl: what a test needs to control is a parameter
of bdl's public surface (e.g. ``bdl.sample(..., loop=LoopOptions(chunks=FixedChunks(n)))``).

Read from the tests' source with ``ast``: ``from bdl... import _name``, an attribute ``_name``
read from anything imported from bdl, a ``setattr``/``monkeypatch.setattr`` of a name starting
with ``_``, and a dotted string ``"bdl....._name"`` (as ``unittest.mock.patch`` takes)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(source: str) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []
    from_bdl: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "bdl":
            for alias in node.names:
                if _private(alias.name):
                    found.append((node.lineno, f"from {node.module} import {alias.name}"))
                from_bdl.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "bdl":
                    from_bdl.add((alias.asname or alias.name).split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in from_bdl:
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "setattr":
            name = node.args[1] if len(node.args) > 1 else None
            is_text = isinstance(name, ast.Constant) and isinstance(name.value, str)
            if is_text and _private(name.value):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            parts = node.value.split(".")
            if parts[0] == "bdl" and len(parts) > 1 and any(_private(p) for p in parts):
                found.append((node.lineno, node.value))
    return found


def test_the_scan_sees_every_kind_of_private_use():
    source = (
        "import bdl\nfrom bdl.sampling import _hidden\nfrom bdl.sampling import sample as s\n"
        "bdl.sampling._x\ns._y\nmonkeypatch.setattr(bdl.sampling, '_z', 1)\n"
        "patch('bdl.sampling._w')\nbdl.sampling.public\nobj._local\n"
    )
    assert [line for line, _ in private_uses(source)] == [2, 4, 5, 6, 7]


def test_no_test_reads_or_patches_a_private_name_of_bdl():
    offenders = [
        f"{path.relative_to(TESTS)}:{line}: {text}"
        for path in sorted(TESTS.rglob("*.py"))
        if path.name != Path(__file__).name
        for line, text in private_uses(path.read_text())
    ]
    assert not offenders, "\n".join(offenders)

"""The shape of bdl's import graph, read from the source with ``ast`` (nothing is imported): no
import circle among its modules, no import of a higher layer than the importer's own, and no
module over :data:`MAX_LINES` lines.

Every import counts: at module level, inside a function (a deferred import still ties the two
modules together) and under ``if TYPE_CHECKING:``; relative imports are resolved. The layers are
those of docs/architecture.md, section "The layers", which :data:`LAYERS` mirrors.
"""

from __future__ import annotations

import ast
import functools
import itertools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "bdl"
DOC = ROOT.parent / "docs" / "architecture.md"

#: bdl's packages and top-level modules, layer by layer, the most basic first (the table of
#: docs/architecture.md). A module may import its own layer and earlier ones, never a later one.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("shared", ("bdl.utils", "bdl.schedules")),
    (
        "foundations",
        (
            "bdl.augment",
            "bdl.data",
            "bdl.metrics",
            "bdl.diagnostics",
            "bdl.layers",
            "bdl.compilation_cache",
        ),
    ),
    ("DSL", ("bdl.dsl",)),
    ("compile", ("bdl.compile",)),
    ("model files", ("bdl.spec", "bdl.model_files")),
    ("kernels", ("bdl.kernels",)),
    ("sampling", ("bdl.sampling", "bdl.evaluation", "bdl.report", "bdl.optimise")),
    ("validation and meta-learning", ("bdl.validation", "bdl.meta")),
    ("command line", ("bdl.cli",)),
)
#: ``bdl`` itself (bdl/__init__.py): the façade above every layer, whose public names are
#: imported on first use; a module of bdl may read only these names from it
FACADE = "bdl"
FROM_FACADE = frozenset({"__version__"})
#: the most lines a module of bdl may have
MAX_LINES = 500
#: the shipped model files: programs written against bdl's public API (``import bdl``), loaded
#: by path as a user's model file is (bdl/model_files.py), not modules of a layer
SHIPPED_MODELS = ROOT / "models"


@functools.cache
def modules() -> dict[str, Path]:
    """Dotted module name → file, for every module of bdl/ (a package by its ``__init__``) but
    the shipped model files."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        if path.is_relative_to(SHIPPED_MODELS):
            continue
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


@functools.cache
def imports() -> dict[str, dict[str, int]]:
    """Module → {imported module of bdl: the line of its first import}."""
    mods = modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # from . import x, from ..a import b
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                names = [alias.name for alias in node.names]
                targets = [f"{base}.{n}" for n in names if f"{base}.{n}" in mods]
                rest = [n for n in names if f"{base}.{n}" not in mods]
                if rest and not (base == FACADE and set(rest) <= FROM_FACADE):
                    targets.append(base)  # names defined in the module (or package) itself
            else:
                continue
            for target in targets:
                if target in mods and target != name:
                    edges[target] = min(edges.get(target, node.lineno), node.lineno)
        graph[name] = edges
    return graph


def layer_of(module: str) -> int | None:
    """The index of the module's layer in :data:`LAYERS` (the façade: above them all)."""
    if module == FACADE:
        return len(LAYERS)
    for index, (_, units) in enumerate(LAYERS):
        if any(module == unit or module.startswith(unit + ".") for unit in units):
            return index
    return None


def layer_name(index: int) -> str:
    return "the façade (bdl/__init__.py)" if index == len(LAYERS) else repr(LAYERS[index][0])


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def one_cycle(graph: dict[str, dict[str, int]], component: list[str]) -> str:
    """A closed path through the component's first module, each step with its import's line."""
    members, start = set(component), component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:  # breadth first: the shortest way back to the start
        v = queue.pop(0)
        for w in graph[v]:
            if w == start:
                path = [*paths[v], start]
                return (
                    " -> ".join(f"{a} (line {graph[a][b]})" for a, b in itertools.pairwise(path))
                    + f" -> {start}"
                )
            if w in members and w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    return ""


def test_no_import_circles():
    graph = imports()
    found = circles(graph)
    report = "\n".join(f"circle: {', '.join(c)}\n    e.g. {one_cycle(graph, c)}" for c in found)
    assert not found, f"{len(found)} import circle(s) among bdl's modules:\n{report}"


def test_every_module_has_a_layer():
    missing = sorted(m for m in modules() if layer_of(m) is None)
    assert not missing, (
        f"modules of no layer: {missing}; add their package to LAYERS here and to the table of "
        "docs/architecture.md"
    )


def test_the_layers_are_those_of_the_architecture_page():
    """The rows ``| # | layer | packages and modules |`` of docs/architecture.md, in order."""
    documented = []
    for line in DOC.read_text().splitlines():
        row = re.fullmatch(r"\| *\d+ *\| *([^|]+?) *\| *([^|]+?) *\|", line)
        if row:
            units = re.findall(r"`bdl/([\w/]+?)(?:/|\.py)`", row.group(2))
            documented.append((row.group(1), tuple("bdl." + u.replace("/", ".") for u in units)))
    assert documented == [(name, tuple(units)) for name, units in LAYERS], (
        "docs/architecture.md's table of layers and LAYERS here differ: change both together"
    )


def test_no_import_of_a_higher_layer():
    bad = []
    for module, edges in imports().items():
        own = layer_of(module)
        for target, line in sorted(edges.items()):
            theirs = layer_of(target)
            if own is not None and theirs is not None and theirs > own:
                path = modules()[module].relative_to(ROOT.parent)
                bad.append(
                    f"{path}:{line}: {module} (layer {layer_name(own)}) imports {target} "
                    f"(layer {layer_name(theirs)})"
                )
    assert not bad, f"{len(bad)} import(s) of a higher layer:\n" + "\n".join(bad)


def test_no_module_over_the_line_limit():
    over = {
        str(path.relative_to(ROOT.parent)): n
        for path in modules().values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not over, f"modules over {MAX_LINES} lines (split them by concept): {over}"


#: the rooms of bdl/sampling/ and the modules beside them (docs/architecture.md, "Sampling")
SAMPLING_ROOMS = frozenset({"run", "warmup", "kept", "checkpoints", "verdict"})
SAMPLING_TOP = frozenset({"__init__", "sample", "samples"})
#: module names that two packages share for the same thing seen from two layers: the abstract
#: base of a package's objects, and a summary or temperature section computed in one package and
#: printed in another
SHARED_NAMES = frozenset({"__init__", "base", "summary", "temperatures"})


def test_the_sampling_package_is_in_rooms():
    root = ROOT / "sampling"
    top = {p.stem for p in root.glob("*.py")}
    rooms = {p.name for p in root.iterdir() if (p / "__init__.py").is_file()}
    assert top == SAMPLING_TOP, f"modules beside the rooms: {sorted(top - SAMPLING_TOP)}"
    assert rooms == SAMPLING_ROOMS, f"rooms: {sorted(rooms)}"
    text = DOC.read_text()
    for room in sorted(rooms):
        assert f"`{room}/`" in text, f"docs/architecture.md does not describe bdl/sampling/{room}/"
        for module in sorted((root / room).glob("*.py")):
            if module.stem != "__init__":
                assert f"`{module.name}`" in text, (
                    f"docs/architecture.md does not name bdl/sampling/{room}/{module.name}"
                )


def test_no_module_name_is_repeated_across_packages():
    owners: dict[str, list[str]] = {}
    for name, path in modules().items():
        if path.name != "__init__.py":
            owners.setdefault(path.stem, []).append(name)
    repeated = {k: v for k, v in owners.items() if len(v) > 1 and k not in SHARED_NAMES}
    assert not repeated, f"module names used twice: {repeated}"

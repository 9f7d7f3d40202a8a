"""Griffe extensions for the documentation site (mkdocs.yml): what static analysis of bdl misses.

**Equinox modules.** ``equinox.Module`` subclasses are dataclasses made by a metaclass, which
griffe's static analysis does not see: without this extension their signatures are empty and
mkdocstrings reports every ``Args:`` entry of their docstrings as a parameter that does not
exist. Like griffe's own dataclass support, it builds ``__init__`` from the annotated fields of
the class and of its Equinox parents (``eqx.field(default=..., kw_only=...)`` and
``default_factory=`` give the defaults and the keyword-only fields), unless the class or a parent
of it defines one.

**Inherited docstrings.** A method that overrides a documented one without a docstring of its
own (a likelihood's ``distribution``) shows its parent's, as ``inspect.getdoc`` and ``help()``
do; one whose docstring lacks a section its parent's has (``CompiledModel.energy``, whose
``Args:`` and ``Returns:`` are ``Target.energy``'s) shows the parent's section.

**Sphinx roles.** bdl's docstrings name other objects with Sphinx roles (``:func:`sample```,
``:class:`~bdl.kernels.Recipe```), which Markdown shows as written: they become code spans
(```sample```, ```Recipe```).
"""

from __future__ import annotations

import re
from typing import Any

import griffe
from griffe import Class, Expr, ExprCall, Function, Module, Parameter, ParameterKind, Parameters

_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const):`~?([^`]+)`")
_EQX_MODULE = ("equinox.Module", "equinox._module.Module", "eqx.Module")


def _bases(cls: Class) -> list[Class]:
    found = []
    for base in cls.bases:
        path = base.canonical_path if isinstance(base, Expr) else str(base)
        try:
            parent = cls.modules_collection[path]
        except (KeyError, ValueError, griffe.AliasResolutionError):
            continue
        if isinstance(parent, griffe.Alias):
            try:
                parent = parent.final_target
            except griffe.AliasResolutionError:
                continue
        if isinstance(parent, Class):
            found.append(parent)
    return found


def _is_equinox(cls: Class) -> bool:
    for base in cls.bases:
        path = base.canonical_path if isinstance(base, Expr) else str(base)
        if path in _EQX_MODULE:
            return True
    return any(_is_equinox(parent) for parent in _bases(cls))


def _lineage(cls: Class) -> list[Class]:
    """``cls`` and its parents within the loaded packages, most basic first."""
    order: list[Class] = []
    for parent in _bases(cls):
        for item in _lineage(parent):
            if item not in order:
                order.append(item)
    order.append(cls)
    return order


def _field(value: Any) -> tuple[bool, Any, bool]:
    """(has a default, the default, keyword-only) of a field's assigned value."""
    if isinstance(value, ExprCall) and str(value.function).split(".")[-1] == "field":
        arguments = {getattr(a, "name", None): getattr(a, "value", None) for a in value.arguments}
        kw_only = str(arguments.get("kw_only")) == "True"
        if "default" in arguments:
            return True, arguments["default"], kw_only
        if "default_factory" in arguments:
            return True, ExprCall(function=arguments["default_factory"], arguments=[]), kw_only
        return False, None, kw_only
    return value is not None, value, False


def _parameters(cls: Class) -> list[Parameter]:
    fields: dict[str, Parameter] = {}
    for item in _lineage(cls):
        for member in item.members.values():
            if member.is_alias or not member.is_attribute or member.annotation is None:
                continue
            labels = member.labels
            if "property" in labels:
                continue
            if "class-attribute" in labels and "instance-attribute" not in labels:
                continue
            if str(member.annotation).startswith(("ClassVar", "typing.ClassVar")):
                continue
            has_default, default, kw_only = _field(member.value)
            fields[member.name] = Parameter(
                member.name,
                annotation=member.annotation,
                kind=ParameterKind.keyword_only if kw_only else ParameterKind.positional_or_keyword,
                default=default if has_default else None,
                docstring=member.docstring,
            )
    ordered = sorted(fields.values(), key=lambda p: p.kind is ParameterKind.keyword_only)
    return ordered


def _own_init(cls: Class) -> bool:
    """Whether ``cls`` defines ``__init__`` in its source (not one made here or by griffe)."""
    init = cls.members.get("__init__")
    return init is not None and bool(getattr(init, "lineno", 1))


def _code_spans(text: str) -> str:
    """``text`` with each Sphinx role as a code span of its name (``~`` keeps the last part)."""

    def span(match: re.Match[str]) -> str:
        name = match.group(1)
        return f"`{name.rsplit('.', 1)[-1]}`" if match.group(0).count("~") else f"`{name}`"

    return _ROLE.sub(span, text)


#: the sections an override may leave to the method it overrides
INHERITED_SECTIONS = ("Args", "Returns", "Yields", "Raises")
_SECTION = re.compile(r"^(\w+):\s*$", re.M)


def sections(text: str) -> dict[str, str]:
    """The Google-style sections of a docstring, by title, each with its title line."""
    found = {}
    heads = [m for m in _SECTION.finditer(text) if not text[m.start() :].startswith(" ")]
    for head, after in zip(heads, [*heads[1:], None], strict=False):
        found[head.group(1)] = text[head.start() : after.start() if after else len(text)].strip()
    return found


def with_inherited_sections(own: str, parent: str, *, takes_arguments: bool = True) -> str:
    """``own`` followed by the sections of ``parent`` it lacks (of INHERITED_SECTIONS); an
    override that takes no arguments leaves out the parent's ``Args``."""
    mine, theirs = sections(own), sections(parent)
    wanted = [k for k in INHERITED_SECTIONS if takes_arguments or k != "Args"]
    extra = [theirs[k] for k in wanted if k in theirs and k not in mine]
    return "\n\n".join([own.rstrip(), *extra]) if extra else own


def _inherit_docstrings(cls: Class) -> None:
    parents = _lineage(cls)[:-1][::-1]  # nearest first
    for name, member in cls.members.items():
        if member.is_alias or not member.is_function:
            continue
        for parent in parents:
            found = parent.members.get(name)
            if found is None or found.is_alias or found.docstring is None:
                continue
            source = found.docstring
            value = source.value
            if member.docstring is not None:
                own_arguments = [p for p in member.parameters if p.name not in ("self", "cls")]
                value = with_inherited_sections(
                    member.docstring.value, value, takes_arguments=bool(own_arguments)
                )
                source = member.docstring
            member.docstring = griffe.Docstring(
                value,
                lineno=source.lineno,
                endlineno=source.endlineno,
                parent=member,
                parser=source.parser,
                parser_options=source.parser_options,
            )
            break


class BdlDocs(griffe.Extension):
    """Equinox modules get the ``__init__`` their fields make; methods without a docstring
    inherit their parent's; Sphinx roles become code spans."""

    def on_package(self, *, pkg: Module, **kwargs: Any) -> None:
        self._visit(pkg, set())
        self._inherit(pkg, set())

    def _inherit(self, obj: Module | Class, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        for member in list(obj.members.values()):
            if not member.is_alias and (member.is_module or member.is_class):
                self._inherit(member, seen)  # type: ignore[arg-type]
        if isinstance(obj, Class):
            _inherit_docstrings(obj)

    def _visit(self, obj: Module | Class, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        for member in list(obj.members.values()):
            if member.is_alias:
                continue
            if member.is_module or member.is_class:
                self._visit(member, seen)  # type: ignore[arg-type]
            elif member.docstring is not None:
                member.docstring.value = _code_spans(member.docstring.value)
        if obj.docstring is not None:
            obj.docstring.value = _code_spans(obj.docstring.value)
        if isinstance(obj, Class) and _is_equinox(obj):
            if any(_own_init(item) for item in _lineage(obj)):
                return
            init = Function("__init__", lineno=0, endlineno=0, parent=obj, returns="None")
            init.parameters = Parameters(
                Parameter("self", kind=ParameterKind.positional_or_keyword), *_parameters(obj)
            )
            obj.set_member("__init__", init)

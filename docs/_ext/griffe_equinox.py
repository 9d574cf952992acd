"""A griffe extension: the constructor signatures of `equinox.Module`s and `NamedTuple`s.

griffe reads jaxrigid's sources statically (the docs build imports neither jaxrigid nor jax),
and its built-in dataclass support only knows `@dataclasses.dataclass`. An `equinox.Module`
is a dataclass made by its metaclass, and a `typing.NamedTuple` by its base, so without this
the API reference would show `IMIDM` or `RigidBodyState` without their arguments. For each
such class that neither defines `__init__` nor inherits one written by hand (equinox then
keeps that one), this builds `__init__` from the annotated fields, in dataclass order
(the bases' fields first, a redefined field keeping its place), with the defaults of
`eqx.field(default=...)`, `default_factory=...` or a plain `= value`; `ClassVar`s,
properties, `eqx.AbstractVar`s and `init=False` fields are not arguments.
"""

from __future__ import annotations

from typing import Any

from griffe import (
    Attribute,
    Class,
    Expr,
    ExprAttribute,
    ExprCall,
    Extension,
    Function,
    Module,
    Parameter,
    ParameterKind,
    Parameters,
)

_MODULE_BASES = {"equinox.Module", "equinox._module.Module"}
_NAMEDTUPLE_BASES = {"typing.NamedTuple", "NamedTuple"}
_FIELD_CALLS = {"equinox.field", "equinox._module.field", "dataclasses.field"}
_ABSTRACT = {"equinox.AbstractVar", "equinox.AbstractClassVar"}
_SYNTHESISED = "griffe-equinox"


def _path(expr: Any) -> str:
    return expr.canonical_path if isinstance(expr, Expr) else str(expr)


def _kind_of(cls: Class) -> str | None:
    """`"module"`, `"namedtuple"` or None, through the bases griffe can resolve."""
    for base in cls.bases:
        path = _path(base)
        if path in _MODULE_BASES:
            return "module"
        if path in _NAMEDTUPLE_BASES:
            return "namedtuple"
    for base in cls.resolved_bases:
        if isinstance(base, Class) and (kind := _kind_of(base)):
            return kind
    return None


def _field_arguments(attribute: Attribute) -> dict[str, Any]:
    value = attribute.value
    if isinstance(value, ExprAttribute):
        value = value.last
    if isinstance(value, ExprCall) and _path(value.function) in _FIELD_CALLS:
        return {a.name: a.value for a in value.arguments if hasattr(a, "name")}
    return {}


def _own_fields(cls: Class) -> list[Parameter]:
    fields = []
    for member in cls.members.values():
        if member.is_alias or not member.is_attribute or member.annotation is None:
            continue
        if "property" in member.labels or (
            "class-attribute" in member.labels and "instance-attribute" not in member.labels
        ):
            continue  # a ClassVar (griffe unwraps it) or a property: not an argument
        annotation = member.annotation
        if isinstance(annotation, Expr) and any(
            _path(part) in _ABSTRACT for part in annotation.iterate(flat=True)
        ):
            continue
        arguments = _field_arguments(member)
        if str(arguments.get("init")) == "False":
            continue
        if "default_factory" in arguments:
            default = ExprCall(function=arguments["default_factory"], arguments=[])
        elif arguments:
            default = arguments.get("default")
        else:
            default = member.value
        fields.append(
            Parameter(
                member.name,
                annotation=annotation,
                kind=ParameterKind.positional_or_keyword,
                default=default,
                docstring=member.docstring,
            )
        )
    return fields


def _handwritten_init(cls: Class) -> bool:
    for klass in (cls, *cls.mro()):
        init = klass.members.get("__init__")
        if init is not None and _SYNTHESISED not in init.labels:
            return True
    return False


def _set_init(cls: Class) -> None:
    if (kind := _kind_of(cls)) is None or _handwritten_init(cls):
        return
    fields: dict[str, Parameter] = {}
    chain = [cls] if kind == "namedtuple" else [*reversed(cls.mro()), cls]
    for klass in chain:
        for field in _own_fields(klass):
            fields[field.name] = field  # a redefined field keeps its first place
    init = Function(
        "__init__",
        lineno=0,
        endlineno=0,
        parent=cls,
        parameters=Parameters(
            Parameter("self", kind=ParameterKind.positional_or_keyword),
            *fields.values(),
        ),
        returns="None",
    )
    init.labels.add(_SYNTHESISED)
    cls.set_member("__init__", init)


def _visit(obj: Module | Class, seen: set[str]) -> None:
    if obj.path in seen:
        return
    seen.add(obj.path)
    if isinstance(obj, Class):
        # bases first, so that a subclass sees which of them have a synthesised __init__
        for base in obj.resolved_bases:
            if isinstance(base, Class):
                _visit(base, seen)
        _set_init(obj)
    for member in list(obj.members.values()):
        if not member.is_alias and (member.is_module or member.is_class):
            _visit(member, seen)


class EquinoxInit(Extension):
    """Synthesises `__init__` for `equinox.Module` and `typing.NamedTuple` classes."""

    def on_package(self, *, pkg: Module, **kwargs: Any) -> None:
        _visit(pkg, set())

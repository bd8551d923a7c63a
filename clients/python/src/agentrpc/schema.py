"""JSON Schema from Python type hints, and JSON values back into those types.

Used by ``@tool`` (a function's parameters become its ``inputSchema``) and by
``session.generate(schema=SomeDataclass)``. Supported annotations:

========================================  =====================================
``str`` / ``int`` / ``float`` / ``bool``  ``string`` / ``integer`` / ``number`` / ``boolean``
``None``                                  ``null``
``Optional[X]``, ``X | None``             X's schema, also admitting ``null``
``X | Y``                                 ``anyOf``
``Literal["a", 1, ...]``                  ``enum``
``Enum`` subclass                         ``enum`` of the members' values
``list[X]``, ``tuple[X, ...]``            ``array`` of X
``dict[str, X]``                          ``object`` whose values are X
dataclass, ``TypedDict``                  ``object`` with ``properties``, ``required``
``Annotated[X, "text"]``                  X with ``description: "text"``
``Any``                                   any JSON value (``{}``)
========================================  =====================================

Anything else (``set``, ``bytes``, ``Callable``, bare ``list``/``dict``, a
plain class, a recursive dataclass) raises :class:`TypeError` naming where
the annotation sits, because a schema that silently accepts anything would
let the model send arguments the function cannot take.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin

__all__ = ["json_schema", "from_json", "to_json", "type_hints"]

_PRIMITIVES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_JSON_SCALARS = (str, int, float, bool, type(None))


def type_hints(obj: Any) -> dict[str, Any]:
    """``typing.get_type_hints`` with ``Annotated`` kept, resolving string annotations."""
    return typing.get_type_hints(obj, include_extras=True)


def _describe(tp: Any) -> str:
    if get_origin(tp) is not None:
        return repr(tp).removeprefix("typing.")
    return getattr(tp, "__name__", None) or repr(tp)


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and typing.is_typeddict(tp)


def _is_union(origin: Any) -> bool:
    return origin is Union or origin is types.UnionType


def _strip_required(tp: Any) -> Any:
    """Unwrap ``Required[X]`` / ``NotRequired[X]`` (TypedDict key markers)."""
    while get_origin(tp) in (typing.Required, typing.NotRequired):
        tp = get_args(tp)[0]
    return tp


def _scalar_type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "null"


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"enum": values}
    names = {_scalar_type_name(v) for v in values}
    if len(names) == 1:
        schema["type"] = names.pop()
    elif names == {"integer", "number"}:
        schema["type"] = "number"
    return schema


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also admits ``null``, written the simplest way providers accept."""
    if "enum" in schema:
        out = dict(schema)
        out["enum"] = [*schema["enum"], *([] if None in schema["enum"] else [None])]
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        return out
    if isinstance(schema.get("type"), str) and set(schema) <= {"type", "description", "items", "additionalProperties",
                                                               "properties", "required", "title"}:
        out = dict(schema)
        out["type"] = [schema["type"], "null"]
        return out
    return {"anyOf": [schema, {"type": "null"}]}


class _Builder:
    """Walks one annotation; ``stack`` catches recursive types."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.stack: list[type] = []

    def fail(self, tp: Any, why: str) -> TypeError:
        return TypeError(f"{self.where}: unsupported annotation {_describe(tp)!r}: {why}")

    def build(self, tp: Any) -> dict[str, Any]:
        origin = get_origin(tp)
        if origin is typing.Annotated:
            inner, *meta = get_args(tp)
            schema = self.build(inner)
            texts = [m for m in meta if isinstance(m, str)]
            if texts:
                schema = {**schema, "description": " ".join(texts)}
            return schema
        if tp is Any:
            return {}
        if tp is None or tp is type(None):
            return {"type": "null"}
        if isinstance(tp, type) and tp in _PRIMITIVES:
            return {"type": _PRIMITIVES[tp]}
        if _is_union(origin):
            members = get_args(tp)
            non_null = [m for m in members if m is not type(None)]
            if len(non_null) == 1:
                inner_schema = self.build(non_null[0])
                return _nullable(inner_schema) if len(non_null) < len(members) else inner_schema
            alternatives = [self.build(m) for m in members]
            return {"anyOf": alternatives}
        if origin is Literal:
            values = list(get_args(tp))
            for value in values:
                if not isinstance(value, _JSON_SCALARS) or isinstance(value, enum.Enum):
                    raise self.fail(tp, f"Literal value {value!r} is not a JSON string, number, boolean or None")
            return _enum_schema(values)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            values = [member.value for member in tp]
            for value in values:
                if not isinstance(value, _JSON_SCALARS):
                    raise self.fail(tp, f"member value {value!r} is not a JSON string, number, boolean or None")
            return _enum_schema(values)
        if origin is list:
            (item,) = get_args(tp)
            return {"type": "array", "items": self.build(item)}
        if origin is tuple:
            args = get_args(tp)
            if len(args) == 2 and args[1] is Ellipsis:
                return {"type": "array", "items": self.build(args[0])}
            raise self.fail(tp, "only tuple[X, ...] is supported; use a dataclass for fixed fields")
        if origin is dict:
            key, value = get_args(tp)
            if key is not str:
                raise self.fail(tp, "JSON object keys are strings; use dict[str, X]")
            return {"type": "object", "additionalProperties": self.build(value)}
        if tp in (list, dict, tuple):
            raise self.fail(tp, f"give the item type, e.g. {tp.__name__}[str{', Any' if tp is dict else ''}]"
                            if tp is not tuple else "give the item type, e.g. tuple[str, ...]")
        if isinstance(tp, type) and (dataclasses.is_dataclass(tp) or _is_typeddict(tp)):
            return self.record(tp)
        raise self.fail(tp, "use str, int, float, bool, None, Optional, Literal, an Enum, list[X], "
                            "dict[str, X], a dataclass or a TypedDict")

    def record(self, tp: type) -> dict[str, Any]:
        if tp in self.stack:
            raise self.fail(tp, "recursive types are not supported")
        self.stack.append(tp)
        try:
            hints = type_hints(tp)
            properties: dict[str, Any] = {}
            required: list[str] = []
            if dataclasses.is_dataclass(tp):
                for f in dataclasses.fields(tp):
                    if not f.init:
                        continue
                    schema = self.build(hints.get(f.name, f.type))
                    if f.default is not dataclasses.MISSING:
                        default = _json_default(f.default)
                        if default is not _NO_DEFAULT:
                            schema = {**schema, "default": default}
                    elif f.default_factory is dataclasses.MISSING:
                        required.append(f.name)
                    properties[f.name] = schema
            else:
                required_keys = getattr(tp, "__required_keys__", frozenset(hints))
                for name, hint in hints.items():
                    properties[name] = self.build(_strip_required(hint))
                    # Under `from __future__ import annotations` Python cannot see
                    # NotRequired/Required when it computes __required_keys__, so
                    # the resolved hint decides.
                    marker = get_origin(hint)
                    if marker is typing.Required or (name in required_keys and marker is not typing.NotRequired):
                        required.append(name)
            out: dict[str, Any] = {"type": "object", "properties": properties}
            if required:
                out["required"] = required
            out["additionalProperties"] = False
            doc = _own_doc(tp)
            if doc:
                out["description"] = doc
            return out
        finally:
            self.stack.pop()


def _own_doc(tp: type) -> str | None:
    """The class docstring's first paragraph; not dataclass's generated signature."""
    doc = tp.__doc__
    if not doc or doc.startswith(f"{tp.__name__}("):
        return None
    if _is_typeddict(tp) and doc == typing.TypedDict.__doc__:
        return None
    return first_paragraph(doc)


def first_paragraph(doc: str) -> str:
    """The first paragraph of a docstring, joined into one line."""
    import inspect

    text = inspect.cleandoc(doc)
    paragraph = text.split("\n\n", 1)[0]
    return " ".join(line.strip() for line in paragraph.splitlines()).strip()


_NO_DEFAULT = object()


def _json_default(value: Any) -> Any:
    """A default value as JSON, or ``_NO_DEFAULT`` when it has no JSON form."""
    try:
        return to_json(value)
    except TypeError:
        return _NO_DEFAULT


def json_schema(tp: Any, *, where: str = "schema") -> dict[str, Any]:
    """The JSON Schema of an annotation; :class:`TypeError` names ``where`` if unsupported."""
    return _Builder(where).build(tp)


# -- values ---------------------------------------------------------------------


def to_json(value: Any) -> Any:
    """A Python value as JSON-ready data: dataclasses and Enums unpacked, tuples as lists.

    Raises :class:`TypeError` for values with no JSON form (sets, bytes, objects).
    """
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise TypeError(f"{value!r} is not a JSON number")
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"object key {key!r} is not a string")
            out[key] = to_json(item)
        return out
    if isinstance(value, (list, tuple)):
        return [to_json(item) for item in value]
    raise TypeError(f"{type(value).__name__} value {value!r:.80} has no JSON form")


def from_json(value: Any, tp: Any, *, where: str = "value") -> Any:
    """Convert validated JSON ``value`` into annotation ``tp``.

    Dataclasses are constructed, Enums looked up by value, tuples rebuilt and
    ints widened to float; everything else passes through. Raises
    :class:`ValueError` naming ``where`` when the value does not fit.
    """
    origin = get_origin(tp)
    if origin is typing.Annotated:
        return from_json(value, get_args(tp)[0], where=where)
    if tp is Any or tp is None or tp is type(None):
        return value
    if _is_union(origin):
        members = get_args(tp)
        if value is None and type(None) in members:
            return None
        errors: list[str] = []
        for member in members:
            if member is type(None):
                continue
            try:
                return from_json(value, member, where=where)
            except (ValueError, TypeError) as exc:
                errors.append(str(exc))
        raise ValueError(f"{where}: {value!r:.80} matches none of {_describe(tp)} ({'; '.join(errors)})")
    if origin is Literal:
        if value not in get_args(tp):
            raise ValueError(f"{where}: {value!r:.80} is not one of {list(get_args(tp))!r}")
        return value
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError as exc:
            raise ValueError(f"{where}: {value!r:.80} is not a {tp.__name__}") from exc
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ValueError(f"{where}: expected a number, got {value!r:.80}")
    if tp is int:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ValueError(f"{where}: expected an integer, got {value!r:.80}")
    if tp is bool or tp is str:
        if not isinstance(value, tp):
            raise ValueError(f"{where}: expected {tp.__name__}, got {value!r:.80}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected an array, got {value!r:.80}")
        item_type = get_args(tp)[0]
        items = [from_json(item, item_type, where=f"{where}[{i}]") for i, item in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: expected an object, got {value!r:.80}")
        value_type = get_args(tp)[1]
        return {key: from_json(item, value_type, where=f"{where}.{key}") for key, item in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: expected an object for {tp.__name__}, got {value!r:.80}")
        hints = type_hints(tp)
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(tp):
            if f.init and f.name in value:
                kwargs[f.name] = from_json(value[f.name], hints.get(f.name, f.type), where=f"{where}.{f.name}")
        try:
            return tp(**kwargs)
        except TypeError as exc:
            raise ValueError(f"{where}: cannot build {tp.__name__}: {exc}") from exc
    if _is_typeddict(tp):
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: expected an object for {tp.__name__}, got {value!r:.80}")
        hints = type_hints(tp)
        return {
            key: from_json(item, _strip_required(hints[key]), where=f"{where}.{key}") if key in hints else item
            for key, item in value.items()
        }
    return value

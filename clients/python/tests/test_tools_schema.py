"""``@tool``: names, descriptions and JSON Schemas derived from functions; values back."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict, Union

import pytest

from agentrpc import Conflict, Denied, Failed, Tool, ToolContext, Undoable, from_json, json_schema, to_json, tool
from agentrpc.tools import tool_spec


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Point:
    """A point on the plane."""

    x: float
    y: float = 0.0


@dataclasses.dataclass
class Shape:
    name: str
    points: list[Point]
    color: Color = Color.RED
    tags: list[str] = dataclasses.field(default_factory=list)


class Address(TypedDict):
    """A postal address."""

    street: str
    zip: NotRequired[str]


class Options(TypedDict, total=False):
    verbose: bool


def schema_of(annotation: Any) -> dict[str, Any]:
    return json_schema(annotation, where="test")


# -- one annotation at a time -----------------------------------------------------


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (Any, {}),
        (Optional[int], {"type": ["integer", "null"]}),
        (int | None, {"type": ["integer", "null"]}),
        (Union[str, None], {"type": ["string", "null"]}),
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Literal["a", 1], {"enum": ["a", 1]}),
        (Optional[Literal["a"]], {"type": ["string", "null"], "enum": ["a", None]}),
        (Color, {"type": "string", "enum": ["red", "green"]}),
        (Level, {"type": "integer", "enum": [1, 2]}),
        (Color | None, {"type": ["string", "null"], "enum": ["red", "green", None]}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (list[list[str]], {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (dict[str, Any], {"type": "object", "additionalProperties": {}}),
        (Annotated[str, "The city."], {"type": "string", "description": "The city."}),
        (list[int] | None, {"type": ["array", "null"], "items": {"type": "integer"}}),
    ],
)
def test_schema_of_supported_annotations(annotation: Any, expected: dict[str, Any]) -> None:
    assert schema_of(annotation) == expected


def test_dataclass_schema_has_properties_required_defaults_and_description() -> None:
    assert schema_of(Point) == {
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "number", "default": 0.0}},
        "required": ["x"],
        "additionalProperties": False,
        "description": "A point on the plane.",
    }


def test_nested_dataclass_enum_default_and_default_factory() -> None:
    schema = schema_of(Shape)
    assert "description" not in schema  # the generated dataclass __doc__ is not a description
    assert schema["required"] == ["name", "points"]
    assert schema["properties"]["points"] == {"type": "array", "items": schema_of(Point)}
    assert schema["properties"]["color"] == {"type": "string", "enum": ["red", "green"], "default": "red"}
    # A default_factory has no static value to advertise, but the field is not required.
    assert schema["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}


def test_typeddict_schema_follows_required_keys() -> None:
    assert schema_of(Address) == {
        "type": "object",
        "properties": {"street": {"type": "string"}, "zip": {"type": "string"}},
        "required": ["street"],
        "additionalProperties": False,
        "description": "A postal address.",
    }
    options = schema_of(Options)
    assert "required" not in options and options["properties"] == {"verbose": {"type": "boolean"}}


@dataclasses.dataclass
class Node:
    value: int
    children: list[Node]


class NotAModel:
    pass


@pytest.mark.parametrize(
    ("annotation", "fragment"),
    [
        (set[int], "set[int]"),
        (frozenset[str], "frozenset"),
        (bytes, "bytes"),
        (Callable[[int], int], "Callable"),
        (list, "give the item type"),
        (dict, "give the item type"),
        (tuple[int, str], "tuple[X, ...]"),
        (dict[int, str], "keys are strings"),
        (NotAModel, "NotAModel"),
        (Node, "recursive"),
        (Literal[Color.RED], "Literal value"),
        (complex, "complex"),
    ],
)
def test_unsupported_annotations_raise_type_error_naming_where(annotation: Any, fragment: str) -> None:
    with pytest.raises(TypeError) as caught:
        json_schema(annotation, where="parameter 'p' of tool 'f'")
    assert "parameter 'p' of tool 'f'" in str(caught.value)
    assert fragment in str(caught.value)


# -- the decorator ---------------------------------------------------------------


def test_tool_derives_name_description_and_parameter_docs() -> None:
    @tool
    def get_weather(city: str, unit: Literal["C", "F"] = "C", days: int | None = None) -> dict[str, Any]:
        """Current weather for a city.

        Uses the cached forecast when fresh.

        Args:
            city: The city name,
                e.g. Paris.
            unit (str): Temperature unit.

        Returns:
            The weather.
        """
        return {"city": city}

    assert isinstance(get_weather, Tool)
    assert get_weather.name == "get_weather"
    assert get_weather.description == "Current weather for a city."
    assert get_weather.spec() == {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city name, e.g. Paris."},
                "unit": {"type": "string", "enum": ["C", "F"], "description": "Temperature unit.", "default": "C"},
                "days": {"type": ["integer", "null"], "default": None},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    }
    # Still a plain function when called directly.
    assert get_weather("Rome") == {"city": "Rome"}
    assert get_weather.__name__ == "get_weather"


def test_tool_options_reach_the_spec() -> None:
    @tool(name="rm", description="Delete a file.", confirmation="always",
          annotations={"destructive": True, "read_only": False}, final=False)
    def delete(path: str) -> None:
        """Ignored because description= wins."""

    assert delete.spec() == {
        "name": "rm",
        "description": "Delete a file.",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}},
                        "required": ["path"], "additionalProperties": False},
        "confirmation": "always",
        "annotations": {"destructive": True, "readOnly": False},
    }

    @tool(final=True)
    def answer(text: str) -> None:
        """Give the final answer."""

    assert answer.spec()["final"] is True


def test_sphinx_param_docs_and_explicit_input_schema() -> None:
    @tool
    def f(a: int) -> int:
        """Add one.

        :param a: the number
        """
        return a + 1

    assert f.input_schema["properties"]["a"]["description"] == "the number"

    @tool(input_schema={"type": "object"})
    def g(a: int) -> int:
        """Raw schema."""
        return a

    assert g.spec()["inputSchema"] == {"type": "object"}


def test_tool_context_parameter_is_injected_not_described() -> None:
    @tool
    def f(x: int, ctx: ToolContext) -> int:
        """Uses the context."""
        return x

    assert list(f.input_schema["properties"]) == ["x"]

    @tool
    def g(ctx: ToolContext | None = None) -> None:
        """Optional context."""

    assert g.input_schema["properties"] == {}


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("def f(x): pass", "parameter 'x' of tool 'f' has no type annotation"),
        ("def f(x: set[int]): pass", "parameter 'x' of tool 'f': unsupported annotation"),
        ("def f(cb: Callable[[], None]): pass", "parameter 'cb' of tool 'f': unsupported annotation"),
        ("def f(*args: int): pass", "parameter 'args' of tool 'f'"),
        ("def f(**kw: int): pass", "parameter 'kw' of tool 'f'"),
        ("def f(x: int, /): pass", "positional-only"),
    ],
)
def test_tool_rejects_unsupported_parameters_with_a_type_error(source: str, fragment: str) -> None:
    namespace: dict[str, Any] = {"Callable": Callable}
    exec(source, namespace)
    with pytest.raises(TypeError) as caught:
        tool(namespace["f"])
    assert fragment in str(caught.value)


def test_bad_tool_names_and_options_are_rejected() -> None:
    with pytest.raises(ValueError):
        tool(name="has space")(lambda: None)
    with pytest.raises(ValueError):
        tool(confirmation="sometimes")(lambda: None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        tool(annotations={"dangerous": True})(lambda: None)


def test_tool_spec_accepts_tools_functions_and_dicts() -> None:
    def plain(a: str) -> str:
        """Plain."""
        return a

    spec, made = tool_spec(plain)
    assert made is not None and spec["name"] == "plain"
    spec, made = tool_spec({"name": "raw", "inputSchema": {"type": "object"}})
    assert made is None and spec == {"name": "raw", "inputSchema": {"type": "object"}}
    with pytest.raises(TypeError):
        tool_spec(42)
    with pytest.raises(TypeError):
        tool_spec({"description": "no name"})


# -- arguments in, results out -----------------------------------------------------


def test_bind_converts_arguments_to_the_annotated_types() -> None:
    @tool
    def draw(shape: Shape, level: Level, origin: Point | None = None, scale: float = 1.0,
             where: Address | None = None, items: tuple[int, ...] = ()) -> None:
        """Draw."""

    kwargs = draw.bind({
        "shape": {"name": "tri", "points": [{"x": 1, "y": 2}, {"x": 3}], "color": "green"},
        "level": 2,
        "origin": None,
        "scale": 2,
        "where": {"street": "Main"},
        "items": [1, 2],
    })
    assert kwargs["shape"] == Shape("tri", [Point(1.0, 2.0), Point(3.0)], Color.GREEN)
    assert isinstance(kwargs["shape"].points[0].x, float)
    assert kwargs["level"] is Level.HIGH
    assert kwargs["origin"] is None
    assert kwargs["scale"] == 2.0 and isinstance(kwargs["scale"], float)
    assert kwargs["where"] == {"street": "Main"}
    assert kwargs["items"] == (1, 2)
    with pytest.raises(ValueError, match="unexpected"):
        draw.bind({"shape": {"name": "x", "points": []}, "level": 1, "bogus": 1})
    with pytest.raises(ValueError, match="level"):
        draw.bind({"shape": {"name": "x", "points": []}, "level": 7})


def test_from_json_and_to_json_round_trip() -> None:
    shape = Shape("sq", [Point(0.0, 1.0)], Color.GREEN, ["a"])
    wire = to_json(shape)
    assert wire == {"name": "sq", "points": [{"x": 0.0, "y": 1.0}], "color": "green", "tags": ["a"]}
    assert from_json(wire, Shape) == shape
    assert from_json([1, 2], list[int]) == [1, 2]
    assert from_json({"a": 1}, dict[str, float]) == {"a": 1.0}
    assert from_json("x", Literal["x"]) == "x"
    assert from_json(3, int | str) == 3
    for bad, annotation in ((1.5, int), ("a", Literal["b"]), ([1], dict[str, int]), ({}, list[int]), (True, int)):
        with pytest.raises(ValueError):
            from_json(bad, annotation)
    with pytest.raises(TypeError):
        to_json({1, 2})
    with pytest.raises(TypeError):
        to_json(float("nan"))
    with pytest.raises(TypeError):
        to_json({1: "non-string key"})


def test_outcome_types_are_plain_values() -> None:
    assert Failed("x").content == "x"
    assert Denied("no").reason == "no"
    assert Conflict({"v": 2}).content == {"v": 2}
    undo = Undoable(1, undo=lambda: None)
    assert undo.value == 1 and callable(undo.undo)


def test_bound_methods_become_tools_without_self() -> None:
    class Store:
        def __init__(self) -> None:
            self.items = {"a": 1}

        def lookup(self, key: str) -> int:
            """Look a key up."""
            return self.items[key]

        async def count(self) -> int:
            """How many items."""
            return len(self.items)

    store = Store()
    lookup = tool(store.lookup)
    assert lookup.name == "lookup" and lookup.input_schema["required"] == ["key"]
    assert list(lookup.input_schema["properties"]) == ["key"]
    assert lookup.bind({"key": "a"}) == {"key": "a"} and lookup(key="a") == 1
    spec, made = tool_spec(store.count)
    assert made is not None and made.is_async and spec["inputSchema"]["properties"] == {}

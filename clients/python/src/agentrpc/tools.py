"""Tools from plain Python functions.

``@tool`` turns a function into a :class:`Tool`: its name, its description
(the docstring's first paragraph) and the JSON Schema of its arguments (from
the type hints, see :mod:`agentrpc.schema`) become the ``ToolSpec`` the
session is created with, and the client calls the function when the server
sends ``tool/call`` for that session.

What a tool returns decides the outcome the model sees:

* a plain value → ``ok`` with that content (dataclasses and Enums are unpacked);
* :class:`Failed` / :class:`Denied` / :class:`Conflict` → that outcome;
* :class:`Undoable` → ``ok``, and its ``undo`` callable runs if the turn fails
  and the server rolls the call back (``tool/undo``, newest first).

A raised exception is up to the tool's ``on_exception`` (default: the
client's ``tool_exceptions``, itself ``"fail_turn"`` unless set):

* ``"fail_turn"``: the client answers ``tool/call`` with a JSON-RPC error,
  which ends the turn with :class:`~agentrpc.ToolExecutorError`
  (docs/turns.md), the Python exception chained to it;
* ``"report"``: the model sees a ``failed`` outcome whose content is
  ``"<ExceptionType>: <message>"`` and the turn carries on, as most agent
  SDKs do by default.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import re
import types
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, ParamSpec, TypeAlias, TypeVar, overload

from .schema import first_paragraph, from_json, json_schema, to_json, type_hints

__all__ = [
    "Tool",
    "tool",
    "ToolContext",
    "Failed",
    "Denied",
    "Conflict",
    "Undoable",
    "UndoCallable",
    "ToolExceptionPolicy",
    "tool_spec",
]

#: Called with no arguments to roll a call back; may be a coroutine function.
UndoCallable = Callable[[], "Any | Awaitable[Any]"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

#: What a tool's uncaught exception does: end the turn, or tell the model.
ToolExceptionPolicy: TypeAlias = Literal["fail_turn", "report"]
TOOL_EXCEPTION_POLICIES: tuple[ToolExceptionPolicy, ...] = ("fail_turn", "report")

#: How many plain (non-async) tool functions a client runs at once by default.
DEFAULT_MAX_WORKERS = 8


@dataclass(frozen=True, slots=True)
class Failed:
    """Outcome ``failed``: the model sees ``content`` and may try again."""

    content: Any


@dataclass(frozen=True, slots=True)
class Denied:
    """Outcome ``denied``: the tool refused; the model sees ``reason``."""

    reason: Any


@dataclass(frozen=True, slots=True)
class Conflict:
    """Outcome ``conflict``: the world changed under the call (e.g. a stale edit)."""

    content: Any


@dataclass(frozen=True, slots=True)
class Undoable:
    """Outcome ``ok`` with ``value``, plus how to roll the call back.

    ``undo`` (sync or async, no arguments) is called if the turn fails after
    this call and the server sends ``tool/undo`` for it. The server only sees
    an opaque token; the callable stays in the client.
    """

    value: Any
    undo: UndoCallable


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Facts about the call, for a tool that declares a ``ToolContext`` parameter.

    That parameter is filled in by the client and left out of the schema.
    """

    session_id: str
    turn_id: str
    call_id: str
    name: str
    revision: int
    #: Names this call for good (``idempotencyKey``): the same when the server sends
    #: the call again after a crash or a parked turn. Keep what ran under it to run
    #: a call once (docs/protocol.md, "Durable sessions").
    idempotency_key: str = ""
    #: True when the call was sent before (a parked or crashed turn continued) and no
    #: result was recorded: it may have run. Look ``idempotency_key`` up first.
    in_doubt: bool = False
    #: Which send of the call this is (1 the first).
    attempt: int = 1
    session: Any = field(default=None, repr=False, compare=False)

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Reports how far the call has come (``tool/progress``); the server sends
        it on as a ``toolProgress`` event, at most ~10 a second per call."""
        params: dict[str, Any] = {"sessionId": self.session_id, "callId": self.call_id, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.session.client.notify("tool/progress", params)


_ANNOTATION_NAMES = {"read_only": "readOnly", "destructive": "destructive", "idempotent": "idempotent",
                     "readOnly": "readOnly"}


def _annotations_wire(annotations: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if annotations is None:
        return None
    out: dict[str, Any] = {}
    for key, value in annotations.items():
        if key not in _ANNOTATION_NAMES:
            raise ValueError(f"unknown tool annotation {key!r}; use read_only, destructive or idempotent")
        out[_ANNOTATION_NAMES[key]] = bool(value)
    return out


_ARGS_HEADERS = re.compile(r"^(Args|Arguments|Parameters|Params):\s*$")
_PARAM_LINE = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[\w\[\], ]+\s+)?(\w+):\s*(.*)$")


def _param_docs(doc: str | None) -> dict[str, str]:
    """Parameter descriptions from a Google-style ``Args:`` section or ``:param x:`` lines."""
    if not doc:
        return {}
    lines = inspect.cleandoc(doc).splitlines()
    found: dict[str, str] = {}
    in_args = False
    current: str | None = None
    indent: int | None = None
    for line in lines:
        stripped = line.strip()
        sphinx = _SPHINX_PARAM.match(stripped)
        if sphinx:
            found[sphinx.group(1)] = sphinx.group(2).strip()
            current = sphinx.group(1)
            in_args = False
            continue
        if _ARGS_HEADERS.match(stripped):
            in_args, current, indent = True, None, None
            continue
        if not in_args:
            if current and stripped and not stripped.startswith(":") and line.startswith((" ", "\t")):
                found[current] += " " + stripped
            elif not stripped or stripped.startswith(":"):
                current = None
            continue
        if not stripped:
            continue
        this_indent = len(line) - len(line.lstrip())
        if this_indent == 0:
            in_args, current = False, None  # the next section (Returns:, Raises:, ...) or prose
            continue
        if indent is None:
            indent = this_indent
        match = _PARAM_LINE.match(stripped)
        if this_indent == indent and match:
            current = match.group(1).lstrip("*")
            found[current] = match.group(3).strip()
        elif current is not None:
            found[current] = (found[current] + " " + stripped).strip()
    return found


def _is_context(hint: Any) -> bool:
    """``ToolContext`` or ``ToolContext | None``: filled in by the client, not by the model."""
    if hint is ToolContext:
        return True
    members = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else ()
    return ToolContext in members and all(m in (ToolContext, type(None)) for m in members)


def _parameter_hints(function: Callable[..., Any], where_fn: str) -> dict[str, Any]:
    """The parameters' resolved annotations (the return annotation is not needed).

    ``get_type_hints`` resolves all annotations at once and fails on any
    unresolvable one, typically a return type defined inside a function
    under ``from __future__ import annotations``; then each parameter is
    resolved on its own, so only a parameter that really cannot be resolved
    is an error, and the error names it.
    """
    try:
        return {k: v for k, v in type_hints(function).items() if k != "return"}
    except Exception:
        pass
    raw = dict(getattr(function, "__annotations__", {}) or {})
    raw.pop("return", None)
    namespace = dict(getattr(function, "__globals__", {}) or {})
    closure = getattr(function, "__closure__", None) or ()
    for name, cell in zip(getattr(getattr(function, "__code__", None), "co_freevars", ()), closure):
        try:
            namespace[name] = cell.cell_contents
        except ValueError:  # an empty cell
            pass
    hints: dict[str, Any] = {}
    for name, annotation in raw.items():
        if not isinstance(annotation, str):
            hints[name] = annotation
            continue
        try:
            hints[name] = eval(annotation, namespace)  # noqa: S307 - the function's own annotation text
        except Exception as exc:
            raise TypeError(
                f"parameter {name!r} of {where_fn}: cannot resolve the annotation {annotation!r} ({exc}); "
                "types used in annotations must be importable from the function's module"
            ) from exc
    return hints


class Tool(Generic[_P, _R]):
    """A client-side tool: its ``ToolSpec`` and the function that runs it.

    Make one with :func:`tool`. Calling the ``Tool`` calls the function, so a
    decorated function stays usable (and testable) as before, with its
    parameter and return types (``Tool[P, R]`` is called like ``Callable[P, R]``).
    """

    def __init__(
        self,
        function: Callable[_P, _R],
        *,
        name: str | None = None,
        description: str | None = None,
        confirmation: Literal["never", "always"] | None = None,
        annotations: Mapping[str, Any] | None = None,
        final: bool = False,
        input_schema: Mapping[str, Any] | None = None,
        on_exception: ToolExceptionPolicy | None = None,
        parallel: bool | None = None,
    ) -> None:
        if not callable(function):
            raise TypeError(f"@tool needs a function, got {function!r}")
        self.function = function
        self.name = name or getattr(function, "__name__", None) or ""
        if not self.name or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.name):
            raise ValueError(f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-'")
        doc = inspect.getdoc(function)
        self.description = description if description is not None else (first_paragraph(doc) if doc else "")
        if confirmation not in (None, "never", "always"):
            raise ValueError(f"confirmation must be 'never' or 'always', not {confirmation!r}")
        self.confirmation = confirmation
        if on_exception not in (None, *TOOL_EXCEPTION_POLICIES):
            raise ValueError(f"on_exception must be 'fail_turn' or 'report', not {on_exception!r}")
        #: What an uncaught exception does (None: the client's ``tool_exceptions``).
        self.on_exception = on_exception
        self.annotations = _annotations_wire(annotations)
        self.final = bool(final)
        if parallel is not None and not isinstance(parallel, bool):
            raise ValueError(f"parallel must be True, False or None, not {parallel!r}")
        #: Whether the server may run its calls beside other calls (None: it
        #: decides by ``annotations``, a read-only tool may; docs/protocol.md §5).
        self.parallel: bool | None = parallel
        self.is_async = inspect.iscoroutinefunction(function)
        self._parameters, self._context_parameter, derived = self._derive(function, doc)
        self.input_schema: dict[str, Any] = dict(input_schema) if input_schema is not None else derived
        functools.update_wrapper(self, function)

    def _derive(
        self, function: Callable[..., Any], doc: str | None
    ) -> tuple[dict[str, Any], str | None, dict[str, Any]]:
        """The parameters' annotations, the ToolContext parameter, and the schema."""
        where_fn = f"tool {self.name!r}"
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{where_fn}: cannot read the signature of {function!r}: {exc}") from exc
        hints = _parameter_hints(function, where_fn)
        docs = _param_docs(doc)
        annotations: dict[str, Any] = {}
        context_parameter: str | None = None
        properties: dict[str, Any] = {}
        required: list[str] = []
        for param in signature.parameters.values():
            where = f"parameter {param.name!r} of {where_fn}"
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"{where}: *args and **kwargs cannot be described to the model; name each parameter")
            if param.kind is param.POSITIONAL_ONLY:
                raise TypeError(f"{where}: positional-only parameters cannot be passed by name")
            if param.name not in hints:
                raise TypeError(f"{where} has no type annotation; the model needs its type")
            hint = hints[param.name]
            if _is_context(hint):
                context_parameter = param.name
                continue
            schema = json_schema(hint, where=where)
            if param.name in docs and "description" not in schema:
                schema = {**schema, "description": docs[param.name]}
            if param.default is param.empty:
                required.append(param.name)
            else:
                try:
                    schema = {**schema, "default": to_json(param.default)}
                except TypeError:
                    pass  # a default with no JSON form stays unadvertised
            annotations[param.name] = hint
            properties[param.name] = schema
        derived: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            derived["required"] = required
        derived["additionalProperties"] = False
        return annotations, context_parameter, derived

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def spec(self) -> dict[str, Any]:
        """The wire ``ToolSpec`` (docs/protocol.md §3)."""
        out: dict[str, Any] = {"name": self.name, "description": self.description, "inputSchema": self.input_schema}
        if self.confirmation is not None:
            out["confirmation"] = self.confirmation
        if self.annotations:
            out["annotations"] = self.annotations
        if self.final:
            out["final"] = True
        if self.parallel is not None:
            out["parallel"] = self.parallel
        return out

    def bind(self, arguments: Any) -> dict[str, Any]:
        """Convert the call's JSON arguments into keyword arguments (ValueError if they do not fit)."""
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise ValueError(f"arguments must be an object, got {arguments!r:.80}")
        unknown = sorted(set(arguments) - set(self._parameters))
        if unknown:
            raise ValueError(f"unexpected argument(s): {', '.join(unknown)}")
        return {
            name: from_json(value, self._parameters[name], where=name)
            for name, value in arguments.items()
        }

    async def invoke(self, arguments: Any, context: ToolContext) -> Any:
        """Run the function with JSON ``arguments``; sync functions run in a worker thread."""
        return await self.run(self.bind(arguments), context)

    async def run(
        self, kwargs: dict[str, Any], context: ToolContext, executor: concurrent.futures.Executor | None = None
    ) -> Any:
        """Run the function with arguments already converted by :meth:`bind`;
        a plain function runs on ``executor`` (default: the loop's)."""
        kwargs = dict(kwargs)
        if self._context_parameter is not None:
            kwargs[self._context_parameter] = context
        # The call's arguments come from the wire (checked by bind), not from P.
        function: Callable[..., Any] = self.function
        if self.is_async:
            return await function(**kwargs)
        call = functools.partial(contextvars.copy_context().run, function, **kwargs)
        result = await asyncio.get_running_loop().run_in_executor(executor, call)
        if inspect.isawaitable(result):
            result = await result
        return result


@overload
def tool(function: Callable[_P, _R], /) -> Tool[_P, _R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    confirmation: Literal["never", "always"] | None = None,
    annotations: Mapping[str, Any] | None = None,
    final: bool = False,
    input_schema: Mapping[str, Any] | None = None,
    on_exception: ToolExceptionPolicy | None = None,
    parallel: bool | None = None,
) -> Callable[[Callable[_P, _R]], Tool[_P, _R]]: ...


def tool(
    function: Callable[_P, _R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    confirmation: Literal["never", "always"] | None = None,
    annotations: Mapping[str, Any] | None = None,
    final: bool = False,
    input_schema: Mapping[str, Any] | None = None,
    on_exception: ToolExceptionPolicy | None = None,
    parallel: bool | None = None,
) -> Tool[_P, _R] | Callable[[Callable[_P, _R]], Tool[_P, _R]]:
    """Make a :class:`Tool` from a function: ``@tool`` or ``@tool(name=..., ...)``.

    ``confirmation="always"`` makes every call wait for the user;
    ``annotations`` takes ``read_only`` / ``destructive`` / ``idempotent``
    (matched by guards); ``final=True`` marks a final-answer tool;
    ``input_schema`` replaces the derived schema; ``on_exception`` is
    ``"fail_turn"`` or ``"report"`` (see the module docs; default: the
    client's ``tool_exceptions``). ``parallel=False`` says the function is
    not safe to run beside other calls: the server runs its calls one at a
    time; ``parallel=True`` lets them run together (default: a tool annotated
    ``read_only`` may; docs/protocol.md §5). Unsupported parameter annotations
    raise :class:`TypeError` naming the parameter.
    """

    def wrap(fn: Callable[_P, _R]) -> Tool[_P, _R]:
        return Tool(fn, name=name, description=description, confirmation=confirmation,
                    annotations=annotations, final=final, input_schema=input_schema,
                    on_exception=on_exception, parallel=parallel)

    if function is not None:
        return wrap(function)
    return wrap


def tool_spec(item: Any) -> tuple[dict[str, Any], Tool[..., Any] | None]:
    """A ``tools=[...]`` item as ``(wire spec, Tool or None)``.

    Accepts a :class:`Tool`, a plain function (wrapped with :func:`tool`), or
    a ``ToolSpec`` dict (sent as is; its calls go to an ``on_request("tool/call")``
    handler, if one is installed).
    """
    if isinstance(item, Tool):
        return item.spec(), item
    if isinstance(item, Mapping):
        if not isinstance(item.get("name"), str):
            raise TypeError(f"a ToolSpec dict needs a 'name': {item!r:.80}")
        return dict(item), None
    if callable(item):
        made = Tool(item)
        return made.spec(), made
    raise TypeError(f"tools items are @tool functions, functions or ToolSpec dicts, not {item!r:.80}")

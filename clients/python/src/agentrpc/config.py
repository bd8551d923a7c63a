"""Pythonic arguments → the wire's SessionConfig, TurnOptions and turn input.

Only names this module knows are translated (``tool_choice`` →
``toolChoice``); the values of open-ended fields (``properties``,
``profiles``, ``blocks``, ``router``, ``egress``) are wire JSON and pass
through untouched, since their keys are the caller's own names.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable, Mapping
from typing import Any, Literal, Required, TypedDict

from .tools import Tool, tool_spec
from .types import LIMITS_WIRE_NAMES, Limits

__all__ = ["scripted", "session_config", "turn_options", "turn_input", "image"]


def scripted(*items: Mapping[str, Any], model: str = "scripted") -> dict[str, Any]:
    """An inline model on the offline *scripted* provider.

    Each item is one model request (a round trip, or a retry of one); every
    key is optional and they combine in this order:

    * ``delayMs``: wait this many milliseconds first;
    * ``reasoning``: reasoning deltas, e.g. ``["thinking"]``;
    * ``text``: text deltas, e.g. ``["Hel", "lo"]``;
    * ``refusal``: refusal deltas;
    * ``toolCalls``: ``[{"name": ..., "arguments": {...}, "id"?: ..., "argumentsText"?: ...}]``;
    * ``usage``: ``{"inputTokens", "outputTokens", "cachedInputTokens", "reasoningTokens"}``;
    * ``error``: ``{"code": "rateLimited", "afterSeconds"?, "httpStatus"?, "message"?}``
      fails the round trip with :class:`~agentrpc.ProviderError`; ``code`` must be
      a known provider code. Transient codes are retried by the server, each
      retry reading the next item; an error item that ends the script keeps
      failing the same way;
    * ``stall``: ``True`` streams the text, then never finishes (for
      cancellation and timeout tests).
    * ``stopReason``: ``"maxTokens"``, ``"contentFilter"`` or ``"refusal"``,
      how the reply ends when it did not end normally.

    The full format is in docs/protocol.md §15, "The scripted provider". It is
    a deterministic stand-in for tests and offline demos, not a language model.
    """
    return {"provider": "scripted", "model": model, "script": [dict(i) for i in items]}


def limits_wire(value: Limits | Mapping[str, Any]) -> dict[str, Any]:
    """A :class:`Limits` or a dict with snake_case or wire keys, as the wire object."""
    if isinstance(value, Limits):
        return value.to_wire()
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        wire_names = set(LIMITS_WIRE_NAMES.values())
        for key, item in value.items():
            if key in LIMITS_WIRE_NAMES:
                out[LIMITS_WIRE_NAMES[key]] = item
            elif key in wire_names:
                out[key] = item
            else:
                raise TypeError(f"unknown limit {key!r}; known: {', '.join(LIMITS_WIRE_NAMES)}")
        return out
    raise TypeError(f"limits must be a Limits or a dict, not {type(value).__name__}")


#: The token and cost limits, the fields of a session's ``budget``.
BUDGET_FIELDS = ("max_input_tokens", "max_output_tokens", "max_total_tokens", "max_cost_usd")


def budget_wire(value: Mapping[str, Any]) -> dict[str, Any]:
    """A session ``budget`` dict with snake_case or wire keys, as the wire object."""
    if not isinstance(value, Mapping):
        raise TypeError(f"budget must be a dict, not {type(value).__name__}")
    names = {key: LIMITS_WIRE_NAMES[key] for key in BUDGET_FIELDS}
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in names:
            out[names[key]] = item
        elif key in names.values():
            out[key] = item
        else:
            raise TypeError(f"unknown budget {key!r}; known: {', '.join(BUDGET_FIELDS)}")
    return out


def tool_choice_wire(value: Any) -> Any:
    """``"auto" | "none" | "required"``, a tool (by :class:`Tool` or name dict) → wire."""
    if isinstance(value, Tool):
        return {"tool": value.name}
    if isinstance(value, (str, Mapping)):
        return dict(value) if isinstance(value, Mapping) else value
    if callable(value) and hasattr(value, "__name__"):
        return {"tool": value.__name__}
    raise TypeError(f"tool_choice must be 'auto', 'none', 'required', a tool or {{'tool': name}}, not {value!r:.80}")


def session_config(
    base: Mapping[str, Any] | None,
    fields: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, Tool[..., Any]]]:
    """Build ``session/create`` params; also return the client-side tools by name.

    ``base`` is a raw wire config (camelCase); ``fields`` are the keyword
    arguments of :meth:`Client.open_session` and win over ``base``.
    """
    params: dict[str, Any] = dict(base or {})
    tools: dict[str, Tool[..., Any]] = {}
    persona = fields.get("persona")
    directives = fields.get("directives")
    for key, value in fields.items():
        if value is None or key in ("persona", "directives"):
            continue
        if key == "tools":
            specs: list[dict[str, Any]] = []
            for item in value:
                spec, made = tool_spec(item)
                if spec["name"] in {s["name"] for s in specs}:
                    raise ValueError(f"two tools are named {spec['name']!r}")
                specs.append(spec)
                if made is not None:
                    tools[made.name] = made
            params["tools"] = specs
        elif key == "limits":
            params["limits"] = limits_wire(value)
        elif key == "budget":
            params["budget"] = budget_wire(value)
        elif key == "tool_choice":
            params["toolChoice"] = tool_choice_wire(value)
        elif key == "role":
            params["role"] = dict(value)
        elif key == "guards":
            params["guards"] = [dict(g) for g in value]
        elif key == "context_sources":
            params["contextSources"] = [
                {"name": s} if isinstance(s, str) else dict(s) for s in value
            ]
        else:
            params[_WIRE_NAMES[key]] = value
    if persona is not None or directives is not None:
        role = dict(params.get("role") or {})
        if persona is not None:
            role["persona"] = persona
        if directives is not None:
            role["directives"] = [directives] if isinstance(directives, str) else list(directives)
        params["role"] = role
    if "tools" in params and not fields.get("tools"):
        # Tools from a raw config dict may be Tool objects too.
        raw_tools = params["tools"]
        specs = []
        for item in raw_tools:
            spec, made = tool_spec(item)
            specs.append(spec)
            if made is not None:
                tools[made.name] = made
        params["tools"] = specs
    return params, tools


class MCPServer(TypedDict, total=False):
    """One MCP server of ``open_session(mcp_servers=...)`` (docs/protocol.md,
    "MCP tool servers"): ``{name, command, args?, env?, cwd?}`` for a stdio
    server, ``{name, type: "http", url, headers?}`` for one over streamable
    HTTP; a plain ``str`` in the list names one configured in agentrpc.json.
    ``env`` and ``headers`` values may name agentrpc's environment variables
    as ``${NAME}``."""

    name: Required[str]
    type: Literal["stdio", "http"]
    command: str
    args: list[str]
    env: dict[str, str]
    cwd: str
    url: str
    headers: dict[str, str]
    startupTimeoutSeconds: float


_WIRE_NAMES = {
    "model": "model",
    "instructions": "instructions",
    "transcript_error_policy": "transcriptErrorPolicy",
    "egress": "egress",
    "properties": "properties",
    "profiles": "profiles",
    "blocks": "blocks",
    "router": "router",
    "store": "store",
    "user_id": "userId",
    "title": "title",
    "ask_user": "askUser",
    "mcp_servers": "mcpServers",
    "compaction": "compaction",
}

_OPTION_NAMES = {
    "temperature": "temperature",
    "max_output_tokens": "maxOutputTokens",
    "reasoning_level": "reasoningLevel",
    "tool_choice": "toolChoice",
    "tool_calling_mode": "toolCallingMode",
    "limits": "limits",
    "model": "model",
}


def turn_options(options: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    """``session/send`` options from a raw dict plus Pythonic keywords (which win)."""
    out: dict[str, Any] = dict(options or {})
    for key, value in kwargs.items():
        if key not in _OPTION_NAMES:
            raise TypeError(f"unknown turn option {key!r}; known: {', '.join(_OPTION_NAMES)}")
        if value is None:
            continue
        if key == "limits":
            out["limits"] = limits_wire(value)
        elif key == "tool_choice":
            out["toolChoice"] = tool_choice_wire(value)
        else:
            out[_OPTION_NAMES[key]] = value
    return out or None


_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image(value: Any) -> dict[str, Any]:
    """One image attachment as the wire's ``{path}``, ``{url}`` or ``{data, mimeType}``.

    A ``str`` starting with ``http://``, ``https://`` or ``data:`` is a URL;
    any other ``str`` or path-like is a file path, made absolute here because
    the server may run in another directory; ``bytes`` are sent inline (PNG,
    JPEG, GIF and WebP are recognised); a dict is passed as is.
    """
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        mime = next((m for magic, m in _MAGIC if data.startswith(magic)), None)
        if mime is None and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            mime = "image/webp"
        if mime is None:
            raise ValueError("image bytes are not PNG, JPEG, GIF or WebP; pass {'data': ..., 'mimeType': ...}")
        return {"data": base64.b64encode(data).decode("ascii"), "mimeType": mime}
    if isinstance(value, str) and value.startswith(("http://", "https://", "data:")):
        return {"url": value}
    if isinstance(value, (str, os.PathLike)):
        return {"path": os.path.abspath(os.fspath(value))}
    raise TypeError(f"an image is a path, URL, bytes or dict, not {type(value).__name__}")


def turn_input(value: str | Mapping[str, Any], images: Iterable[Any] | None) -> Any:
    """The wire ``input``: a bare string when there are no images, else ``{text, images}``."""
    if isinstance(value, Mapping):
        obj = dict(value)
        if images is not None:
            obj["images"] = [*obj.get("images", []), *(image(i) for i in images)]
        return obj
    if not isinstance(value, str):
        raise TypeError(f"input must be a str or {{text, images?}}, not {type(value).__name__}")
    if images is None:
        return value
    return {"text": value, "images": [image(i) for i in images]}

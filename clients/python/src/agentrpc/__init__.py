"""Python client for agentrpc, a JSON-RPC 2.0 agent server driven over stdio.

>>> from agentrpc import Client, tool, scripted
>>> @tool
... def get_weather(city: str) -> dict:
...     "Current weather for a city."
...     return {"city": city, "celsius": 18}
>>> async def main():                                   # doctest: +SKIP
...     async with Client.spawn() as client:
...         session = await client.open_session(model="gpt", tools=[get_weather])
...         result = await session.send("Weather in Paris?")
...         print(result.text)

:mod:`agentrpc.sync` has the same API, blocking, for scripts.
"""

from . import ops
from ._version import __version__
from .client import (
    DEFAULT,
    DEFAULT_CAPABILITIES,
    PROTOCOL_VERSION,
    AskUserHandler,
    Client,
    ConfirmHandler,
    JSONObject,
    Notification,
    NotificationCallback,
    NotificationStream,
    RequestHandler,
)
from .config import scripted
from .discovery import ENV_VAR, find_binary
from .errors import *  # noqa: F403 - the exception hierarchy is public API
from .errors import __all__ as _errors_all
from .events import *  # noqa: F403 - the event classes are public API
from .events import __all__ as _events_all
from .retry import retry_once
from .schema import from_json, json_schema, to_json
from .session import EventStream, Input, Session, TurnStream
from .tools import Conflict, Denied, Failed, Tool, ToolContext, Undoable, tool
from .types import (
    ApprovalRule,
    ConfirmationCall,
    Decision,
    RewindResult,
    RewindUndo,
    UserQuestion,
    ContextDiagnostic,
    GenerateResult,
    Limits,
    MutationResult,
    PendingConfirmation,
    PropertiesResult,
    SchemaWarning,
    SessionState,
    ToolCall,
    Transcript,
    TurnMessage,
    TurnResult,
    Usage,
)

__all__ = [
    "__version__",
    "DEFAULT",
    "DEFAULT_CAPABILITIES",
    "PROTOCOL_VERSION",
    "Client",
    "ConfirmHandler",
    "JSONObject",
    "Notification",
    "NotificationCallback",
    "NotificationStream",
    "RequestHandler",
    "Session",
    "TurnStream",
    "EventStream",
    "Input",
    "ENV_VAR",
    "find_binary",
    "scripted",
    "ops",
    "retry_once",
    "tool",
    "Tool",
    "ToolContext",
    "Failed",
    "Denied",
    "Conflict",
    "Undoable",
    "json_schema",
    "from_json",
    "to_json",
    "ConfirmationCall",
    "ApprovalRule",
    "Decision",
    "UserQuestion",
    "RewindUndo",
    "RewindResult",
    "AskUserHandler",
    "ContextDiagnostic",
    "GenerateResult",
    "Limits",
    "MutationResult",
    "PendingConfirmation",
    "PropertiesResult",
    "SchemaWarning",
    "SessionState",
    "ToolCall",
    "Transcript",
    "TurnMessage",
    "TurnResult",
    "Usage",
    *_errors_all,
    *_events_all,
]

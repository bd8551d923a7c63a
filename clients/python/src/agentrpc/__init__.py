"""Asyncio client for agentrpc, a JSON-RPC 2.0 agent server driven over stdio.

>>> async with Client.spawn() as client:           # doctest: +SKIP
...     session_id = await client.create_session(model="gpt")
...     state = await client.get_state(session_id)
"""

from ._version import __version__
from .client import (
    DEFAULT,
    DEFAULT_CAPABILITIES,
    PROTOCOL_VERSION,
    Client,
    JSONObject,
    Notification,
    NotificationCallback,
    NotificationStream,
    RequestHandler,
)
from .discovery import ENV_VAR, find_binary
from .session import Input, Session
from .errors import *  # noqa: F403 - the exception hierarchy is public API
from .errors import __all__ as _errors_all

__all__ = [
    "__version__",
    "DEFAULT",
    "DEFAULT_CAPABILITIES",
    "PROTOCOL_VERSION",
    "Client",
    "JSONObject",
    "Notification",
    "NotificationCallback",
    "NotificationStream",
    "RequestHandler",
    "Session",
    "Input",
    "ENV_VAR",
    "find_binary",
    *_errors_all,
]

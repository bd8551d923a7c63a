"""Following a provider error's ``retryGuidance`` once (docs/protocol.md §13).

The server already retries transient errors that happen before any output
(docs/turns.md); what reaches the client is an error it could not retry
itself, e.g. one that struck mid-answer, or one that needs fresh credentials.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .errors import ProviderError

__all__ = ["retry_once", "RefreshAuth"]

_log = logging.getLogger("agentrpc.retry")
_T = TypeVar("_T")

#: Called before retrying a ``refreshAuthThenRetry`` error; may be async.
RefreshAuth = Callable[[], "Any | Awaitable[Any]"]


async def retry_once(
    attempt: Callable[[], Awaitable[_T]],
    *,
    refresh_auth: RefreshAuth | None = None,
    max_delay: float | None = 60.0,
) -> _T:
    """Run ``attempt()``; on a :class:`~agentrpc.ProviderError`, follow its guidance once.

    * ``retryWithBackoff``: sleep ``after_seconds`` (1 if absent, capped at
      ``max_delay``), then call ``attempt()`` again;
    * ``refreshAuthThenRetry``: await ``refresh_auth()`` if given, then call
      ``attempt()`` again;
    * ``none``, or any other error: re-raise.

    ``attempt`` must make a fresh call each time, e.g.
    ``lambda: session.send("hi")``: a coroutine can only be awaited once. The
    second attempt's error, if any, propagates. Note that under the default
    ``keepCompleted`` policy the failed turn's prompt stays in the
    transcript, so the retried send appends it again (docs/turns.md).
    """
    try:
        return await attempt()
    except ProviderError as exc:
        guidance = exc.retry_guidance
        if guidance.kind == "retryWithBackoff":
            delay = guidance.after_seconds if guidance.after_seconds is not None else 1.0
            if max_delay is not None:
                delay = min(delay, max_delay)
            _log.info("provider error %s: retrying once after %.3gs", exc.provider_code, delay)
            await asyncio.sleep(max(0.0, delay))
        elif guidance.kind == "refreshAuthThenRetry":
            _log.info("provider error %s: refreshing credentials, then retrying once", exc.provider_code)
            if refresh_auth is not None:
                outcome = refresh_auth()
                if inspect.isawaitable(outcome):
                    await outcome
        else:
            raise
    return await attempt()

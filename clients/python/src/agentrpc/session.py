"""A thin handle on one server session.

:class:`Session` only fills in ``sessionId`` and names the params of the
``session/*`` methods (PROTOCOL.md §3); results are the server's plain dicts.
Richer turn streaming and tool registration build on top of it later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import Client, JSONObject, NotificationStream, _Default

__all__ = ["Session", "Input"]

#: A turn input: a bare string, or ``{text, images?}``.
Input = str | Mapping[str, Any]


class Session:
    """One session on a :class:`~agentrpc.Client`.

    Get one from :meth:`Client.open_session`, :meth:`Client.resume_session`
    or :meth:`Client.session`. ``async with`` closes (unloads) it on exit.
    """

    def __init__(
        self,
        client: Client,
        session_id: str,
        *,
        revision: int | None = None,
        active_profile: Any = None,
    ) -> None:
        self.client = client
        self.id = session_id
        #: Revision reported when the session was created or resumed.
        self.revision = revision
        #: Active profile reported when the session was created or resumed.
        self.active_profile = active_profile

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if not self.client.closed:
            await self.close()

    def _params(self, **extra: Any) -> JSONObject:
        params: JSONObject = {"sessionId": self.id}
        params.update({key: value for key, value in extra.items() if value is not None})
        return params

    # -- turns ---------------------------------------------------------------

    async def send(
        self,
        input: Input,
        *,
        options: Mapping[str, Any] | None = None,
        timeout: float | None | _Default = None,
    ) -> JSONObject:
        """``session/send``: run one turn; returns the ``TurnResult`` when it ends.

        ``timeout=None`` (the default here) waits as long as the turn runs,
        since turns routinely outlast a request timeout; cancelling the
        awaiting task withdraws the turn.
        """
        params = self._params(input=_input(input), options=_dict_or_none(options))
        result: JSONObject = await self.client.request("session/send", params, timeout=timeout)
        return result

    async def generate(
        self,
        input: Input,
        schema: Mapping[str, Any],
        *,
        strict: bool | None = None,
        options: Mapping[str, Any] | None = None,
        timeout: float | None | _Default = None,
    ) -> JSONObject:
        """``session/generate``: structured output; ``{value, turnId, usage}``."""
        params = self._params(
            input=_input(input), schema=dict(schema), strict=strict, options=_dict_or_none(options)
        )
        result: JSONObject = await self.client.request("session/generate", params, timeout=timeout)
        return result

    async def cancel(self) -> bool:
        """``session/cancel``: cooperative cancel; True if a turn was running."""
        result = await self.client.request("session/cancel", self._params())
        return bool(isinstance(result, dict) and result.get("wasRunning"))

    async def confirm(self, call_id: str, decision: str, reason: str | None = None) -> None:
        """``session/confirm``: answer a pending confirmation (``"approve"``/``"deny"``)."""
        await self.client.request(
            "session/confirm", self._params(callId=call_id, decision=decision, reason=reason)
        )

    async def approve(self, call_id: str, reason: str | None = None) -> None:
        """Approve the pending call ``call_id``."""
        await self.confirm(call_id, "approve", reason)

    async def deny(self, call_id: str, reason: str | None = None) -> None:
        """Deny the pending call ``call_id``."""
        await self.confirm(call_id, "deny", reason)

    # -- state ---------------------------------------------------------------

    async def state(self) -> JSONObject:
        """``session/getState``: the SessionState (PROTOCOL.md §5)."""
        result: JSONObject = await self.client.request("session/getState", self._params())
        return result

    async def transcript(self) -> JSONObject:
        """``session/getTranscript``: ``{revision, instructions, entries}``."""
        result: JSONObject = await self.client.request("session/getTranscript", self._params())
        return result

    async def mutate_transcript(
        self, operations: Sequence[Mapping[str, Any]], *, expected_revision: int | None = None
    ) -> JSONObject:
        """``session/mutateTranscript``: all-or-nothing edits; ``{revision, entryCount}``."""
        params = self._params(
            operations=[dict(op) for op in operations], expectedRevision=expected_revision
        )
        result: JSONObject = await self.client.request("session/mutateTranscript", params)
        return result

    async def set_properties(
        self, set: Mapping[str, Any] | None = None, remove: Sequence[str] | None = None
    ) -> JSONObject:
        """``session/setProperties``: ``{properties, activeProfile}`` afterwards."""
        params = self._params(
            set=_dict_or_none(set), remove=list(remove) if remove is not None else None
        )
        result: JSONObject = await self.client.request("session/setProperties", params)
        return result

    # -- lifetime ------------------------------------------------------------

    async def close(self) -> None:
        """``session/close``: cancel a running turn and unload the session."""
        await self.client.request("session/close", self._params())

    async def delete(self) -> None:
        """``session/delete``: remove the session from the store."""
        await self.client.request("session/delete", self._params())

    def events(self) -> NotificationStream:
        """``session/event`` notifications of this session, as they arrive.

        Subscribes immediately, so create it before :meth:`send` to see the
        whole turn. Each item's ``params`` is ``{sessionId, turnId?, seq, event}``.
        """
        session_id = self.id
        return self.client.notifications(
            "session/event",
            predicate=lambda note: isinstance(note.params, dict) and note.params.get("sessionId") == session_id,
        )


def _input(value: Input) -> Any:
    return value if isinstance(value, str) else dict(value)


def _dict_or_none(value: Mapping[str, Any] | None) -> JSONObject | None:
    return dict(value) if value is not None else None

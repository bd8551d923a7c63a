"""A handle on one server session: turns, streaming, tools, state and edits.

Get one from :meth:`Client.open_session` (which also registers the session's
``@tool`` functions), :meth:`Client.resume_session` or :meth:`Client.session`.
Results are typed (:mod:`agentrpc.types`, :mod:`agentrpc.events`); the
``Client`` keeps the plain-dict methods for anything lower level.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from . import ops
from .config import turn_input, turn_options
from .errors import ToolExecutorError
from .events import Event, TextDelta, TurnEnded, parse_event
from .retry import RefreshAuth, retry_once
from .schema import from_json, json_schema
from .tools import Tool, tool_spec
from .types import (
    DECISIONS,
    ApprovalRule,
    ContextDiagnostic,
    Decision,
    GenerateResult,
    InterruptedTurn,
    ParkedTurn,
    RewindResult,
    MutationResult,
    PropertiesResult,
    SessionState,
    Transcript,
    TurnResult,
    Usage,
)

if TYPE_CHECKING:
    from .client import Client, ConfirmHandler, JSONObject, Notification, NotificationStream, _Default

__all__ = ["Session", "Input", "TurnStream", "EventStream"]

_log = logging.getLogger("agentrpc.session")
_T = TypeVar("_T")

#: A turn input: a bare string, or ``{text, images?}``.
Input = str | Mapping[str, Any]

# Markers in a TurnStream's queue, after the events.
_SEND_DONE = object()
_CLOSED = object()


class Session:
    """One session on a :class:`~agentrpc.Client`.

    ``async with`` closes (unloads) it on exit. Methods that run a turn
    (:meth:`send`, :meth:`stream`, :meth:`generate`) wait as long as the turn
    runs by default; cancelling the awaiting task withdraws the turn
    (``$/cancelRequest``), and :meth:`cancel` asks it to stop cooperatively.
    """

    def __init__(
        self,
        client: Client,
        session_id: str,
        *,
        revision: int | None = None,
        active_profile: Any = None,
        tools: Mapping[str, Tool[..., Any]] | None = None,
    ) -> None:
        self.client = client
        self.id = session_id
        #: Revision reported when the session was created or resumed.
        self.revision = revision
        #: Active profile reported when the session was created or resumed.
        self.active_profile = active_profile
        self._tools: dict[str, Tool[..., Any]] = dict(tools or {})
        #: Decides this session's confirmations before the client's ``on_confirm``.
        self.on_confirm: ConfirmHandler | None = None
        # The settling of a turn whose stream was abandoned (left with `break`,
        # dropped, or its task cancelled): the next turn waits for it.
        self._abandoned: asyncio.Task[None] | None = None
        #: Set by ``resume_session`` when the session's last turn was cut by a crash.
        self.interrupted_turn: InterruptedTurn | None = None
        #: Set by ``resume_session``: parts of the stored journal that did not load.
        self.warnings: list[ContextDiagnostic] = []
        #: Set by ``resume_session`` when the session's turn is parked (``onDisconnect: "park"``):
        #: :meth:`continue_turn` goes on with it.
        self.parked: ParkedTurn | None = None

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

    # -- tools -----------------------------------------------------------------

    @property
    def tools(self) -> Mapping[str, Tool[..., Any]]:
        """The client-side tools that answer this session's ``tool/call``, by name."""
        return dict(self._tools)

    def add_tools(self, *tools: Any) -> None:
        """Answer this session's calls of these tools with their functions.

        For a resumed session, or one created from a raw config: the server
        already knows the specs, the client needs the functions.
        """
        for item in tools:
            _, made = tool_spec(item)
            if made is None:
                raise TypeError("add_tools needs @tool functions or plain functions, not ToolSpec dicts")
            self._tools[made.name] = made

    # -- turns -----------------------------------------------------------------

    # `self` is positional-only where any option is a keyword (`**option_kwargs`),
    # so the blocking facade can take these parameters from here (`sync._forwards_to`).
    async def send(
        self,
        /,
        input: Input,
        *,
        images: Iterable[Any] | None = None,
        options: Mapping[str, Any] | None = None,
        timeout: float | None | _Default = None,
        retry: bool = False,
        refresh_auth: RefreshAuth | None = None,
        queue: bool = False,
        **option_kwargs: Any,
    ) -> TurnResult:
        """``session/send``: run one turn and return its :class:`TurnResult`.

        ``images`` are paths, URLs, bytes or wire dicts. Turn options go in as
        keywords (``temperature``, ``max_output_tokens``, ``reasoning_level``,
        ``tool_choice``, ``tool_calling_mode``, ``limits``, ``model``) or as a
        raw ``options`` dict. A failed turn raises its :class:`AgentRPCError`
        subclass; ``retry=True`` follows a provider error's retry guidance
        once (see :func:`agentrpc.retry_once`). ``timeout=None`` (the default
        here) waits as long as the turn runs. ``queue=True`` waits for a running
        turn to end and runs as the next turn instead of raising
        :class:`~agentrpc.AlreadyRunning`; :meth:`cancel` drops queued sends.
        """
        params = self._params(input=turn_input(input, images), options=turn_options(options, option_kwargs),
                              queue=True if queue else None)

        async def once() -> TurnResult:
            return TurnResult.from_wire(await self._turn_request("session/send", params, timeout))

        if retry:
            return await retry_once(once, refresh_auth=refresh_auth)
        return await once()

    async def continue_turn(self, *, timeout: float | None | _Default = None) -> TurnResult:
        """``session/continue``: go on with the parked turn (:attr:`parked`). Its pending
        requests come again (same call ids and ``idempotency_key``, ``inDoubt`` when
        they may have run) and are answered by this client's tools and handlers;
        returns the turn's :class:`TurnResult` as ``send`` would have.
        """
        result = TurnResult.from_wire(await self._turn_request("session/continue", self._params(), timeout))
        self.parked = None
        return result

    def stream(
        self,
        /,
        input: Input,
        *,
        images: Iterable[Any] | None = None,
        options: Mapping[str, Any] | None = None,
        timeout: float | None | _Default = None,
        queue: bool = False,
        **option_kwargs: Any,
    ) -> TurnStream:
        """Run one turn and iterate its events as they arrive.

        ``async for event in session.stream("hi"):`` yields typed events
        (:mod:`agentrpc.events`) and ends after the turn's answer; then
        ``stream.result`` holds the :class:`TurnResult`. If the turn failed,
        the iteration raises the turn's exception once every event before it
        was yielded. The turn starts on the first iteration (or on entering
        ``async with``). Leaving early withdraws the turn: ``break``,
        cancelling the iterating task, or leaving ``async with``; the next
        turn of the session waits until the withdrawn one has ended. A
        stream runs one turn: iterating it again raises :class:`RuntimeError`. ``queue``
        is as for :meth:`send`.
        """
        params = self._params(input=turn_input(input, images), options=turn_options(options, option_kwargs),
                              queue=True if queue else None)
        return TurnStream(self, params, timeout)

    @overload
    async def generate(self, input: Input, schema: type[_T], **kwargs: Any) -> _T: ...

    @overload
    async def generate(self, input: Input, schema: Mapping[str, Any] | Any, **kwargs: Any) -> Any: ...

    async def generate(self, input: Input, schema: Any, **kwargs: Any) -> Any:
        """``session/generate``: structured output, validated by the server.

        ``schema`` is a JSON Schema dict, or a type: a dataclass, a
        ``TypedDict`` or any annotation ``@tool`` supports (``list[str]``...).
        With a type, the value comes back converted (a dataclass instance for
        a dataclass). Same keywords as :meth:`generate_result`.
        """
        return (await self.generate_result(input, schema, **kwargs)).value

    async def generate_result(
        self,
        /,
        input: Input,
        schema: Any,
        *,
        images: Iterable[Any] | None = None,
        strict: bool | None = None,
        options: Mapping[str, Any] | None = None,
        timeout: float | None | _Default = None,
        retry: bool = False,
        refresh_auth: RefreshAuth | None = None,
        **option_kwargs: Any,
    ) -> GenerateResult:
        """Like :meth:`generate`, also returning the turn id and usage."""
        if isinstance(schema, Mapping):
            wire_schema: dict[str, Any] = dict(schema)
            target: Any = None
        else:
            wire_schema = json_schema(schema, where=f"generate schema {getattr(schema, '__name__', schema)!r}")
            target = schema
        params = self._params(
            input=turn_input(input, images), schema=wire_schema, strict=strict,
            options=turn_options(options, option_kwargs),
        )

        async def once() -> GenerateResult:
            raw = await self._turn_request("session/generate", params, timeout)
            obj = raw if isinstance(raw, dict) else {}
            value = obj.get("value")
            converted = from_json(value, target, where="generated value") if target is not None else value
            turn_id = obj.get("turnId")
            return GenerateResult(converted, turn_id if isinstance(turn_id, str) else "",
                                  Usage.from_wire(obj.get("usage")), value)

        if retry:
            return await retry_once(once, refresh_auth=refresh_auth)
        return await once()

    async def _turn_request(self, method: str, params: JSONObject, timeout: float | None | _Default) -> Any:
        abandoned = self._abandoned
        if abandoned is not None and not abandoned.done():
            # Bounded: the abandoned stream's aclose() gives up after its own wait.
            await asyncio.wait({abandoned})
        try:
            return await self.client.request(method, params, timeout=timeout)
        except ToolExecutorError as exc:
            self.client._answers.attach_tool_exception(self.id, exc)
            raise

    async def park(self, *, timeout: float | None | _Default = None) -> ParkedTurn | None:
        """``session/park``: park the running turn at its next wait for the client
        (at once when it waits already). Returns, once it parked, the parked turn
        (also :attr:`parked`), or None when no turn ran or it ended without waiting.
        The turn's ``send`` raises :class:`~agentrpc.Cancelled` (source ``session/park``).
        """
        result = await self.client.request("session/park", self._params(), timeout=timeout)
        parked = result.get("parked") if isinstance(result, dict) else None
        self.parked = ParkedTurn.from_wire(parked) if isinstance(parked, dict) else None
        return self.parked

    async def cancel(self) -> bool:
        """``session/cancel``: stop the running turn at its next checkpoint.

        The turn's ``send`` then raises :class:`~agentrpc.Cancelled`, and so do
        sends waiting in the queue (``queue=True``), which are dropped first.
        Returns True if a turn was running.
        """
        result = await self.client.request("session/cancel", self._params())
        return bool(isinstance(result, dict) and result.get("wasRunning"))

    async def steer(self, input: Input, *, images: Iterable[Any] | None = None,
                    expected_turn_id: str | None = None) -> str:
        """``session/steer``: add input to the running turn; returns its turn id.

        The input joins the transcript at the turn's next checkpoint (before its
        next model request, never mid-stream or mid-tool-call), announced by a
        :class:`~agentrpc.SteeringApplied` event. Raises
        :class:`~agentrpc.NoRunningTurn` when no turn runs (send instead) and
        :class:`~agentrpc.TurnMismatch` when ``expected_turn_id`` is not the
        running turn.
        """
        result = await self.client.request(
            "session/steer", self._params(input=turn_input(input, images), expectedTurnId=expected_turn_id))
        return str(result.get("turnId") or "") if isinstance(result, dict) else ""

    async def confirm(
        self, call_id: str, approve: bool | str | Decision = True, reason: str | None = None, *,
        arguments: Any = None, rule: Mapping[str, Any] | None = None,
    ) -> ApprovalRule | None:
        """``session/confirm``: settle the pending confirmation of ``call_id``.

        ``approve`` is a bool, a :class:`~agentrpc.Decision`, or a wire word
        (``"approve"``, ``"deny"``, ``"approveForSession"``, ``"denyAndStop"``);
        ``reason`` is shown to the model when denying. ``arguments`` approves
        with edited arguments (the server checks them against the tool's schema
        and raises :class:`~agentrpc.InvalidParams` if they do not fit; the call
        still waits). ``rule`` scopes an ``approveForSession`` rule by argument
        patterns. Returns the rule ``approveForSession`` added, else ``None``.
        Raises :class:`~agentrpc.NoPendingConfirmation` if nothing waits for it.
        """
        if isinstance(approve, Decision):
            wire = approve.to_wire()
        else:
            if isinstance(approve, str):
                if approve not in DECISIONS:
                    raise ValueError(f"decision must be one of {', '.join(DECISIONS)}, not {approve!r}")
                decision = approve
            else:
                decision = "approve" if approve else "deny"
            wire = Decision(decision, reason=reason, arguments=arguments,
                            rule=dict(rule) if rule is not None else None).to_wire()
        result = await self.client.request("session/confirm", self._params(callId=call_id, **wire))
        added = result.get("rule") if isinstance(result, dict) else None
        return ApprovalRule.from_wire(added) if isinstance(added, Mapping) else None

    async def approve(self, call_id: str, reason: str | None = None, *, arguments: Any = None) -> None:
        """Approve the pending call ``call_id`` (with edited ``arguments``, when given)."""
        await self.confirm(call_id, True, reason, arguments=arguments)

    async def deny(self, call_id: str, reason: str | None = None) -> None:
        """Deny the pending call ``call_id``."""
        await self.confirm(call_id, False, reason)

    async def approve_for_session(
        self, call_id: str, rule: Mapping[str, Any] | None = None, *, arguments: Any = None,
    ) -> ApprovalRule | None:
        """Approve ``call_id`` and later calls of its tool whose arguments match ``rule``.

        ``rule`` maps argument names to globs (``{"path": "src/*"}``) or exact
        values; without it every later call of the tool is approved. Guards
        still deny first. Returns the rule added.
        """
        return await self.confirm(call_id, "approveForSession", arguments=arguments, rule=rule)

    async def deny_and_stop(self, call_id: str, reason: str | None = None) -> None:
        """Deny ``call_id`` and cancel the turn at once (it raises Cancelled, source "confirmation")."""
        await self.confirm(call_id, "denyAndStop", reason)

    async def set_approval_rules(
        self, add: Iterable[Mapping[str, Any]] = (), remove: Iterable[str] = (),
    ) -> list[ApprovalRule]:
        """``session/setApprovalRules``: remove rules by id, add ``{tool, arguments?}`` rules.

        Returns the rules standing afterwards.
        """
        result = await self.client.request("session/setApprovalRules", self._params(
            add=[dict(rule) for rule in add] or None, remove=list(remove) or None))
        rules = result.get("rules") if isinstance(result, dict) else None
        return [ApprovalRule.from_wire(r) for r in rules or [] if isinstance(r, Mapping)]

    async def rewind(self, *, to_entry_id: str | None = None, turn_id: str | None = None,
                     compaction: str | None = None, undo: bool) -> RewindResult:
        """``session/rewind``: remove everything after ``to_entry_id`` (which stays),
        or turn ``turn_id`` and everything after it; or, with ``compaction`` (a
        ``summary`` entry's id), undo that compaction and change nothing else.

        ``undo`` has no default, as on the wire: whether a rewind also reverts
        what the removed tool calls did is the caller's decision every time.
        With ``undo=True`` the server sends ``tool/undo`` newest first for the removed
        calls' undo records, committed turns included (this client runs the
        ``Undoable`` callables its tools returned). The result lists the undos
        and which failed.
        """
        if sum(point is not None for point in (to_entry_id, turn_id, compaction)) != 1:
            raise ValueError("give exactly one of to_entry_id, turn_id and compaction")
        if not isinstance(undo, bool):
            raise TypeError("undo must be True or False")
        result = await self.client.request(
            "session/rewind", self._params(toEntryId=to_entry_id, turnId=turn_id, compaction=compaction, undo=undo))
        return RewindResult.from_wire(result)

    async def compact(self, *, keep_last: int | None = None, instructions: str | None = None,
                      preview: bool = False) -> JSONObject:
        """``session/compact``: the entries before the last ``keep_last`` are
        summarized by the model into one ``summary`` entry (docs/protocol.md,
        "Compaction"). ``preview=True`` answers the summary and the token
        figures and changes nothing. Returns ``{summary, entriesRemoved,
        tokensBefore, tokensAfter, revision, entryId?}``; undo it with
        ``rewind(compaction=result["entryId"], undo=False)``.
        """
        result = await self.client.request("session/compact", self._params(
            keepLast=keep_last, instructions=instructions, preview=True if preview else None))
        return dict(result) if isinstance(result, Mapping) else {}

    # -- state ---------------------------------------------------------------

    async def state(self) -> SessionState:
        """``session/getState`` (docs/protocol.md §3)."""
        return SessionState.from_wire(await self.client.request("session/getState", self._params()))

    async def prompt(self, server: str, name: str, arguments: Mapping[str, str] | None = None) -> JSONObject:
        """``session/getPrompt``: the prompt ``name`` of the session's MCP server
        ``server`` with ``arguments`` filled in: ``{description?, messages}``."""
        result = await self.client.request("session/getPrompt", self._params(
            server=server, name=name, arguments=dict(arguments) if arguments is not None else None))
        return dict(result) if isinstance(result, Mapping) else {}

    async def media(self, sha256: str) -> JSONObject:
        """``session/getMedia``: an image or audio clip a tool result named (a
        ``toolOutput`` entry's ``media[i]["sha256"]``), whole, as
        ``ToolCallFinished.media`` carried it: ``{type, mimeType, data}``
        (``data`` base64). Raises ``InvalidParams`` for a digest no tool result
        of the session names, or whose bytes are no longer in the store."""
        result = await self.client.request("session/getMedia", self._params(sha256=sha256))
        return dict(result) if isinstance(result, Mapping) else {}

    async def transcript(self) -> Transcript:
        """``session/getTranscript``: entries (wire dicts), instructions, revision."""
        return Transcript.from_wire(await self.client.request("session/getTranscript", self._params()))

    async def mutate_transcript(
        self,
        operations: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        expected_revision: int | None = None,
    ) -> MutationResult:
        """``session/mutateTranscript``: apply operations, all or nothing.

        Build operations with :mod:`agentrpc.ops` (``remove``,
        ``truncate_after``, ``replace``, ``insert``, ``set``); one operation
        or a list. ``expected_revision`` guards against concurrent edits
        (:class:`~agentrpc.RevisionMismatch`).
        """
        ops = [dict(operations)] if isinstance(operations, Mapping) else [dict(op) for op in operations]
        params = self._params(operations=ops, expectedRevision=expected_revision)
        result = await self.client.request("session/mutateTranscript", params)
        obj = result if isinstance(result, dict) else {}
        return MutationResult(int(obj.get("revision") or 0), int(obj.get("entryCount") or 0))

    async def drop_last_turn(self) -> str | None:
        """Remove every entry of the newest turn in the transcript; return its ``turnId``.

        For "drop the last turn and retry": the entries are found by their
        ``turnId`` and removed in one ``mutate_transcript`` guarded by the
        transcript's revision (:class:`~agentrpc.RevisionMismatch` if it
        changed meanwhile). Returns ``None`` when no entry has a ``turnId``.
        """
        transcript = await self.transcript()
        turn_ids = transcript.turn_ids
        if not turn_ids:
            return None
        last = turn_ids[-1]
        ids = [str(entry.get("id")) for entry in transcript.of_turn(last)]
        await self.mutate_transcript(ops.remove(ids), expected_revision=transcript.revision)
        return last

    async def set_properties(
        self, set: Mapping[str, Any] | None = None, remove: Sequence[str] | None = None
    ) -> PropertiesResult:
        """``session/setProperties``: set and remove session properties."""
        params = self._params(
            set=dict(set) if set is not None else None, remove=list(remove) if remove is not None else None
        )
        result = await self.client.request("session/setProperties", params)
        obj = result if isinstance(result, dict) else {}
        properties = obj.get("properties")
        profile = obj.get("activeProfile")
        return PropertiesResult(dict(properties) if isinstance(properties, dict) else {},
                                profile if isinstance(profile, str) else None)

    # -- lifetime ------------------------------------------------------------

    async def fork(self, at_entry_id: str | None = None) -> Session:
        """``session/fork``: a new session (own id, own journal) with this one's
        configuration and properties and a copy of its transcript up to and
        including ``at_entry_id`` (default: all). Refused with ``SessionBusy``
        while a turn runs."""
        return await self.client.fork_session(self.id, at_entry_id)

    async def close(self) -> None:
        """``session/close``: cancel a running turn and unload the session."""
        await self.client.close_session(self.id)

    async def delete(self) -> None:
        """``session/delete``: remove the session from the store."""
        await self.client.delete_session(self.id)

    # -- events --------------------------------------------------------------

    def events(self) -> NotificationStream:
        """This session's raw ``session/event`` notifications, as they arrive.

        Subscribes immediately, so create it before :meth:`send` to see the
        whole turn. Each item's ``params`` is ``{sessionId, turnId?, seq, event}``.
        :meth:`watch` gives the same events typed.
        """
        session_id = self.id
        return self.client.notifications(
            "session/event",
            predicate=lambda note: isinstance(note.params, dict) and note.params.get("sessionId") == session_id,
        )

    def watch(self) -> EventStream:
        """This session's events, typed, from now until :meth:`EventStream.close`.

        For observing turns that another task runs with :meth:`send`.
        """
        return EventStream(self.events())


class EventStream(AsyncIterator[Event]):
    """Typed events of one session (see :meth:`Session.watch`)."""

    def __init__(self, notes: NotificationStream) -> None:
        self._notes = notes

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> Event:
        note = await self._notes.__anext__()
        return parse_event(note.params)

    def close(self) -> None:
        """Stop receiving; iteration ends after what is already queued."""
        self._notes.close()

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


#: Why a second ``async for`` over a TurnStream raises instead of yielding nothing.
STREAM_CONSUMED = (
    "this TurnStream is finished: a stream runs one turn and yields its events once "
    "(its result is in stream.result); call session.stream() again for another turn"
)


class TurnStream(AsyncIterator[Event]):
    """One turn's events, then its result (see :meth:`Session.stream`).

    ``result`` holds the :class:`TurnResult` once iteration ended normally;
    ``error`` the exception a failed turn raised; ``text`` the text streamed
    so far. Events are those of the session from the stream's creation until
    the turn's answer.

    Leaving the iteration early withdraws the turn (``$/cancelRequest``): a
    ``break`` (the stream is then dropped and its finaliser withdraws),
    cancelling the task that iterates, or leaving ``async with``. The
    session's next turn waits until the withdrawn one has ended. Iterating a
    finished stream again raises :class:`RuntimeError`.
    """

    def __init__(self, session: Session, params: JSONObject, timeout: float | None | _Default) -> None:
        self.session = session
        self._client = session.client
        self._params = params
        self._timeout = timeout
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task: asyncio.Task[Any] | None = None
        self._finished = False
        self._raised = False
        # Iteration ended once (StopAsyncIteration or the turn's error raised), or aclose().
        self._exhausted = False
        # Whether this turn's TurnEnded was seen (aclose waits for it).
        self._turn_ended = False
        # The one aclose() at work, shared by every path that closes the stream.
        self._closer: asyncio.Task[None] | None = None
        #: The turn's result, once the iteration ended normally.
        self.result: TurnResult | None = None
        #: The exception the turn ended with, if it failed.
        self.error: BaseException | None = None
        #: Text deltas seen so far, joined (the current round trip's and earlier ones).
        self.text = ""
        # Subscribe now, before the turn can start, so no event is missed.
        self._client._streams.add(self)
        if self._client.closed:
            self._end()

    # The client's notification fan-out calls these (see NotificationStream).
    def _push(self, note: Notification) -> bool:
        params = note.params
        if note.method == "session/event" and isinstance(params, dict) and params.get("sessionId") == self.session.id:
            self._queue.put_nowait(parse_event(params))
            return True
        return False

    def _end(self) -> None:
        self._queue.put_nowait(_CLOSED)
        self._client._streams.discard(self)

    @property
    def started(self) -> bool:
        """True once the turn was sent."""
        return self._task is not None

    @property
    def done(self) -> bool:
        """True once iteration is over (the turn's answer and every event before it)."""
        return self._finished

    def _start(self) -> None:
        if self._task is not None:
            return
        self._task = asyncio.create_task(
            self.session._turn_request("session/send", self._params, self._timeout),
            name=f"agentrpc-stream-{self.session.id}",
        )
        # A weak reference: the running send must not keep an abandoned stream
        # alive, or its finaliser could never withdraw the turn.
        stream = weakref.ref(self)

        def on_sent(task: asyncio.Task[Any]) -> None:
            alive = stream()
            if alive is not None:
                alive._on_sent(task)
            elif not task.cancelled():
                task.exception()  # retrieved so that it is never logged as "never retrieved"

        self._task.add_done_callback(on_sent)

    def _on_sent(self, task: asyncio.Task[Any]) -> None:
        if not task.cancelled():
            # Everything the server wrote before its answer is already queued
            # (the reader handles lines in order), so the subscription can end.
            # A withdrawn turn still ends later; aclose() waits for that.
            self._client._streams.discard(self)
            task.exception()  # retrieved here so an unconsumed stream never logs "never retrieved"
        self._queue.put_nowait(_SEND_DONE)

    def _settle(self) -> None:
        self._finished = True
        task = self._task
        if task is None:
            return
        if task.cancelled():
            self.error = asyncio.CancelledError()
        elif task.exception() is not None:
            self.error = task.exception()
        else:
            self.result = TurnResult.from_wire(task.result())

    def __aiter__(self) -> TurnStream:
        if self._exhausted:
            raise RuntimeError(STREAM_CONSUMED)
        return self

    async def __anext__(self) -> Event:
        if self._finished:
            self._exhausted = True
            if self.error is not None and not self._raised:
                self._raised = True
                raise self.error
            raise StopAsyncIteration
        self._start()
        while True:
            try:
                item = await self._queue.get()
            except asyncio.CancelledError:
                # The iterating task was cancelled: nobody will read this turn.
                self._abandon()
                raise
            if isinstance(item, Event):
                if isinstance(item, TextDelta):
                    self.text += item.delta
                elif isinstance(item, TurnEnded):
                    self._turn_ended = True
                return item
            if item is _CLOSED and self._task is not None and not self._task.done():
                continue  # the send fails with TransportClosed in a moment
            self._settle()
            self._exhausted = True
            if self.error is not None:
                self._raised = True
                raise self.error
            raise StopAsyncIteration

    async def get_result(self) -> TurnResult:
        """Consume the remaining events and return the result (or raise the turn's error)."""
        if not self._exhausted:
            try:
                while True:
                    await self.__anext__()
            except StopAsyncIteration:
                pass
        if self.error is not None:
            raise self.error
        if self.result is None:
            raise RuntimeError("the stream was closed before its turn answered")
        return self.result

    def _withdrawing(self) -> bool:
        """True while the turn was sent and has not answered: closing must withdraw it."""
        return self._task is not None and not self._task.done() and not self._finished

    def _abandon(self) -> None:
        """Withdraw the turn from code that cannot await (a finaliser, a cancelled task).

        The close runs as a task; the session's next turn waits for it, so it
        never meets ``alreadyRunning``.
        """
        task = self._task
        if self._closer is not None or task is None or not self._withdrawing():
            return
        loop = task.get_loop()
        if loop.is_closed():
            return
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None

        def begin() -> None:
            if self._closer is None:
                self._closer = loop.create_task(self._close(10.0), name=f"agentrpc-withdraw-{self.session.id}")
                self.session._abandoned = self._closer

        if current is loop:
            begin()  # at once: a `send` right after `break` must see it
        else:
            # Dropped on another thread (the sync facade): hand it to the loop,
            # ahead of any call that thread makes next.
            loop.call_soon_threadsafe(begin)

    def __del__(self) -> None:
        if getattr(self, "_closer", 1) is None and self._withdrawing():
            self._abandon()

    async def aclose(self, *, wait: float | None = 10.0) -> None:
        """Stop iterating; withdraw the turn if it still runs (``$/cancelRequest``).

        Then wait (up to ``wait`` seconds) until the server reports the turn
        ended, so the session accepts the next ``send`` at once.
        """
        if self._closer is None:
            self._closer = asyncio.create_task(self._close(wait), name=f"agentrpc-withdraw-{self.session.id}")
        # wait() rather than await: a cancellation of the caller still raises
        # here, while the close itself carries on for the next turn's sake.
        await asyncio.wait({self._closer})

    async def _close(self, wait: float | None) -> None:
        task = self._task
        withdrawn = task is not None and not task.done()
        if withdrawn:
            assert task is not None
            task.cancel()
            # wait() rather than await: the task's own outcome must not be
            # raised here.
            await asyncio.wait({task})
        if not self._finished:
            self._settle()
            self._raised = True
        self._exhausted = True
        if withdrawn and not self._turn_ended and not self._client.closed:
            try:
                async with asyncio.timeout(wait):
                    await self._wait_turn_ended()
            except TimeoutError:
                _log.warning("session %s: the withdrawn turn did not end within %ss", self.session.id, wait)
            except Exception as exc:  # e.g. the connection closed meanwhile
                _log.debug("session %s: waiting for the withdrawn turn failed: %s", self.session.id, exc)
        self._client._streams.discard(self)

    async def _wait_turn_ended(self) -> None:
        seen_start = False
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, TurnEnded) or item is _CLOSED:
                return
            seen_start = seen_start or isinstance(item, Event) and item.type == "turnStarted"
        if not seen_start and not (await self.session.state()).is_running:
            return  # the turn never started, or already ended
        while True:
            item = await self._queue.get()
            if isinstance(item, TurnEnded) or item is _CLOSED:
                return

    async def __aenter__(self) -> TurnStream:
        self._start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self._finished or self._closer is not None:
            await self.aclose()

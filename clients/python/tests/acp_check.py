"""Checks that every message ``agentrpc acp`` writes is valid ACP: each frame is
validated against the ACP JSON Schema (``acp_schema/``) by what it is — a
request's or notification's params by its method, an answer by the method of
the request it answers, an error as ``Error`` — and stricter than the schema
where the clients people use are: ``rawOutput`` is always an object (Toad
refuses anything else), and nothing is sent that the editor did not declare
(``fs/*`` without ``fs``, ``terminal/*`` without ``terminal``)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource

SCHEMA_PATH = Path(__file__).parent / "acp_schema" / "schema.unstable.json"

#: What the agent may send the editor: method -> the schema definition of its params.
AGENT_TO_CLIENT = {
    "session/update": "SessionNotification",
    "session/request_permission": "RequestPermissionRequest",
    "fs/read_text_file": "ReadTextFileRequest",
    "fs/write_text_file": "WriteTextFileRequest",
    "terminal/create": "CreateTerminalRequest",
    "terminal/output": "TerminalOutputRequest",
    "terminal/release": "ReleaseTerminalRequest",
    "terminal/wait_for_exit": "WaitForTerminalExitRequest",
    "terminal/kill": "KillTerminalRequest",
    "$/cancel_request": "CancelRequestNotification",
    "elicitation/create": "CreateElicitationRequest",
}

#: The editor's requests: method -> the definition of the agent's answer.
ANSWERS = {
    "initialize": "InitializeResponse",
    "authenticate": "AuthenticateResponse",
    "session/new": "NewSessionResponse",
    "session/load": "LoadSessionResponse",
    "session/resume": "ResumeSessionResponse",
    "session/fork": "ForkSessionResponse",
    "session/list": "ListSessionsResponse",
    "session/close": "CloseSessionResponse",
    "session/delete": "DeleteSessionResponse",
    "session/set_mode": "SetSessionModeResponse",
    "session/set_config_option": "SetSessionConfigOptionResponse",
    "session/prompt": "PromptResponse",
}

#: Requests outside the schema, and what their answer must be: `session/cancel` sent
#: as a request (answered null); `session/set_model`, the unstable method the schema
#: dropped and older SDKs still call (answered `{}`).
OFF_SCHEMA_ANSWERS: dict[str, Any] = {"session/cancel": None, "session/set_model": {}}


@cache
def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


@cache
def _validator(definition: str) -> jsonschema.protocols.Validator:
    schema = _schema()
    registry: Registry = Registry().with_resource("urn:acp", Resource.from_contents(schema))
    subschema = {"$schema": schema["$schema"], "$ref": f"urn:acp#/$defs/{definition}"}
    return jsonschema.Draft202012Validator(subschema, registry=registry)


def problems_with(definition: str, value: Any) -> list[str]:
    """What makes `value` invalid as the schema's `definition` (empty when valid)."""
    return [f"{definition} at /{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in _validator(definition).iter_errors(value)]


class ACPFrames:
    """Feed it every message of a connection (``sent`` by the editor, ``received`` from
    the agent); ``problems`` lists every frame of the agent that is not valid ACP."""

    def __init__(self, capabilities: dict[str, Any] | None = None) -> None:
        self.problems: list[str] = []
        self.pending: dict[Any, str] = {}
        caps = capabilities or {}
        fs = caps.get("fs") or {}
        self.may_read = bool(fs.get("readTextFile"))
        self.may_write = bool(fs.get("writeTextFile"))
        self.may_run = bool(caps.get("terminal"))
        self.may_elicit = (caps.get("elicitation") or {}).get("form") is not None
        self.count = 0

    def sent(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            self.pending[message["id"]] = message["method"]
        if message.get("method") == "initialize":
            caps = (message.get("params") or {}).get("clientCapabilities") or {}
            fs = caps.get("fs") or {}
            self.may_read, self.may_write = bool(fs.get("readTextFile")), bool(fs.get("writeTextFile"))
            self.may_run = bool(caps.get("terminal"))
            self.may_elicit = (caps.get("elicitation") or {}).get("form") is not None

    def received(self, message: dict[str, Any]) -> None:
        self.count += 1
        if message.get("jsonrpc") != "2.0":
            self.problems.append(f"not JSON-RPC 2.0: {message}")
        method = message.get("method")
        if method is not None:
            self._check_call(method, message)
        elif "id" in message:
            self._check_answer(message)
        else:
            self.problems.append(f"neither a request, a notification nor an answer: {message}")

    def _check_call(self, method: str, message: dict[str, Any]) -> None:
        definition = AGENT_TO_CLIENT.get(method)
        if definition is None:
            self.problems.append(f"a method the editor side does not have: {method}")
            return
        undeclared = ((method == "fs/read_text_file" and not self.may_read) or (method == "fs/write_text_file" and not self.may_write)
                      or (method.startswith("terminal/") and not self.may_run) or (method == "elicitation/create" and not self.may_elicit))
        if undeclared:
            self.problems.append(f"{method} sent to an editor that did not declare it: {message}")
        self.problems += [f"{method}: {p}" for p in problems_with(definition, message.get("params"))]
        if method == "session/update":
            update = (message.get("params") or {}).get("update") or {}
            if "rawOutput" in update and not isinstance(update["rawOutput"], dict):
                self.problems.append(f"rawOutput is not an object: {update}")

    def _check_answer(self, message: dict[str, Any]) -> None:
        method = self.pending.pop(message["id"], None)
        if "error" in message:
            self.problems += [f"error answer to {method}: {p}" for p in problems_with("Error", message["error"])]
            data = message["error"].get("data")
            if not (isinstance(data, dict) and isinstance(data.get("details"), str) and data["details"]):
                self.problems.append(f"an error without its human text in data.details: {message}")
            return
        if method is None:
            self.problems.append(f"an answer to no request of the editor: {message}")
        elif method in OFF_SCHEMA_ANSWERS:
            if message.get("result") != OFF_SCHEMA_ANSWERS[method]:
                self.problems.append(f"{method} answered {message.get('result')!r}")
        elif method in ANSWERS:
            self.problems += [f"{method} answer: {p}" for p in problems_with(ANSWERS[method], message.get("result"))]
        else:
            self.problems.append(f"an answer to {method}, which ACP does not have")

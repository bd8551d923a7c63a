"""Decoding error answers into the exception hierarchy (docs/protocol.md §13)."""

from __future__ import annotations

from typing import Any

import pytest

import agentrpc
from agentrpc import AgentRPCError, error_class_for, error_from_wire

KINDS_BY_CODE: dict[int, list[str]] = {
    -32700: ["parseError"],
    -32600: ["invalidRequest", "messageTooLarge"],
    -32601: ["methodNotFound"],
    -32602: ["invalidParams", "invalidTranscript", "invalidConfiguration"],
    -32603: ["internalError"],
    -32002: ["notInitialized"],
    -32800: ["cancelled"],
    -32010: ["sessionNotFound"],
    -32011: ["alreadyRunning"],
    -32012: ["sessionBusy"],
    -32013: ["revisionMismatch"],
    -32014: ["noPendingConfirmation"],
    -32020: ["maxToolCallsExceeded"],
    -32021: ["maxRoundTripsExceeded"],
    -32022: ["wallClockTimeoutExceeded"],
    -32030: ["toolChoiceUnsupported"],
    -32031: ["toolChoiceNotHonored"],
    -32040: ["egressRefused"],
    -32041: ["unreadableImageAttachment"],
    -32050: ["providerError"],
    -32051: ["providerContractViolation"],
    -32060: ["toolExecutorError"],
    -32061: ["hookError"],
    -32070: ["structuredOutput"],
    -32001: ["overloaded"],
}


@pytest.mark.parametrize(
    ("code", "kind"), [(code, kind) for code, kinds in KINDS_BY_CODE.items() for kind in kinds]
)
def test_every_kind_of_the_protocol_has_a_class_with_its_code(code: int, kind: str) -> None:
    cls = error_class_for(code, kind)
    assert cls is not AgentRPCError
    assert cls.KIND == kind and cls.CODE == code
    err = error_from_wire({"code": code, "message": "m", "data": {"kind": kind}})
    assert type(err) is cls
    assert err.to_error_object() == {"code": code, "message": "m", "data": {"kind": kind}}


def test_shared_codes_nest_so_the_broad_class_still_catches() -> None:
    assert issubclass(agentrpc.MessageTooLarge, agentrpc.InvalidRequest)
    assert issubclass(agentrpc.InvalidTranscript, agentrpc.InvalidParams)
    assert issubclass(agentrpc.InvalidConfiguration, agentrpc.InvalidParams)
    for cls in (agentrpc.MaxToolCallsExceeded, agentrpc.MaxRoundTripsExceeded, agentrpc.WallClockTimeoutExceeded):
        assert issubclass(cls, agentrpc.RunLimitExceeded)


def test_subclasses_can_be_raised_with_just_a_message() -> None:
    err = agentrpc.ToolExecutorError("disk full", {"path": "/tmp"})
    assert (err.code, err.kind, err.message) == (-32060, "toolExecutorError", "disk full")
    assert err.to_error_object() == {
        "code": -32060, "message": "disk full", "data": {"path": "/tmp", "kind": "toolExecutorError"}
    }
    assert "toolExecutorError" in str(err) and "-32060" in str(err)
    base = AgentRPCError(-32000, "custom")
    assert base.kind is None and base.to_error_object() == {"code": -32000, "message": "custom"}


@pytest.mark.parametrize("raw", [None, "oops", 5, [], {"message": 3}, {"code": True}, {"code": "x"}])
def test_malformed_error_members_still_decode(raw: Any) -> None:
    err = error_from_wire(raw)
    assert isinstance(err, AgentRPCError)


def test_non_object_data_is_kept() -> None:
    err = error_from_wire({"code": -32000, "message": "m", "data": "details"})
    assert err.data == {"value": "details"}
    assert err.kind is None


def test_field_accessors_tolerate_missing_or_wrong_types() -> None:
    provider = error_from_wire({"code": -32050, "message": "m", "data": {"kind": "providerError"}})
    assert isinstance(provider, agentrpc.ProviderError)
    assert provider.provider == {} and provider.provider_code is None
    assert provider.retry_guidance == agentrpc.RetryGuidance("none", None)
    assert not provider.is_retryable and not provider.requires_user_action
    assert provider.safe_description is None and provider.unsafe_message is None

    auth = error_from_wire({"code": -32050, "message": "m", "data": {"kind": "providerError", "provider": {
        "code": "authExpired", "retryGuidance": {"kind": "refreshAuthThenRetry"},
        "isRetryable": True, "requiresUserAction": False}}})
    assert isinstance(auth, agentrpc.ProviderError)
    assert auth.retry_guidance == agentrpc.RetryGuidance("refreshAuthThenRetry", None)

    limit = error_from_wire({"code": -32022, "message": "m", "data": {"kind": "wallClockTimeoutExceeded",
                                                                     "limit": 1.5}})
    assert isinstance(limit, agentrpc.WallClockTimeoutExceeded) and limit.limit == 1.5
    assert agentrpc.MaxToolCallsExceeded("m", {"limit": True}).limit is None

    egress = error_from_wire({"code": -32040, "message": "m", "data": {"kind": "egressRefused", "rule": "sk-.*"}})
    assert isinstance(egress, agentrpc.EgressRefused) and egress.rule == "sk-.*"
    image = error_from_wire({"code": -32041, "message": "m", "data": {"kind": "unreadableImageAttachment",
                                                                     "index": 2}})
    assert isinstance(image, agentrpc.UnreadableImageAttachment) and image.index == 2
    structured = error_from_wire({"code": -32070, "message": "m", "data": {
        "kind": "structuredOutput", "reason": "schemaViolation", "path": "/items/0"}})
    assert isinstance(structured, agentrpc.StructuredOutputError)
    assert (structured.reason, structured.path) == ("schemaViolation", "/items/0")
    assert structured.turn_id is None and structured.partial_text is None


def test_client_errors_are_distinct_from_error_answers() -> None:
    assert not issubclass(agentrpc.TransportClosed, AgentRPCError)
    assert issubclass(agentrpc.ServerExited, agentrpc.TransportClosed)
    assert issubclass(agentrpc.RequestTimeout, TimeoutError)
    assert issubclass(agentrpc.BinaryNotFound, FileNotFoundError)
    for cls in (AgentRPCError, agentrpc.ClientError):
        assert issubclass(cls, agentrpc.AgentRPCException)
    exited = agentrpc.ServerExited("gone", returncode=3, stderr_tail="panic: x")
    assert "exit code 3" in str(exited) and "panic: x" in str(exited)

"""Provider errors: typed fields, and following their retry guidance once.

The server itself retries transient errors that strike before any output;
what reaches the client carries retryGuidance. session.send(..., retry=True)
(or agentrpc.retry_once) follows it once: retryWithBackoff sleeps
after_seconds then retries, refreshAuthThenRetry calls refresh_auth then
retries, none re-raises.

Runs offline on the built-in *scripted* provider: a deterministic stand-in
that replays the script below, whose errors imitate a cloud API's.
"""

from __future__ import annotations

import asyncio

from agentrpc import Client, ProviderError, retry_once, scripted


def refresh_credentials() -> None:
    print("  (refreshing credentials)")


async def main() -> None:
    print("[scripted provider: a deterministic stand-in, not a language model]")
    async with Client.spawn() as client:
        session = await client.open_session(model=scripted(
            {"text": ["Half an ans"], "error": {"code": "rateLimited", "afterSeconds": 0.05, "httpStatus": 429}},
            {"text": ["Half an ans"], "error": {"code": "rateLimited", "afterSeconds": 0.05, "httpStatus": 429}},
            {"text": ["A whole answer."]},
            {"error": {"code": "authExpired", "httpStatus": 401}},
            {"text": ["Answer after re-login."]},
            {"error": {"code": "contextLengthExceeded", "httpStatus": 400}},
        ))

        try:
            await session.send("first try")
        except ProviderError as error:
            print(f"{error.provider_code} (HTTP {error.http_status}): {error.safe_description}")
            print(f"  guidance {error.retry_guidance}, partial text {error.partial_text!r}")

        # The same failure again, now followed once: after 0.05 s the next round trip answers.
        result = await session.send("with retry", retry=True)
        print("retry=True ->", result.text)

        result = await retry_once(lambda: session.send("expired login"), refresh_auth=refresh_credentials)
        print("retry_once ->", result.text)

        try:
            await session.send("too long", retry=True)
        except ProviderError as error:
            print(f"{error.provider_code}: no retry ({error.retry_guidance.kind}),",
                  "user action needed" if error.requires_user_action else "fix the request")


if __name__ == "__main__":
    asyncio.run(main())

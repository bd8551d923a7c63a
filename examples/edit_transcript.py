"""Editing the conversation between turns: fix, remove, insert, rewind.

Transcript entries are plain dicts with stable ids; agentrpc.ops builds the
operations, and session.mutate_transcript applies a list of them all or
nothing. expected_revision protects against editing a stale view.

Runs offline on the built-in *scripted* provider: a deterministic stand-in
that replays the script below, not a language model.
"""

from __future__ import annotations

import asyncio

from agentrpc import Client, RevisionMismatch, Session, ops, scripted


async def show(session: Session, title: str) -> None:
    transcript = await session.transcript()
    print(f"{title} (revision {transcript.revision}):")
    for entry in transcript:
        print(f"  {entry['id']:>8}  {entry['type']:<8}  {entry.get('text', '')}")


async def main() -> None:
    print("[scripted provider: a deterministic stand-in, not a language model]")
    async with Client.spawn() as client:
        session = await client.open_session(model=scripted(
            {"text": ["The capital of Australia is Sydney."]},
            {"text": ["About 26 million people."]},
            {"text": ["Canberra has about 460,000 people."]},
        ))
        wrong = await session.send("What is the capital of Australia?")
        await session.send("How many people live in Australia?")
        await show(session, "after two turns")

        # Fix the wrong answer in place, and add a note after it: one atomic edit.
        view = await session.transcript()
        await session.mutate_transcript(
            [
                ops.replace(wrong.message.entry_id, ops.response("The capital of Australia is Canberra.",
                                                                 id=wrong.message.entry_id)),
                ops.insert(wrong.message.entry_id, ops.prompt("(Sydney is the largest city.)", id="note")),
            ],
            expected_revision=view.revision,
        )
        await show(session, "fixed, with a note")

        # The old view is stale now: editing from it is refused, nothing changes.
        try:
            await session.mutate_transcript(ops.remove("note"), expected_revision=view.revision)
        except RevisionMismatch as error:
            print("stale edit refused:", error.kind)

        # Rewind to just after the fixed answer, then ask something else.
        await session.mutate_transcript(ops.truncate_after(wrong.message.entry_id))
        await session.send("And how many live in the capital?")
        await show(session, "rewound and continued")


if __name__ == "__main__":
    asyncio.run(main())

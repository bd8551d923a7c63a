"""The blocking API (agentrpc.sync): the same calls without async/await.

Runs offline on the built-in *scripted* provider: a deterministic stand-in
that replays the script below, not a language model.
"""

from agentrpc import TextDelta, scripted, tool
from agentrpc.sync import Client


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


MODEL = scripted(  # or a model name from agentrpc.json, e.g. "gpt"
    {"toolCalls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
    {"text": ["2 + 3 = 5."]},
    {"text": ["Five ", "is ", "odd."]},
)

print("[scripted provider: a deterministic stand-in, not a language model]")
with Client.spawn() as client:
    session = client.open_session(model=MODEL, tools=[add])

    result = session.send("What is 2 + 3?")
    print(result.text, f"({result.tool_calls} tool call)")

    for event in session.stream("Is it odd?"):
        if isinstance(event, TextDelta):
            print(event.delta, end="", flush=True)
    print()
    print("entries:", session.state().entry_count)

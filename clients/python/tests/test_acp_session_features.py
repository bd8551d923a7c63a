"""``agentrpc acp``'s session features through the real binary with the official
ACP SDK: the model's plan as ACP ``plan`` updates (live, on load, in a fork), the
session's title after its first prompt, slash commands advertised after the
answer that makes the session, and ``session/fork``. Every frame is checked
against the ACP schema (acp_check.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from acp.connection import StreamDirection, StreamEvent

from conftest import requires_real  # type: ignore[import-not-found]
from test_acp import WAIT, Editor, agent, scripted  # type: ignore[import-not-found]
from test_acp_workspace import NONE, call, model_tools  # type: ignore[import-not-found]

pytestmark = requires_real

PLAN = [{"content": "Read the module", "priority": "high", "status": "completed"},
        {"content": "Write the test", "priority": "medium", "status": "in_progress"}]


def plans(editor: Editor) -> list[list[dict[str, Any]]]:
    return [u["entries"] for u in editor.updates if u["sessionUpdate"] == "plan"]


def replayed(editor: Editor) -> list[dict[str, Any]]:
    """The updates of a load, without the commands that follow its answer."""
    return [u for u in editor.updates if u["sessionUpdate"] != "available_commands_update"]


async def test_the_plan_is_a_plan_update_live_on_load_and_in_a_fork(tmp_path: Path) -> None:
    store = tmp_path / "store"
    dump = tmp_path / "requests.jsonl"
    config = scripted({"toolCalls": [call("call_p", "update_plan", entries=PLAN)]}, {"text": ["Planned."]})
    first = Editor()
    async with agent(tmp_path, config, first, "--dump-requests", str(dump), store=store) as (conn, cwd):
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), WAIT)
        await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("Plan it")]), WAIT)
    # On by default in acp: the model is offered update_plan, and each call is a plan update.
    assert "update_plan" in model_tools(dump)[0]
    assert plans(first) == [PLAN]
    assert first.statuses("call_p") == ["pending", "in_progress", "completed"]
    assert first.tool_updates("call_p")[0]["title"] == "Update the plan" and first.tool_updates("call_p")[0]["kind"] == "think"
    # A load in another process: the plan comes again, after the conversation.
    second = Editor()
    async with agent(tmp_path, scripted({"text": ["-"]}), second, store=store) as (conn, cwd):
        await asyncio.wait_for(conn.load_session(cwd=cwd, session_id=session.session_id, mcp_servers=[]), WAIT)
        assert replayed(second)[-1] == {"sessionUpdate": "plan", "entries": PLAN}
        forked = await asyncio.wait_for(conn.fork_session(cwd=cwd, session_id=session.session_id, mcp_servers=[]), WAIT)
        assert forked.session_id != session.session_id
        assert [o.id for o in forked.config_options] == ["mode", "model"] and forked.modes.current_mode_id == "ask"
        # The fork is a session of its own that goes on from the same conversation.
        third = Editor()
    async with agent(tmp_path, scripted({"text": ["Forked."]}), third, store=store) as (conn, cwd):
        await asyncio.wait_for(conn.load_session(cwd=cwd, session_id=forked.session_id, mcp_servers=[]), WAIT)
        said = "".join(u["content"]["text"] for u in third.updates if u["sessionUpdate"] == "user_message_chunk")
        assert said == "Plan it" and replayed(third)[-1] == {"sessionUpdate": "plan", "entries": PLAN}
        await asyncio.wait_for(conn.prompt(session_id=forked.session_id, prompt=[text_block("go on")]), WAIT)
    assert third.text().endswith("Forked.")


async def test_acp_tools_can_leave_the_plan_out(tmp_path: Path) -> None:
    dump = tmp_path / "requests.jsonl"
    config = scripted({"text": ["-"]})
    config["acp"] = {"tools": ["read_file", "list_files"]}
    async with agent(tmp_path, config, Editor(), "--dump-requests", str(dump)) as (conn, cwd):
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), WAIT)
        await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("hi")]), WAIT)
    assert model_tools(dump) == [["list_files", "read_file"]]


async def test_a_title_after_the_first_prompt_and_commands_after_the_answer(tmp_path: Path) -> None:
    order: list[str] = []

    def observe(event: StreamEvent) -> None:
        message = event.message
        if event.direction == StreamDirection.INCOMING:
            if "result" in message and isinstance(message["result"], dict) and "sessionId" in message["result"]:
                order.append("answer")
            elif message.get("method") == "session/update":
                order.append(message["params"]["update"]["sessionUpdate"])

    store = tmp_path / "store"
    editor = Editor()
    long_line = "Fix the greeting in src/app.py so that it says Hi instead of Hello, and add a test for it please"
    async with agent(tmp_path, scripted({"text": ["One."]}, {"text": ["Two."]}), editor, store=store, observe=observe) as (conn, cwd):
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), WAIT)
        await editor.wait_for(lambda: "available_commands_update" in editor.kinds())
        assert order[:2] == ["answer", "available_commands_update"], "the commands come after the session exists for the editor"
        (commands,) = [u for u in editor.updates if u["sessionUpdate"] == "available_commands_update"]
        assert [c["name"] for c in commands["availableCommands"]] == ["undo", "compact"]
        await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block(long_line + "\nmore details")]), WAIT)
        await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("And again")]), WAIT)
    titles = [u["title"] for u in editor.updates if u["sessionUpdate"] == "session_info_update"]
    assert titles == [long_line[:79] + "…"]
    # Loaded again: it has its title, and the commands come after the load's answer.
    again = Editor()
    async with agent(tmp_path, scripted({"text": ["Three."]}), again, store=store) as (conn, cwd):
        await asyncio.wait_for(conn.load_session(cwd=cwd, session_id=session.session_id, mcp_servers=[]), WAIT)
        await again.wait_for(lambda: "available_commands_update" in again.kinds())
        await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("Third")]), WAIT)
    assert "session_info_update" not in again.kinds()


async def test_undo_with_nothing_to_undo_and_an_unknown_command(tmp_path: Path) -> None:
    editor = Editor()
    dump = tmp_path / "requests.jsonl"
    async with agent(tmp_path, scripted({"text": ["Seen."]}), editor, "--dump-requests", str(dump), capabilities=NONE) as (conn, cwd):
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), WAIT)
        answer = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("/undo")]), WAIT)
        assert answer.stop_reason == "end_turn" and editor.text() == "There is no turn to undo."
        # Not a command of this agent: it goes to the model as it is.
        await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("/deploy now")]), WAIT)
    assert editor.text().endswith("Seen.") and len(dump.read_text().splitlines()) == 1


# A server that serves until its first tools/call, then exits; started again, it exits at once.
CRASHING_MCP_SERVER = """
import json, os, sys
marker = sys.argv[1]
if os.path.exists(marker): sys.exit(4)
open(marker, "w").close()
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m: continue
    if m["method"] == "tools/call": sys.exit(5)
    if m["method"] == "initialize": r = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "flaky", "version": "1"}}
    elif m["method"] == "tools/list": r = {"tools": [{"name": "crash", "inputSchema": {"type": "object"}}]}
    else: r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"""


async def test_mcp_servers_that_cannot_start_or_fail_later_are_named_and_said_once(tmp_path: Path) -> None:
    import sys

    from acp.schema import HttpMcpServer, McpServerStdio

    servers = [McpServerStdio(name="missing", command="/nonexistent/mcp-server", args=[], env=[]),
               McpServerStdio(name="quitter", command=sys.executable, args=["-c", "import sys; sys.exit(3)"], env=[]),
               HttpMcpServer(type="http", name="nowhere", url="http://127.0.0.1:9/mcp", headers=[])]
    editor = Editor()
    config = scripted({"text": ["First."]}, {"text": ["Second."]})
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=servers), WAIT)
        named = {s["name"]: s["reason"] for s in session.field_meta["agentrpc"]["mcpServersNotStarted"]}
        assert set(named) == {"missing", "quitter", "nowhere"} and all(named.values())
        assert "/nonexistent/mcp-server" in named["missing"]
        await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("one")]), WAIT)
        await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("two")]), WAIT)
    # Said once, before the first answer, in the editor's own words for the servers.
    text = editor.text()
    assert text.endswith("First.Second.")
    for name in ("missing", "quitter", "nowhere"):
        assert text.count(f"MCP server '{name}' is not available: ") == 1
    assert text.index("nowhere") < text.index("First.")

    # A server that works at first and fails during the session: said at the next prompt.
    marker = tmp_path / "started-once"
    flaky = McpServerStdio(name="flaky one", command=sys.executable, args=["-c", CRASHING_MCP_SERVER, str(marker)], env=[])
    later = Editor()
    config = scripted({"toolCalls": [call("call_c", "mcp__flaky_one__crash")]}, {"text": ["It crashed."]}, {"text": ["Next."]})
    async with agent(tmp_path, config, later) as (conn, cwd):
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[flaky]), WAIT)
        assert session.field_meta is None
        await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("crash it")]), WAIT)
        assert later.statuses("call_c")[-1] == "failed"
        # Its restarts fail: the failure is reported (bounded wait for the engine to give up on it).
        async with asyncio.timeout(WAIT):
            while True:
                await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("next")]), WAIT)
                if "MCP server 'flaky one' is not available" in later.text():
                    break
    assert later.text().count("MCP server 'flaky one' is not available") == 1


def usage_updates(editor: Editor) -> list[dict[str, Any]]:
    return [u for u in editor.updates if u["sessionUpdate"] == "usage_update"]


def answered(n: int) -> dict[str, Any]:
    """The scripted answer to question n: 100·n tokens in, 10 out."""
    return {"text": [f"Answer {n}."], "usage": {"inputTokens": 100 * n, "outputTokens": 10}}


def windowed(*items: dict[str, Any]) -> dict[str, Any]:
    """A scripted model with a 100,000-token window (the threshold of automatic compaction is far), priced at a
    cent a token in and two out."""
    config = scripted(*items)
    config["models"]["s"]["contextWindowTokens"] = 100_000
    config["models"]["s"]["pricing"] = {"inputPerMTok": 10_000, "outputPerMTok": 20_000}
    return config


async def test_compact_summarizes_the_conversation_and_the_meter_drops_with_its_cost(tmp_path: Path) -> None:
    store = tmp_path / "store"
    dump = tmp_path / "requests.jsonl"
    summary = "The user asked four numbered questions; each was answered."
    config = windowed(*[answered(n) for n in range(1, 5)],
                      {"text": [summary], "usage": {"inputTokens": 400, "outputTokens": 20}},
                      {"text": ["Fifth."], "usage": {"inputTokens": 150, "outputTokens": 10}})
    editor = Editor()
    async with agent(tmp_path, config, editor, "--dump-requests", str(dump), store=store) as (conn, cwd):
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), WAIT)
        await editor.wait_for(lambda: "available_commands_update" in editor.kinds())
        (commands,) = [u for u in editor.updates if u["sessionUpdate"] == "available_commands_update"]
        assert {"name": "compact", "description": commands["availableCommands"][1]["description"],
                "input": {"hint": "what the summary should keep (optional)"}} in commands["availableCommands"]
        for n in range(1, 5):
            # Long enough that the summary is shorter than what it replaces.
            await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block(f"Question {n}: " + "and why? " * 60)]), WAIT)
        # The meter after each round trip: the context (input plus output) of the window, and the
        # session's cost so far (a cent a token in, two out).
        meter = usage_updates(editor)
        assert [(u["used"], u["size"]) for u in meter] == [(110, 100_000), (210, 100_000), (310, 100_000), (410, 100_000)]
        assert [u["cost"]["currency"] for u in meter] == ["USD"] * 4
        assert [round(u["cost"]["amount"], 6) for u in meter] == [1.2, 3.4, 6.6, 10.8]

        before = len(editor.updates)
        answer = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("/compact keep the numbers")]), WAIT)
        meta = answer.field_meta["agentrpc"]
        # Eight entries: the last six are kept, the first question and its answer summarized.
        assert answer.stop_reason == "end_turn" and meta["command"] == "compact" and meta["entriesRemoved"] == 2
        assert 0 < meta["tokensAfter"] < meta["tokensBefore"] <= 410
        said = "".join(u["content"]["text"] for u in editor.updates[before:] if u["sessionUpdate"] == "agent_message_chunk")
        assert said == (f"Compacted the conversation: 2 entries summarized, about {meta['tokensBefore']} tokens in context before "
                        f"and {meta['tokensAfter']} after.")
        # The meter drops at once; the summary request was paid for (4 + 0.4 dollars).
        (dropped,) = [u for u in editor.updates[before:] if u["sessionUpdate"] == "usage_update"]
        assert dropped["used"] == meta["tokensAfter"] and dropped["size"] == 100_000 and round(dropped["cost"]["amount"], 6) == 15.2

        await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("Question 5")]), WAIT)
    requests = [json.loads(line)["request"] for line in dump.read_text().splitlines()]
    assert len(requests) == 6
    # The summary request carries the command's argument; the next round trip starts from the summary.
    assert "keep the numbers" in json.dumps(requests[4])
    sent = json.dumps(requests[5]["messages"])
    assert summary in sent and "Question 1" not in sent and "Question 2" in sent
    assert editor.text().endswith("Fifth.")

    # Loaded in another process: the replay begins with the summary, and the meter comes back as stored
    # (the last round trip's 160 tokens, the whole cost).
    again = Editor()
    async with agent(tmp_path, windowed({"text": ["-"]}), again, store=store) as (conn, cwd):
        await asyncio.wait_for(conn.load_session(cwd=cwd, session_id=session.session_id, mcp_servers=[]), WAIT)
        await again.wait_for(lambda: "usage_update" in again.kinds())
    first = again.updates[0]
    assert first["sessionUpdate"] == "agent_message_chunk" and first["content"]["text"].endswith(summary + "\n\n")
    (restored,) = usage_updates(again)
    assert restored["used"] == 160 and restored["size"] == 100_000 and round(restored["cost"]["amount"], 6) == 16.9


async def test_compact_with_nothing_to_compact_and_a_cancelled_compaction(tmp_path: Path) -> None:
    dump = tmp_path / "requests.jsonl"
    config = windowed(*[answered(n) for n in range(1, 5)], {"text": ["Summ"], "stall": True}, {"text": ["Still whole."]})
    editor = Editor()
    async with agent(tmp_path, config, editor, "--dump-requests", str(dump)) as (conn, cwd):
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), WAIT)
        answer = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("/compact")]), WAIT)
        assert answer.stop_reason == "end_turn" and answer.field_meta["agentrpc"] == {"command": "compact", "entriesRemoved": 0}
        assert editor.text().startswith("There is nothing to compact yet")
        for n in range(1, 5):
            await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block(f"Question {n}")]), WAIT)
        running = asyncio.ensure_future(conn.prompt(session_id=session.session_id, prompt=[text_block("/compact")]))
        # The summary request is out (its stream stalls): the editor's cancel withdraws it.
        async with asyncio.timeout(WAIT):
            while len(dump.read_text().splitlines()) < 5:
                await asyncio.sleep(0.02)
        await conn.cancel(session_id=session.session_id)
        answer = await asyncio.wait_for(running, WAIT)
        assert answer.stop_reason == "cancelled" and answer.field_meta["agentrpc"] == {"command": "compact"}
        # Nothing changed: the next round trip still sees the whole conversation.
        await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("Question 5")]), WAIT)
    sent = json.dumps(json.loads(dump.read_text().splitlines()[-1])["request"]["messages"])
    assert "Question 1" in sent and "Answer 4." in sent
    assert editor.text().endswith("Still whole.")


async def test_usage_update_counts_anthropic_cache_reads_with_the_window_its_provider_knows(tmp_path: Path, monkeypatch: Any) -> None:
    """A recorded Anthropic stream: 12 input tokens, 3 read from the cache, 4 written to it, 6 output. The meter
    shows the 25 tokens the model had in context (not the 18 of input plus output), of the 200,000-token window
    Anthropic's definition gives claude-sonnet-4-5 (none is configured)."""
    from fake_provider import FIXTURES, Canned, FakeProvider  # type: ignore[import-not-found]

    if not FIXTURES.is_dir():
        pytest.skip("shared/fixtures is not beside the repository")
    fake = FakeProvider()
    monkeypatch.setenv("TEST_PROVIDER_KEY", "sk-test-acp-meter")
    config = {"models": {"claude": {"provider": "anthropic", "model": "claude-sonnet-4-5-20250929", "baseURL": fake.base_url + "/v1",
                                    "apiKeyEnv": "TEST_PROVIDER_KEY",
                                    "pricing": {"inputPerMTok": 3.0, "outputPerMTok": 15.0, "cacheReadPerMTok": 0.3, "cacheWritePerMTok": 3.75}}},
              "defaultModel": "claude"}
    editor = Editor()
    try:
        fake.queue(Canned.sse("anthropic/beta-usage-omitted-with-optional-fields.sse"))
        async with agent(tmp_path, config, editor) as (conn, cwd):
            session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), WAIT)
            await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("Hi")]), WAIT)
    finally:
        fake.close()
    (meter,) = usage_updates(editor)
    assert meter["used"] == 25 and meter["size"] == 200_000
    assert meter["cost"]["currency"] == "USD" and abs(meter["cost"]["amount"] - (12 * 3.0 + 3 * 0.3 + 4 * 3.75 + 6 * 15.0) / 1e6) < 1e-12


def last_user_text(dump: Path) -> str:
    """The text of the last user message of the last model request (from --dump-requests)."""
    request = json.loads(dump.read_text().splitlines()[-1])["request"]
    [user] = [m for m in request["messages"] if m["role"] == "user"][-1:]
    return str(user["text"])


@pytest.mark.time_bound(120)  # fastmcp takes seconds to start on a loaded machine
@pytest.mark.parametrize("era", ["modern", "handshake"])
async def test_an_mcp_servers_prompts_are_slash_commands_whose_messages_are_the_turn(tmp_path: Path, era: str) -> None:
    """A real ``fastmcp`` server's prompts are ``/fm:review`` and ``/fm:example``
    in ``available_commands_update`` (with an input hint from their arguments).
    Running one fetches it (``session/getPrompt``) with the arguments the text
    gives (``name=value`` pairs, or the whole text to the only required
    argument) and its messages are the turn; a missing required argument is an
    agent message, not a turn. ``notifications/prompts/list_changed`` (the
    server's ``unlock``) updates the commands."""
    import sys

    from acp.schema import McpServerStdio
    from test_mcp_fastmcp import FASTMCP_PYTHON, FASTMCP_SERVER, HERE

    if FASTMCP_PYTHON is None:
        pytest.skip("fastmcp is not installed")
    if era == "modern":
        fm = McpServerStdio(name="fm", command=FASTMCP_PYTHON, args=[FASTMCP_SERVER], env=[])
    else:
        fm = McpServerStdio(name="fm", command=sys.executable, args=[str(HERE / "mcp_handshake_only.py"), FASTMCP_PYTHON, FASTMCP_SERVER], env=[])
    editor = Editor()
    dump = tmp_path / "requests.jsonl"
    config = scripted({"text": ["Reviewed."]}, {"text": ["Reviewed again."]},
                      {"toolCalls": [{"id": "call_u", "name": "mcp__fm__unlock", "arguments": {}}]}, {"text": ["Explained."]},
                      {"text": ["Drafted."]}, {"text": ["Passed on."]})

    def commands() -> dict[str, dict[str, Any]]:
        updates = [u for u in editor.updates if u["sessionUpdate"] == "available_commands_update"]
        return {c["name"]: c for c in updates[-1]["availableCommands"]} if updates else {}

    async with agent(tmp_path, config, editor, "--dump-requests", str(dump)) as (conn, cwd):
        sid = (await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[fm]), WAIT * 2)).session_id
        await editor.wait_for(lambda: "fm:review" in commands())
        assert list(commands()) == ["undo", "compact", "fm:review", "fm:example", "fm:slow", "fm:broken"]
        assert commands()["fm:review"] == {"name": "fm:review", "description": "Asks for a review of a file. (MCP server 'fm')",
                                           "input": {"hint": "path=… [focus=…]"}}
        assert commands()["fm:example"]["input"] == {"hint": "topic"}

        async def run(text: str) -> Any:
            return await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block(text)]), WAIT)

        # A required argument missing: said to the user, and nothing goes to the model.
        answer = await run("/fm:review focus=style")
        assert answer.stop_reason == "end_turn" and answer.field_meta["agentrpc"]["command"] == "fm:review"
        assert editor.text() == "/fm:review needs path. Usage: /fm:review path=… [focus=…]"
        assert not dump.exists() or dump.read_text() == ""

        answer = await run('/fm:review path=src/app.py focus="error handling"')
        assert answer.stop_reason == "end_turn" and answer.field_meta["agentrpc"]["command"] == "fm:review"
        assert last_user_text(dump) == "Please review src/app.py, looking for error handling."
        # Not name=value: all of it is the only required argument's value.
        await run("/fm:review src/my app.py")
        assert last_user_text(dump) == "Please review src/my app.py, looking for bugs."
        # Several messages, an assistant's among them, are one turn, in order.
        await run("/fm:example DNS caching")
        assert last_user_text(dump) == ("[user]\nExplain DNS caching briefly.\n\n[assistant]\nDNS caching: in one line.\n\n"
                                        "[user]\nNow explain DNS caching in the same style.")
        assert editor.text().endswith("Explained.")
        if era == "handshake":
            # The model ran `unlock`: the server's prompts/list_changed brings a new command.
            await editor.wait_for(lambda: "fm:release_notes" in commands())
            assert commands()["fm:release_notes"]["input"] == {"hint": "version"}
            await run("/fm:release_notes 2.0")
            assert last_user_text(dump) == "Draft the release notes for 2.0."
        # An unknown /word with a colon is not a command: it goes to the model as it is.
        await run("/fm:nothing here")
        assert last_user_text(dump) == "/fm:nothing here"


@pytest.mark.time_bound(120)  # fastmcp takes seconds to start on a loaded machine
async def test_a_prompt_command_that_cannot_run_says_why_and_one_cancelled_while_fetched_answers_cancelled(tmp_path: Path) -> None:
    """Arguments that fit no prompt argument and a server that refuses are agent
    messages (no turn); ``session/cancel`` while the server has not given the
    prompt answers ``cancelled`` at once, and the session goes on."""
    from acp.schema import McpServerStdio
    from test_mcp_fastmcp import FASTMCP_PYTHON, FASTMCP_SERVER

    if FASTMCP_PYTHON is None:
        pytest.skip("fastmcp is not installed")
    editor = Editor()
    dump = tmp_path / "requests.jsonl"
    slow_sent = asyncio.Event()

    def observe(event: StreamEvent) -> None:
        message = event.message
        if event.direction == StreamDirection.OUTGOING and message.get("method") == "session/prompt":
            if message["params"]["prompt"][0].get("text") == "/fm:slow":
                slow_sent.set()

    async with agent(tmp_path, scripted({"text": ["Still here."]}), editor, "--dump-requests", str(dump), observe=observe) as (conn, cwd):
        fm = McpServerStdio(name="fm", command=FASTMCP_PYTHON, args=[FASTMCP_SERVER], env=[])
        sid = (await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[fm]), WAIT * 2)).session_id
        await editor.wait_for(lambda: any(u["sessionUpdate"] == "available_commands_update" for u in editor.updates))

        async def refused(text: str) -> str:
            answer = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block(text)]), WAIT)
            assert answer.stop_reason == "end_turn"
            return str(answer.field_meta["agentrpc"]["refused"])

        assert await refused("/fm:review pth=a.py") == "/fm:review has no argument named pth. Usage: /fm:review path=… [focus=…]"
        assert await refused('/fm:review path=a.py path=b.py') == "/fm:review was given path twice. Usage: /fm:review path=… [focus=…]"
        assert await refused("/fm:example") == "/fm:example needs topic. Usage: /fm:example topic=…"
        assert await refused("/fm:slow now") == "/fm:slow takes no arguments."
        said = await refused("/fm:broken on purpose")
        assert "did not give the prompt 'broken'" in said and "broken on purpose" in said, said
        assert editor.text().endswith(said)
        assert not dump.exists() or dump.read_text() == ""
        running = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("/fm:slow")]))
        async with asyncio.timeout(WAIT):
            await slow_sent.wait()
        # The prompt is read first: the fetch never ends, the server is waiting.
        await conn.cancel(session_id=sid)
        answer = await asyncio.wait_for(running, WAIT)
        assert answer.stop_reason == "cancelled" and answer.field_meta["agentrpc"]["command"] == "fm:slow"
        assert (await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("hello")]), WAIT)).stop_reason == "end_turn"
    assert editor.text().endswith("Still here.")

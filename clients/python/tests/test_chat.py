"""``agentrpc chat`` driven like a person at a terminal.

Each test runs the real binary inside a pseudo-terminal (stdlib ``pty``: the
chat's Ctrl-C handling needs a real controlling terminal, so ``\\x03`` becomes
SIGINT), with a scratch ``agentrpc.json`` holding a scripted model. Every wait
is bounded by ``TIMEOUT``; nothing sleeps.

Skipped when no binary is found: set ``AGENTRPC_BIN`` or run ``swift build``.
"""

from __future__ import annotations

import codecs
import fcntl
import json
import os
import re
import select
import signal
import subprocess
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import real_binary

BINARY = real_binary()

pytestmark = [
    pytest.mark.real_server,
    pytest.mark.skipif(
        BINARY is None,
        reason="no agentrpc binary: set AGENTRPC_BIN or run `swift build` so .build/debug/agentrpc exists",
    ),
]

TIMEOUT = 20.0
PROMPT = "you> "
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class Terminal:
    """The chat in a pseudo-terminal: write keystrokes, wait for text (ANSI styles removed)."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        master, slave = os.openpty()
        self.master = master
        self.buffer = ""
        self.raw = ""  # as written, styles included
        # Incremental: a character split across two reads must not become U+FFFD.
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.cursor = 0
        self.proc = subprocess.Popen(
            [str(BINARY), "chat", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=env,
            start_new_session=True,
            # Makes the pty the controlling terminal, so ^C raises SIGINT in the chat.
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(slave)

    def _read(self, deadline: float) -> bool:
        """Reads what is available before ``deadline``; False once the pty is closed."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return True
        ready, _, _ = select.select([self.master], [], [], remaining)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: every writer of the pty is gone
            return False
        if not data:
            return False
        text = self.decoder.decode(data)
        self.raw += text
        # Recomputed from the whole output, so a style split across reads is still removed.
        self.buffer = ANSI.sub("", self.raw).replace("\r\n", "\n")
        return True

    def expect(self, text: str, timeout: float = TIMEOUT) -> str:
        """Waits for ``text`` after the last match; returns what came before it."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.buffer.find(text, self.cursor)
            if found >= 0:
                before = self.buffer[self.cursor : found]
                self.cursor = found + len(text)
                return before
            if time.monotonic() >= deadline or not self._read(deadline):
                raise AssertionError(
                    f"did not see {text!r} within {timeout}s; output since the last match:\n"
                    f"{self.buffer[self.cursor:]}"
                )

    def line(self, text: str) -> None:
        os.write(self.master, text.encode() + b"\r")

    def key(self, data: bytes) -> None:
        os.write(self.master, data)

    def wait_exit(self, timeout: float = TIMEOUT) -> int:
        deadline = time.monotonic() + timeout
        while self._read(deadline) and time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
        return self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=TIMEOUT)
        os.close(self.master)


def children_of(pid: int) -> list[int]:
    """Processes whose parent is ``pid``, from /proc (field 4 of stat, after the name)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def chat_env(home: Path) -> dict[str, str]:
    # Nothing from the caller's environment may pick a model: an API key would.
    ignored = ("AGENTRPC_CONFIG", "AGENTRPC_LOG", "NO_COLOR", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY")
    env = {k: v for k, v in os.environ.items() if k not in ignored}
    env["TERM"] = "xterm"
    env["HOME"] = str(home)
    return env


def write_config(directory: Path, script: list[dict[str, Any]]) -> None:
    config = {"models": {"scripted-test": {"provider": "scripted", "script": script}}, "defaultModel": "scripted-test"}
    (directory / "agentrpc.json").write_text(json.dumps(config))


@pytest.fixture
def start_chat(tmp_path: Path):
    """Starts ``agentrpc chat`` in ``tmp_path`` with the given script (None: no config file)."""
    terminals: list[Terminal] = []

    def start(script: list[dict[str, Any]] | None, args: list[str] = (), env: dict[str, str] | None = None) -> Terminal:
        if script is not None:
            write_config(tmp_path, script)
        term = Terminal(list(args), tmp_path, chat_env(tmp_path) | (env or {}))
        terminals.append(term)
        term.expect(PROMPT)
        return term

    yield start
    for term in terminals:
        term.close()


def leave(term: Terminal) -> None:
    term.line("/exit")
    assert term.wait_exit() == 0


def test_streamed_answer_and_usage_appear(start_chat) -> None:
    term = start_chat([{"text": ["Hel", "lo, ", "wor", "ld!"], "usage": {"inputTokens": 7, "outputTokens": 4}}])
    term.line("hi there")
    term.expect("Hello, world!")
    term.expect("usage: 7 in, 4 out tokens")
    term.expect(PROMPT)
    leave(term)


def test_text_is_shown_before_the_turn_ends(start_chat) -> None:
    # A stalled stream never finishes, so seeing its text proves it was streamed.
    term = start_chat([{"reasoning": ["pondering"], "text": ["partial words"], "stall": True}])
    term.line("go")
    term.expect("pondering")
    term.expect("partial words")
    assert "\x1b[2mpondering" in term.raw  # reasoning is dimmed on a terminal
    term.key(b"\x03")
    term.expect("[cancelled]")
    leave(term)


def test_confirmed_tool_call_runs_and_its_result_is_shown(start_chat) -> None:
    term = start_chat([
        {"text": ["Noting it."], "toolCalls": [{"name": "write_note", "arguments": {"text": "buy milk"}}]},
        {"text": ["Saved your note."]},
    ])
    term.line("remember to buy milk")
    term.expect('→ write_note({"text":"buy milk"})')
    term.expect('Allow write_note({"text":"buy milk"})? [y/N]')
    term.line("y")
    term.expect('← ok: {"noteId":1,"saved":true}')
    term.expect("Saved your note.")
    term.expect(PROMPT)
    term.line("/notes")
    term.expect("note #1: buy milk")
    leave(term)


def test_declined_tool_call_is_denied_and_nothing_is_saved(start_chat) -> None:
    term = start_chat([
        {"toolCalls": [{"name": "write_note", "arguments": {"text": "secret"}}]},
        {"text": ["Fine, I did not save it."]},
    ])
    term.line("note this")
    term.expect("[y/N]")
    term.line("n")
    term.expect("← denied:")
    term.expect("Fine, I did not save it.")
    term.expect(PROMPT)
    term.line("/notes")
    term.expect("(no notes)")
    leave(term)


def test_tools_without_confirmation_run_at_once(start_chat) -> None:
    term = start_chat([
        {"toolCalls": [{"name": "current_time"}]},
        {"toolCalls": [{"name": "list_notes"}]},
        {"text": ["Done."]},
    ])
    term.line("what time is it")
    before = term.expect("Done.")
    assert "[y/N]" not in before
    assert re.search(r"← ok: \{\"local\":\"\d{4}-\d\d-\d\dT", before), before
    assert "← ok: []" in before
    leave(term)


@pytest.mark.parametrize(("zone", "offset"), [("Asia/Kolkata", r"\+05:30"), ("America/St_Johns", r"-0[23]:30"), ("Etc/UTC", "Z")])
def test_current_time_is_in_the_users_time_zone(start_chat, zone: str, offset: str) -> None:
    """TZ picks the local time and the zone's name, as Foundation's TimeZone.current did
    (the binary no longer loads the part of Foundation that reads it)."""
    term = start_chat([{"toolCalls": [{"name": "current_time"}]}, {"text": ["Done."]}], env={"TZ": zone})
    term.line("what time is it")
    before = term.expect("Done.")
    found = re.search(r'← ok: \{"local":"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)([^"]*)","timeZone":"([^"]*)","utc":"([^"]*)"\}', before)
    assert found, before
    assert re.fullmatch(offset, found.group(2)), found.group(2)
    assert found.group(3) == zone
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", found.group(4)), found.group(4)
    leave(term)


def test_ctrl_c_cancels_a_stalled_turn_and_the_chat_goes_on(start_chat) -> None:
    term = start_chat([{"text": ["thinking"], "stall": True}, {"text": ["Back again."]}])
    term.line("take your time")
    term.expect("thinking")
    term.key(b"\x03")
    term.expect("[cancelled]")
    term.expect(PROMPT)
    term.line("are you there?")
    term.expect("Back again.")
    term.expect(PROMPT)
    leave(term)


def test_ctrl_c_at_the_prompt_only_asks_again(start_chat) -> None:
    term = start_chat([{"text": ["Still running."]}])
    term.key(b"half a line\x03")
    term.expect(PROMPT)
    term.line("hello")
    term.expect("Still running.")
    term.expect(PROMPT)
    term.line("/transcript")
    listing = term.expect(PROMPT)
    assert "e1 prompt: hello" in listing, listing
    leave(term)


def test_undo_removes_the_last_turn(start_chat) -> None:
    term = start_chat([{"text": ["First answer."]}, {"text": ["Second answer."]}])
    term.line("one")
    term.expect("First answer.")
    term.expect(PROMPT)
    term.line("two")
    term.expect("Second answer.")
    term.expect(PROMPT)
    term.line("/undo")
    removed = term.expect(PROMPT)
    assert "removed 2 entries" in removed
    assert "prompt: two" in removed and "response: Second answer." in removed
    term.line("/transcript")
    listing = term.expect(PROMPT)
    assert "e1 prompt: one" in listing
    assert "e2 response: First answer." in listing
    assert "two" not in listing and "Second answer" not in listing
    leave(term)


def test_undo_of_the_only_turn_empties_the_transcript(start_chat) -> None:
    term = start_chat([{"text": ["Only answer."]}])
    term.line("just one")
    term.expect("Only answer.")
    term.expect(PROMPT)
    term.line("/undo")
    term.expect("removed 2 entries")
    term.expect(PROMPT)
    term.line("/transcript")
    term.expect("(the transcript is empty)")
    leave(term)


def test_exit_command_and_ctrl_d_leave_with_status_zero(start_chat) -> None:
    leave(start_chat([]))
    term = start_chat([])
    term.key(b"\x04")
    assert term.wait_exit() == 0


def test_offline_demo_is_announced_and_runs_its_script(start_chat) -> None:
    term = start_chat(None)
    banner = term.buffer
    assert "No model configured — using the built-in offline scripted provider" in banner
    assert "not a language model" in banner
    term.line("hello")
    term.expect("offline demo script")
    term.expect(PROMPT)
    term.line("show me")
    term.expect("→ current_time({})")
    term.expect("Allow write_note(")
    term.line("y")
    term.expect("← ok:")
    term.expect("last line of the offline demo script")
    term.expect(PROMPT)
    term.line("more?")
    term.expect("The offline demo script has ended")
    leave(term)


def test_provider_errors_show_their_kind_and_description(start_chat) -> None:
    term = start_chat([{"error": {"code": "authUserInvalid", "httpStatus": 401}}])
    term.line("hi")
    term.expect("error [providerError]")
    term.expect("provider code authUserInvalid")
    leave(term)


def test_profile_command_sets_the_selector_or_says_there_are_none(start_chat, tmp_path: Path) -> None:
    term = start_chat([])
    term.line("/profile b")
    term.expect("this session has no profiles")
    leave(term)
    session = {"profiles": {"selector": "mode", "cases": {"a": {"instructions": ["A."]}, "b": {"instructions": ["B."]}}}}
    (tmp_path / "session.json").write_text(json.dumps(session))
    term = start_chat([{"text": ["Answer from b."]}], args=["--session", "session.json"])
    term.line("/profile b")
    term.expect("mode = b; profile b ")
    term.line("/profile nope")
    term.expect("no profile named 'nope'; profiles: a, b")
    term.expect(PROMPT)
    term.line("hi")
    before = term.expect("Answer from b.")
    assert "(profile: b)" in before, before
    leave(term)


def test_unknown_model_is_a_usage_error(tmp_path: Path) -> None:
    write_config(tmp_path, [])
    proc = subprocess.run(
        [str(BINARY), "chat", "--model", "missing"],
        cwd=tmp_path, env=chat_env(tmp_path), input="", capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert proc.returncode == 2
    assert "no model named 'missing'" in proc.stderr


def test_piped_input_works_without_a_terminal(tmp_path: Path) -> None:
    write_config(tmp_path, [
        {"toolCalls": [{"name": "write_note", "arguments": {"text": "piped"}}]},
        {"text": ["Piped answer."]},
    ])
    proc = subprocess.run(
        [str(BINARY), "chat"],
        cwd=tmp_path, env=chat_env(tmp_path), input="save it\ny\n/notes\n", capture_output=True, text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "you> save it" in proc.stdout
    assert 'Allow write_note({"text":"piped"})? [y/N] y' in proc.stdout
    assert "Piped answer." in proc.stdout
    assert "note #1: piped" in proc.stdout
    assert "\x1b[" not in proc.stdout  # no styles when stdout is not a terminal


def test_ctrl_c_at_a_confirmation_denies_it_and_cancels_the_turn(start_chat) -> None:
    term = start_chat([{"toolCalls": [{"name": "write_note", "arguments": {"text": "never"}}]}, {"text": ["Later."]}])
    term.line("note it")
    term.expect("[y/N]")
    term.key(b"\x03")
    term.expect("(denied: the turn was cancelled)")
    term.expect("[cancelled]")
    term.expect(PROMPT)
    term.line("/notes")
    term.expect("(no notes)")
    leave(term)


def test_a_cancelled_turn_rolls_back_its_note_through_tool_undo(start_chat) -> None:
    term = start_chat([
        {"toolCalls": [{"name": "write_note", "arguments": {"text": "temporary"}}]},
        {"text": ["thinking"], "stall": True},
    ])
    term.line("note it, then think")
    term.expect("[y/N]")
    term.line("y")
    term.expect("← ok:")
    term.expect("thinking")
    term.key(b"\x03")
    term.expect("↶ undone write_note: note #1 removed")
    term.expect("[cancelled]")
    term.expect(PROMPT)
    term.line("/notes")
    term.expect("(no notes)")
    leave(term)


def test_a_server_that_dies_is_reported(start_chat) -> None:
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs Linux /proc to find the server process")
    term = start_chat([{"text": ["thinking"], "stall": True}])
    term.line("go")
    term.expect("thinking")
    (server_pid,) = children_of(term.proc.pid)
    os.kill(server_pid, signal.SIGKILL)
    term.expect("the agentrpc server exited unexpectedly")
    assert term.wait_exit() == 1


# -- people's conversations: the meter, --resume, /compact ------------------------------------

SESSION_ID = re.compile(r"agentrpc chat --resume (s-[A-Za-z0-9_-]+) continues it")


def run_piped(tmp_path: Path, args: list[str], lines: list[str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(BINARY), "chat", *args], cwd=tmp_path, env=chat_env(tmp_path), input="".join(line + "\n" for line in lines),
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    return proc


def write_priced_config(directory: Path, script: list[dict[str, Any]], window: int = 1000) -> None:
    """The scripted model with a window, priced at a cent a token in and two out."""
    model = {"provider": "scripted", "script": script, "contextWindowTokens": window,
             "pricing": {"inputPerMTok": 10_000, "outputPerMTok": 20_000}}
    (directory / "agentrpc.json").write_text(json.dumps({"models": {"scripted-test": model}, "defaultModel": "scripted-test"}))


def test_the_meter_and_cost_after_a_turn_and_resume_by_id(tmp_path: Path) -> None:
    write_priced_config(tmp_path, [{"text": ["Answer one."], "usage": {"inputTokens": 100, "outputTokens": 20}}])
    first = run_piped(tmp_path, [], ["first question"])
    assert first.returncode == 0, first.stdout + first.stderr
    # What the model had in context of its window, and what the session cost: 100 × $0.01 + 20 × $0.02.
    assert "(context: 120 of 1,000 tokens (12%) · cost so far: $1.40)" in first.stdout
    (session_id,) = SESSION_ID.findall(first.stdout)

    # Another process (another script for the same model): the conversation goes on where it was.
    write_priced_config(tmp_path, [{"text": ["Answer two."], "usage": {"inputTokens": 200, "outputTokens": 10}}])
    second = run_piped(tmp_path, ["--resume", session_id], ["second question", "/transcript"])
    assert second.returncode == 0, second.stdout + second.stderr
    out = second.stdout
    assert f"Resumed {session_id}: 2 entries." in out
    assert out.index("It ended with:") < out.index("first question") < out.index("Answer one.") < out.index("you> second question")
    # The stored meter before the first prompt, then the new one: the cost is the session's whole.
    assert out.index("(context: 120 of 1,000 tokens (12%) · cost so far: $1.40)") < out.index("you> second question")
    assert "(context: 210 of 1,000 tokens (21%) · cost so far: $3.60)" in out
    assert "transcript (revision 4, 4 entries)" in out
    assert SESSION_ID.findall(out) == [session_id]


def test_resume_without_an_id_lists_the_recent_conversations_newest_first(tmp_path: Path) -> None:
    for topic in ("alpha topic", "beta topic"):
        write_config(tmp_path, [{"text": [f"About {topic}."]}])
        assert run_piped(tmp_path, [], [topic]).returncode == 0
    write_config(tmp_path, [{"text": ["Back to alpha."]}])
    picked = run_piped(tmp_path, ["--resume"], ["9", "2", "and more"])
    assert picked.returncode == 0, picked.stdout + picked.stderr
    out = picked.stdout
    listing = re.findall(r"  (\d)\. (s-\S+) \"(.+?)\" \((\d) entries, updated ", out)
    assert [(n, title, count) for n, _, title, count in listing] == [("1", "beta topic", "2"), ("2", "alpha topic", "2")]
    assert "'9' is none of them: give a number from 1 to 2 or a session id" in out
    assert f"Resumed {listing[1][1]}: 2 entries." in out and out.index("About alpha topic.") < out.index("Back to alpha.")

    # Nothing stored: said, and the chat ends.
    empty = run_piped(tmp_path, ["--resume", "--store", str(tmp_path / "empty-store")], [])
    assert empty.returncode == 1 and "There is no stored conversation to resume." in empty.stdout
    # An id that is not stored: the server's error, status 1.
    unknown = run_piped(tmp_path, ["--resume", "s-nonexistent"], [])
    assert unknown.returncode == 1 and "could not resume the session s-nonexistent: error [sessionNotFound]" in unknown.stdout


def test_resume_with_a_new_model_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_piped(tmp_path, ["--resume", "s-1", "--model", "m"], [])
    assert proc.returncode == 2 and "--resume continues a stored conversation" in proc.stderr


def test_compact_command_summarizes_and_ctrl_c_withdraws_it(start_chat) -> None:
    answers = [{"text": [f"Answer {n}."], "usage": {"inputTokens": 100 * n, "outputTokens": 10}} for n in range(1, 5)]
    term = start_chat([*answers, {"text": ["Summ"], "stall": True}, {"text": ["A short summary."]}, {"text": ["Five."]}])
    term.line("/compact")
    term.expect("nothing to compact yet")
    for n in range(1, 5):
        term.line(f"Question {n}: " + "and why? " * 20)
        term.expect(f"Answer {n}.")
        term.expect(PROMPT)
    # The first summary request stalls: Ctrl-C withdraws it and nothing changes.
    term.line("/compact")
    term.expect("(compacting: the model summarizes the conversation…)")
    term.key(b"\x03")
    term.expect("[cancelled] (nothing was compacted)")
    term.line("/compact keep the numbers")
    term.expect("compacted: 2 entries summarized, context about ")
    term.expect(PROMPT)
    term.line("/transcript")
    listing = term.expect(PROMPT)
    assert "summary: A short summary." in listing and "Question 1" not in listing and "Question 2" in listing
    term.line("Question 5")
    term.expect("Five.")
    leave(term)


def test_an_automatic_compaction_is_shown(tmp_path: Path) -> None:
    # A 300-token window and two entries kept: with the long third prompt the context would pass 0.8 of it
    # (the last round trip's 190 tokens in, plus about 150).
    write_priced_config(tmp_path, [
        {"text": ["First answer."], "usage": {"inputTokens": 40, "outputTokens": 30}},
        {"text": ["Second answer."], "usage": {"inputTokens": 190, "outputTokens": 30}},
        {"text": ["Two questions were answered."]},
        {"text": ["Third answer."], "usage": {"inputTokens": 120, "outputTokens": 30}},
    ], window=300)
    (tmp_path / "session.json").write_text(json.dumps({"compaction": {"keepLast": 2}}))
    proc = run_piped(tmp_path, ["--session", "session.json"], ["one", "two", "three " * 100])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    # The first three entries: the kept tail is the second answer and the running turn's prompt.
    assert "(the context neared the model's window; compacted: 3 entries summarized, context about " in out
    assert out.index("compacted: 3 entries") < out.index("Third answer.")
    assert "(context: 150 of 300 tokens (50%)" in out


def test_a_conversation_whose_server_died_mid_turn_resumes_with_a_note(start_chat, tmp_path: Path) -> None:
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs Linux /proc to find the server process")
    term = start_chat([{"text": ["Answer one."]}, {"text": ["thinking"], "stall": True}])
    term.line("first")
    term.expect("Answer one.")
    term.line("second")
    term.expect("thinking")
    (server_pid,) = children_of(term.proc.pid)
    os.kill(server_pid, signal.SIGKILL)
    said = term.expect(" continues it.")
    session_id = said.rsplit("agentrpc chat --resume ", 1)[1]
    assert term.wait_exit() == 1
    write_config(tmp_path, [{"text": ["Back again."]}])
    resumed = run_piped(tmp_path, ["--resume", session_id], ["third"])
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "(its last turn was cut short when its server stopped" in resumed.stdout and "Back again." in resumed.stdout

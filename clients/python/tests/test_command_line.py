"""The command lines of ``agentrpc serve`` and ``agentrpc sessions`` end to end:
what each accepts and how it refuses (``CommandLineOptions.scanWithPositionals``
reads both; these spellings and messages are what they always were)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import REAL_BINARY, requires_real

pytestmark = requires_real

TIMEOUT = 20.0


def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    assert REAL_BINARY is not None
    return subprocess.run([REAL_BINARY, *args], input=stdin, capture_output=True, text=True, timeout=TIMEOUT)


def test_serve_names_the_first_bad_option_before_a_stray_argument() -> None:
    refused = run("serve", "stray", "--bogus")
    assert refused.returncode == 2 and "agentrpc: unknown option --bogus" in refused.stderr
    stray = run("serve", "--ephemeral", "stray", "-x")
    assert stray.returncode == 2 and "agentrpc: unexpected argument 'stray'" in stray.stderr
    dangling = run("serve", "--store")
    assert dangling.returncode == 2 and "agentrpc: option --store needs a value" in dangling.stderr


def test_serve_takes_both_value_spellings_and_refuses_a_flag_with_a_value(tmp_path: Path) -> None:
    # Ends at once: the input is empty.
    assert run("serve", "--ephemeral", "--max-message-bytes=4096", "--log-level", "off").returncode == 0
    # `--ephemeral=false` once turned the store off; a flag takes no value.
    for flag in ("--ephemeral=false", "--ephemeral=yes", "--ephemeral="):
        refused = run("serve", flag, "--log-level", "off")
        assert refused.returncode == 2 and "agentrpc: option --ephemeral takes no value" in refused.stderr
    both = run("serve", "--ephemeral", "--store", str(tmp_path))
    assert both.returncode == 2 and "--store and --ephemeral exclude each other" in both.stderr


def test_sessions_reads_a_single_dash_as_an_id_and_help_ends_the_command_line(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    # Read as the id to delete (and refused as one), not as an unknown option.
    odd = run("sessions", "delete", "-abc", "--store", store)
    assert odd.returncode == 1 and "'-abc' is not a session id" in odd.stderr
    assert run("sessions", "list", "--json", "--store", store).stdout.strip() == "[]"
    flagged = run("sessions", "list", "--json=no", "--store", store)
    assert flagged.returncode == 2 and "agentrpc sessions: option --json takes no value" in flagged.stderr
    helped = run("sessions", "--help", "--bogus")
    assert helped.returncode == 0 and "agentrpc sessions list" in helped.stdout
    refused = run("sessions", "--bogus", "--help")
    assert refused.returncode == 2 and "agentrpc sessions: unknown option --bogus" in refused.stderr
    dangling = run("sessions", "list", "--limit")
    assert dangling.returncode == 2 and "agentrpc sessions: option --limit needs a value" in dangling.stderr

"""The first five minutes: the README's sample config works as pasted (it
defaults to the local model, described by ``scripts/local-model model-config``),
and ``scripts/local-model`` says how to reach its server."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from agentrpc import Client

from conftest import REAL_BINARY

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
LOCAL_MODEL = ROOT / "scripts" / "local-model"


def readme_config() -> tuple[int, dict[str, object]]:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- local-model-config: (\d+) -->\n```json\n(.*?)\n```", text, re.S)
    assert match, "README.md has no <!-- local-model-config: PORT --> block"
    return int(match.group(1)), json.loads(match.group(2))


def test_the_readme_sample_defaults_to_the_local_model_as_the_script_describes_it() -> None:
    port, config = readme_config()
    described = json.loads(subprocess.run(
        [str(LOCAL_MODEL), "model-config", str(port)], capture_output=True, text=True, check=True,
    ).stdout)
    models = config["models"]
    assert isinstance(models, dict)
    assert config["defaultModel"] == "local"
    assert models["local"] == described
    # The alternatives need a key, and say which variable holds it.
    assert {name: m["apiKeyEnv"] for name, m in models.items() if name != "local"} == {
        "claude": "ANTHROPIC_API_KEY", "gpt": "OPENAI_API_KEY", "reasoner": "OPENAI_API_KEY"}


@pytest.mark.real_server
@pytest.mark.skipif(REAL_BINARY is None, reason="no agentrpc binary")
async def test_the_readme_sample_loads_as_pasted(tmp_path: Path) -> None:
    _, config = readme_config()
    path = tmp_path / "agentrpc.json"
    path.write_text(json.dumps(config))
    async with Client.spawn(REAL_BINARY, args=["--config", str(path)], cwd=tmp_path,
                            env={"OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""}) as client:
        session = await client.open_session()  # the default model: local, no key needed
        state = await session.state()
        assert state.is_running is False


def test_local_model_script_usage_lists_every_command() -> None:
    usage = subprocess.run([str(LOCAL_MODEL)], capture_output=True, text=True)
    assert usage.returncode == 2
    for command in ("install", "serve", "model-path", "model-config", "describe", "status"):
        assert f"scripts/local-model {command}" in usage.stdout


def test_the_scripted_item_format_is_documented_in_one_place_and_cited() -> None:
    from agentrpc import scripted

    guide = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    section = guide.split("### The scripted provider", 1)[1].split("\n## ", 1)[0]
    doc = scripted.__doc__ or ""
    assert 'docs/protocol.md §15, "The scripted provider"' in doc
    for key in ("text", "toolCalls", "reasoning", "refusal", "usage", "error", "delayMs", "stall", "stopReason"):
        assert f"| `{key}` |" in section, key
        assert f"``{key}``" in doc, key
    python_guide = (ROOT / "docs" / "python.md").read_text(encoding="utf-8")
    assert "protocol.md#the-scripted-provider" in python_guide

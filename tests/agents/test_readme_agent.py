"""The README's library agent example runs as written, against the scripted model."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fixtures.scripted_llm import Call, Reply, ScriptedLLM

pytestmark = [pytest.mark.subprocess, pytest.mark.network, pytest.mark.slow]

README = Path(__file__).parents[2] / "README.md"
MARKER = "- The agent loop (what `mcpmux run` and `chat` use) is a library too"


def _example() -> str:
    text = README.read_text(encoding="utf-8")
    after = text[text.index(MARKER) :]
    block = re.search(r"```python\n(.*?)```", after, re.S)
    assert block is not None, "the example is gone from the README"
    return textwrap.dedent(block.group(1))


def test_the_readme_library_agent_example_runs(tmp_path: Path) -> None:
    (tmp_path / "example.py").write_text(_example(), encoding="utf-8")
    script = [Reply(tool_calls=[Call("workspace__list_directory", {"path": "."})]), Reply("two files.")]
    with ScriptedLLM(script) as llm:
        servers = "mcp:\n  servers:\n    - {name: workspace, type: builtin}\n"
        (tmp_path / "mcpmux.yaml").write_text(f"llm: {{base_url: {llm.base_url}, model: s, api_key: x}}\n{servers}")
        done = subprocess.run(
            [sys.executable, "example.py"], cwd=tmp_path, env=dict(os.environ), capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["answered 2 1 two files.", "4"]

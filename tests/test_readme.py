"""The README's Python examples run as written, and the files it points to exist (so it cannot rot)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PYTHON_BLOCKS = re.findall(r"^```python\n(.*?)^```", README, flags=re.DOTALL | re.MULTILINE)
RUN_TIMEOUT_S = 120


def test_the_readme_has_python_examples() -> None:
    assert PYTHON_BLOCKS


@pytest.mark.subprocess
@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[f"block{i}" for i in range(len(PYTHON_BLOCKS))])
def test_a_python_example_of_the_readme_runs_as_written(block: str, tmp_path: Path) -> None:
    # A fresh directory with no mcpmux.yaml: the examples use the built-in servers (DESIGN: the default).
    (tmp_path / "README.md").write_text("# a file for the example to find\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr


def test_every_markdown_file_the_readme_names_is_in_the_repository() -> None:
    named = set(re.findall(r"[\w./-]*[\w-]\.md\b", README))
    missing = sorted(name for name in named if not (ROOT / name).is_file())
    assert missing == []

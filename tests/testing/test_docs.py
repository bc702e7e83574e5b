"""Every example of docs/testing.md runs: scripts as they are, the pytest example under pytest."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.network, pytest.mark.subprocess]

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
TIMEOUT_S = 300


def test_the_page_has_its_examples() -> None:
    assert len(BLOCKS) == 7


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(BLOCKS) - 1))
def test_a_script_example_runs(index: int, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(BLOCKS[index])
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_the_pytest_example_passes_with_no_conftest(tmp_path: Path) -> None:
    (tmp_path / "test_example.py").write_text(BLOCKS[-1])
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout  # one per transport (anyio: asyncio only, trio is not installed)

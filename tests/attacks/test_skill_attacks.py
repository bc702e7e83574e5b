"""Agent skills attacked by their server: a listing that is not one, and files other than those listed.

(The tampered files are in tests/skills/test_skills.py and tests/connection/test_skills.py; the
conformance suite's own tampering servers in tests/conformance.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gateway.serving import mcpmux
from tests.skills.test_skills import config

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]


def test_a_malformed_skills_listing_is_a_clear_protocol_error_and_the_others_are_still_listed(tmp_path: Path) -> None:
    conf = config(tmp_path, "garbage")
    named = mcpmux(tmp_path, conf, "skills", "acme", timeout_s=180)
    assert named.returncode == 3, named.stderr
    assert "server 'acme': invalid skills/list answer at skills.0.uri" in named.stderr
    assert "Traceback" not in named.stderr
    every = mcpmux(tmp_path, conf, "skills", timeout_s=180)
    assert every.returncode == 0 and "its skills could not be listed" in every.stderr
    loading = mcpmux(tmp_path, conf, "skill", "acme", "pdf-processing", timeout_s=180)
    assert loading.returncode == 3 and "Traceback" not in loading.stderr

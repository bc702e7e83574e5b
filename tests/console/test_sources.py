"""Sources from the console: add an OpenAPI source (a real httpbin), sync it, see its tools, call one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.console.serving import console, write_console_config

pytestmark = [pytest.mark.slow, pytest.mark.subprocess, pytest.mark.network]


def test_an_openapi_source_is_added_synced_and_its_tools_called(tmp_path: Path, httpbin: str) -> None:
    config = write_console_config(tmp_path, ("time",))
    with console(tmp_path, config, tokens=False) as running, running.client() as client:
        key = running.serving.log().split("console key ", 1)[1].split()[0]
        assert client.post("/ui/login", data={"secret": key}, headers={"Origin": running.base}).status_code == 303
        csrf = running.csrf(client, "/ui/sources")
        origin = {"Origin": running.base}
        bad = client.post("/ui/sources/add", data={"csrf": csrf, "name": "Bad Name", "source_type": "mcp",
                                                    "url": "http://127.0.0.1:9/mcp"}, headers=origin)  # fmt: skip
        assert bad.status_code == 400 and 'class="error"' in bad.text and "Bad Name" in bad.text
        added = client.post("/ui/sources/add", data={"csrf": csrf, "name": "hb", "source_type": "openapi",
                                                      "url": f"{httpbin}/spec.json", "base_url": httpbin},
                            headers=origin)  # fmt: skip
        assert added.status_code == 303, added.text
        page = client.get("/ui/sources").text
        assert 'data-source="hb"' in page
        source_id = re.search(r'name="key" value="([^"]+)"', page)
        assert source_id is not None
        synced = client.post("/ui/sources/sync", data={"csrf": csrf, "key": source_id.group(1)}, headers=origin)
        assert synced.status_code == 303, synced.text
        tools = client.get("/ui/tools", params={"q": "hb"}).text
        assert "hb:get_get" in tools
        called = client.post("/ui/tools/hb:get_get/call", data={"csrf": csrf}, headers=origin)
        assert called.status_code == 200 and 'id="result"' in called.text, called.text

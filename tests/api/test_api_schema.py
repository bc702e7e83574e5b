"""Schemathesis against the API's own ``/api/openapi.json`` (bounded examples): no 5xx, and every
response matches the documented schema (problem documents included).

Driven from a plain test (schemathesis' pytest plugin does not load under pytest 9): each operation's
hypothesis strategy generates cases, each case is sent through a TestClient that runs the app's
lifespan, and schemathesis validates the response.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings, strategies as st
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance
from starlette.testclient import TestClient

from mcpmux.api.serve import build_api
from mcpmux.config.models import Config, SecurityConfig
from mcpmux.policy import StateStore
from mcpmux.sources import SourceRegistry
from tests.sources.conftest import KEY

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(__name__)]

EXAMPLES_PER_OPERATION = 15


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    root: Path = tmp_path_factory.mktemp("api-schema")
    registry = SourceRegistry(f"sqlite:///{root / 'sources.db'}", key=KEY)
    store = StateStore(root / "state.db")
    asgi = build_api(Config(security=SecurityConfig(pinning="off")), registry, store=store)
    try:
        with TestClient(asgi, base_url="http://127.0.0.1") as client:
            yield client
    finally:
        registry.close()
        store.close()


def test_the_api_answers_as_documented_and_never_with_a_5xx(app: TestClient) -> None:
    schema = schemathesis.openapi.from_dict(app.get("/api/openapi.json").json())
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 12  # with POST /api/servers/{name}/{action}
    seen: list[tuple[str, int]] = []

    @given(data=st.data())
    @settings(max_examples=EXAMPLES_PER_OPERATION * len(operations), deadline=None,
              suppress_health_check=list(HealthCheck), database=None)  # fmt: skip
    def check(data: st.DataObject) -> None:
        operation = data.draw(st.sampled_from(operations))
        case = data.draw(operation.as_strategy())
        kwargs: dict[str, Any] = case.as_transport_kwargs(base_url="http://127.0.0.1")
        response = app.request(**{k: v for k, v in kwargs.items() if k in _ACCEPTED})
        seen.append((f"{case.method} {case.path}", response.status_code))
        assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.text}"
        case.validate_response(response, checks=[response_schema_conformance, status_code_conformance])

    check()
    assert len({path for path, _ in seen}) >= 8  # most operations were exercised


_ACCEPTED = frozenset({"method", "url", "headers", "params", "json", "content", "data", "files"})

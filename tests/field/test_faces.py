"""Every field server through every face: ``test``, ``tools``, ``call``, ``serve`` (SDK client), ``run``.

One test per (server, face). The five faces of a server run together the first time one of its tests
asks (see ``conftest.field_outcome``); a face broken by a known mcpmux bug is a strict xfail naming the
issue item, so the suite goes red (XPASS) the moment the fix lands: then remove the mark in servers.py.
"""

from __future__ import annotations

import re

import pytest

from tests.field.conftest import FieldOutcome
from tests.field.servers import FACES, FIELD_SERVERS, FieldServer

pytestmark = [pytest.mark.field, pytest.mark.subprocess, pytest.mark.network, pytest.mark.timeout(900)]


def _cases() -> list[object]:
    cases: list[object] = []
    for server in FIELD_SERVERS:
        for face in FACES:
            bug = server.known.get(face)
            marks = [pytest.mark.xfail(strict=True, raises=AssertionError, reason=bug.reason)] if bug else []
            cases.append(pytest.param(server, face, id=f"{server.name}-{face}", marks=marks))
    return cases


def test_at_least_twenty_distinct_servers_from_both_registries_languages_and_generations() -> None:
    packages = {server.package.split(" (")[0] for server in FIELD_SERVERS}
    assert len(packages) >= 20, sorted(packages)
    assert {s.lang for s in FIELD_SERVERS} == {"node", "python"}
    assert {s.transport for s in FIELD_SERVERS} == {"stdio", "http", "openapi"}
    generations = {s.sdk.split(" (")[0] for s in FIELD_SERVERS}
    assert {"TS 1.x", "TS 2.x", "Py 1.x", "Py 2.x"} <= generations


@pytest.mark.slow
@pytest.mark.parametrize(("server", "face"), _cases())
def test_field_server_face(server: FieldServer, face: str, field_outcome: FieldOutcome) -> None:
    result = field_outcome(server)[face]
    bug = server.known.get(face)
    if bug is not None and not result.ok and not re.search(bug.signature, result.detail):
        pytest.fail(f"{server.name} face {face} failed, but not from the known bug ({bug.reason}): {result.detail}")
    assert result.ok, f"{server.name} ({server.package}, {server.transport}) face {face}: {result.detail}"

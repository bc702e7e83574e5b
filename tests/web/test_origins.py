"""Host and Origin values parsed and compared exactly (in-process)."""

from __future__ import annotations

import pytest

from mcpmux.web.origins import ANY_PORT, Address, AddressRules, parse_host, parse_origin


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("localhost", Address("", "localhost", None)),
        ("LocalHost:8080", Address("", "localhost", 8080)),
        ("[::1]:9", Address("", "::1", 9)),
        ("127.0.0.1:0", Address("", "127.0.0.1", 0)),
    ],
)
def test_a_host_header_is_host_and_optional_port(value: str, expected: Address) -> None:
    assert parse_host(value) == expected


@pytest.mark.parametrize(
    "value",
    ["", "a@b", "localhost:", "localhost:65536", "::1", "[::1].x", "host/path", "host name", "h\tx", "localhost:*"],
)
def test_a_malformed_host_header_is_none(value: str) -> None:
    assert parse_host(value) is None


def test_an_origin_gets_its_scheme_default_port_and_nothing_else_passes() -> None:
    assert parse_origin("http://localhost") == Address("http", "localhost", 80)
    assert parse_origin("HTTPS://Example.com") == Address("https", "example.com", 443)
    for value in ("null", "http://a@b", "http://a/", "http:/a", "ftp//a", "http://a:b", "http://a?x", "http://a#x"):
        assert parse_origin(value) is None, value


def test_rules_match_exactly_and_a_star_port_matches_any_port() -> None:
    rules = AddressRules(["http://localhost:*", "https://app.example"], origin=True)
    assert parse_origin("http://localhost:*", wildcard=True) == Address("http", "localhost", ANY_PORT)
    assert rules.allows("http://localhost:1") and rules.allows("http://localhost")
    assert rules.allows("https://app.example:443") and not rules.allows("https://app.example:8443")
    assert not rules.allows("https://localhost:1") and not rules.allows("http://localhost:1@evil.example")
    hosts = AddressRules(["localhost", "example.com:8080"], origin=False)
    assert hosts.allows("localhost") and not hosts.allows("localhost:80")
    assert hosts.allows("EXAMPLE.com:8080") and not hosts.allows("example.com")


def test_a_malformed_rule_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="user@host"):
        AddressRules(["user@host"], origin=False)

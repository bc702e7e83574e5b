"""The provider name codec: legal, stable, order-independent, and never confused."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mcpmux.canonical_names import SERVER_NAME_PATTERN
from mcpmux.errors import NameCollision, ToolNotFound
from mcpmux.provider_names import PROFILES, NameProfile, NameTable, get_profile, provider_name

PROFILE_REGEX = {
    "openai": r"^[a-zA-Z0-9_-]{1,64}$",
    "anthropic": r"^[a-zA-Z0-9_-]{1,128}$",
    "gemini": r"^[a-zA-Z][a-zA-Z0-9_.-]{0,63}$",
    "mcp": r"^[A-Za-z0-9_.-]{1,128}$",
}

servers = st.from_regex(f"\\A{SERVER_NAME_PATTERN}\\Z")
# The small alphabet makes look-alike names (and so collisions) frequent.
tools = st.one_of(st.text(min_size=1, max_size=200), st.text(alphabet="ab_: .-é", min_size=1, max_size=6))
canonical_names = st.one_of(st.builds(lambda s, t: f"{s}:{t}", servers, tools), tools)
profiles = st.sampled_from(sorted(PROFILES))


def test_the_default_form_is_server_double_underscore_tool() -> None:
    table = NameTable(["github:create_issue", "fs:read_file"])
    assert table.to_provider("github:create_issue") == "github__create_issue"
    assert table.to_canonical("fs__read_file") == "fs:read_file"
    assert "fs__read_file" in table
    assert len(table) == 2


def test_pairs_and_canonical_strings_build_the_same_table() -> None:
    by_pairs = NameTable([("github", "create_issue"), ("", "echo")])
    by_names = NameTable(["github:create_issue", "echo"])
    assert by_pairs.items() == by_names.items() == [("echo", "echo"), ("github__create_issue", "github:create_issue")]


def test_illegal_characters_are_mapped_and_runs_collapsed() -> None:
    assert provider_name("web:search the  web/now") == "web__search_the_web_now"
    assert provider_name("fs:read.file", "openai") == "fs__read_file"
    assert provider_name("fs:read.file", "mcp") == "fs__read.file"
    assert provider_name("docs:résumé") == "docs__resume"


def test_a_tool_name_with_nothing_legal_left_keeps_a_distinct_hash() -> None:
    table = NameTable(["jp:日本", "jp:中文"])
    first, second = table.to_provider("jp:日本"), table.to_provider("jp:中文")
    assert first != second
    assert re.fullmatch(r"jp__[0-9a-f]{8}", first)


def test_long_names_are_cut_with_a_stable_hash_suffix() -> None:
    canonical = "server:" + "x" * 100
    name = provider_name(canonical, "openai")
    assert len(name) == 64
    assert re.fullmatch(r"server__x{47}_[0-9a-f]{8}", name)
    assert provider_name(canonical, "openai") == name
    assert provider_name(canonical, "anthropic") == "server__" + "x" * 100


def test_long_names_differing_only_at_the_end_stay_distinct() -> None:
    names = [f"srv:{'a' * 80}{i}" for i in range(20)]
    table = NameTable(names)
    assert len(set(table)) == 20


def test_gemini_names_start_with_a_letter() -> None:
    assert provider_name("1password:get", "gemini") == "t_1password__get"
    assert provider_name("_hidden", "gemini") == "t__hidden"
    assert provider_name("1password:get", "openai") == "1password__get"


def test_the_separator_is_configurable_and_must_be_legal() -> None:
    assert NameTable(["web:search"], separator="-").to_provider("web:search") == "web-search"
    assert NameTable(["web:search"], "mcp", separator=".").to_provider("web:search") == "web.search"
    with pytest.raises(ValueError, match="separator"):
        NameTable(["web:search"], separator=":")


def test_unknown_or_unusable_profiles_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown name profile"):
        get_profile("cohere")
    with pytest.raises(ValueError, match="must allow"):
        NameProfile("letters", "a-z", 20)
    custom = NameProfile("tiny", "a-z0-9_", 12)
    shortened = provider_name("abc:defghijklmn", custom, separator="_")
    assert custom.is_valid(shortened)
    assert re.fullmatch(r"abc_[0-9a-f]{8}", shortened)


def test_similar_server_names_are_distinct_not_confused() -> None:
    table = NameTable(["web:search", "web_scraper:search", "web:scraper_search"])
    assert table.to_canonical("web__search") == "web:search"
    assert table.to_canonical("web_scraper__search") == "web_scraper:search"
    assert table.to_canonical("web__scraper_search") == "web:scraper_search"


def test_separator_inside_names_is_reported_as_a_collision_naming_both() -> None:
    with pytest.raises(NameCollision) as caught:
        NameTable(["a:b__c", "a__b:c"])
    error = caught.value
    assert (error.first, error.second, error.provider_name, error.profile) == ("a:b__c", "a__b:c", "a__b__c", "openai")
    assert "a:b__c" in str(error)
    assert "a__b:c" in str(error)


def test_a_collision_is_reported_the_same_whatever_the_input_order() -> None:
    names = ["x:a b", "x:a_b", "y:ok"]
    errors = []
    for order in (names, names[::-1]):
        with pytest.raises(NameCollision) as caught:
            NameTable(order)
        errors.append((caught.value.first, caught.value.second))
    assert errors[0] == errors[1] == ("x:a b", "x:a_b")


def test_unknown_names_raise_tool_not_found_with_the_closest_names() -> None:
    table = NameTable(["github:create_issue", "github:close_issue", "fs:read_file"])
    with pytest.raises(ToolNotFound) as caught:
        table.to_canonical("github__create_isue")
    assert caught.value.suggestions[0] == "github__create_issue"
    with pytest.raises(ToolNotFound) as by_canonical:
        table.to_provider("fs:read_files")
    assert by_canonical.value.suggestions == ["fs:read_file"]


def test_the_table_never_splits_provider_names() -> None:
    table = NameTable(["srv:tool"])
    with pytest.raises(ToolNotFound):
        table.to_canonical("srv__other")


@settings(max_examples=300, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(canonical=canonical_names, profile=profiles)
def test_every_provider_name_is_legal_and_stable(canonical: str, profile: str) -> None:
    name = provider_name(canonical, profile)
    assert re.fullmatch(PROFILE_REGEX[profile], name), name
    assert provider_name(canonical, profile) == name


@settings(max_examples=200, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(canonical_names, min_size=1, max_size=30, unique=True), profile=profiles, seed=st.integers())
def test_tables_round_trip_and_ignore_input_order(names: list[str], profile: str, seed: int) -> None:
    forms = [provider_name(name, profile) for name in names]
    if len(set(forms)) < len(forms):
        with pytest.raises(NameCollision) as caught:
            NameTable(names, profile)
        first, second = caught.value.first, caught.value.second
        assert first < second
        assert provider_name(first, profile) == provider_name(second, profile) == caught.value.provider_name
        return
    table = NameTable(names, profile)
    shuffled = names[:]
    random.Random(seed).shuffle(shuffled)
    assert NameTable(shuffled, profile).items() == table.items()
    for canonical in names:
        provider = table.to_provider(canonical)
        assert re.fullmatch(PROFILE_REGEX[profile], provider)
        assert table.to_canonical(provider) == canonical
        assert provider == provider_name(canonical, profile)

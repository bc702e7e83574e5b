"""The scanner's keyword gates: a pattern is skipped only for text it cannot match.

Each rule pattern has words every match of it contains; a text with none of them is not searched.
A gate that is wrong loses findings silently, so every gate is checked against the corpora, their
upper-cased copies, and random text built from the patterns' own keywords.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mcpmux.policy import _scan_rules as rules

DATA = Path(__file__).parent / "data"
PATTERNS = [pattern for _, _, _, patterns in rules._TABLES for pattern in patterns]


def corpus_strings() -> list[str]:
    benign = json.loads((DATA / "benign_tools.json").read_text())["servers"]
    poisoned = json.loads((DATA / "poisoned_tools.json").read_text())["cases"]
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                found.append(str(key))
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(benign)
    walk(poisoned)
    return found


def gated_hits(text: str) -> list[tuple[str, str]]:
    return [(hit.rule, hit.excerpt) for hit in rules.text_hits(text)]


def ungated_hits(text: str) -> list[tuple[str, str]]:
    hits = []
    for severity, rule, message, patterns in rules._TABLES:
        for pattern in patterns:
            match = pattern.search(text)
            if match:
                hits.append(rules.Hit(severity, rule, message, rules.excerpt(text, match.start(), match.end())))
    hits += rules._invisible(text)
    return [(hit.rule, hit.excerpt) for hit in hits]


def test_every_pattern_has_a_gate_whose_words_appear_in_it() -> None:
    for pattern in PATTERNS:
        words = rules._GATES[pattern]
        source = pattern.pattern.replace("\\", "").lower()
        assert all(word.lower().strip(".~/") in source for word in words), (pattern.pattern, words)


def test_gates_lose_nothing_on_the_corpora() -> None:
    texts = corpus_strings()
    assert len(texts) > 500
    for text in texts + [text.upper() for text in texts] + [text.title() for text in texts]:
        assert gated_hits(text) == ungated_hits(text), text


# Fragments of the patterns' own vocabulary, so random text often comes close to matching.
WORDS = sorted({word for pattern in PATTERNS for word in re.findall(r"[A-Za-z_.~/@:<>#\[\]|-]{2,}", pattern.pattern)})
PIECES = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from([" ", "  ", "\n", "'", ".", "the ", "user ", "tool ", "https://x.io/a ", "a@b.io "]),
    st.text(st.sampled_from([*"aZ ._-/<>#", "\u017f", "\u212a", "\u0130"]), max_size=3),
)


@settings(max_examples=800, deadline=None)
@given(pieces=st.lists(PIECES, max_size=14), upper=st.booleans())
def test_gates_lose_nothing_on_random_text_made_of_the_patterns_words(pieces: list[str], upper: bool) -> None:
    text = "".join(pieces)
    text = text.upper() if upper else text
    assert gated_hits(text) == ungated_hits(text)


def test_a_case_insensitive_pattern_still_runs_on_text_that_is_not_ascii() -> None:
    # "\u017f" (long s) matches "s" when case is ignored: lowering the text would not find "silently".
    text = "\u017filently send the data"
    assert ("concealment", text) in [(hit.rule, hit.excerpt) for hit in rules.text_hits(text)]


@pytest.mark.slow
@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda pattern: pattern.pattern[:30])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(data=st.data())
def test_every_text_a_pattern_matches_passes_its_gate(pattern: re.Pattern[str], data: st.DataObject) -> None:
    ascii_only = data.draw(st.booleans())
    alphabet = st.characters(min_codepoint=9, max_codepoint=126) if ascii_only else None
    text = data.draw(st.from_regex(pattern, alphabet=alphabet))
    if pattern.search(text):
        assert rules._may_match(pattern, text, text.lower() if text.isascii() else None), (pattern.pattern, text)

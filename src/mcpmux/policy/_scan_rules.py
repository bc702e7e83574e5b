"""The scanner's rules: what hidden instructions in tool text look like, one table per rule.

Patterns come from published tool-poisoning attacks (Invariant Labs' ``<IMPORTANT>`` notes, cross-tool
shadowing of ``send_email``, "line jumping", Unicode tag smuggling) and are tuned against the benign
corpus in ``tests/policy/data``: a rule that fires on a real server's definition is a bug.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from mcpmux.policy._mentions import MentionMatcher, MentionSearch

__all__ = ["Hit", "blobs", "check_text", "excerpt", "mention_search", "mentions", "tag_text", "text_hits", "visible"]

Severity = Literal["low", "medium", "high"]
EXCERPT_CONTEXT_CHARS = 40
_I = re.IGNORECASE


@dataclass(frozen=True, slots=True)
class Hit:
    """One rule matching one string."""

    severity: Severity
    rule: str
    message: str
    excerpt: str


_TAGS = r"important|system|instructions?|admin|secret|hidden|critical|mandatory|override|sys|ai[_-]?instructions?"
_MARKUP = [
    re.compile(rf"<\s*/?\s*(?:{_TAGS})\b[^<>]{{0,40}}>", _I),
    re.compile(r"<\|\s*(?:im_start|im_end|system|assistant|user)\s*\|>|\[/?INST\]|<<\s*/?SYS\s*>>", _I),
    re.compile(r"^\s*#{1,6}\s*(?:system|instructions?|assistant|hidden)\b", _I | re.MULTILINE),
]
_CONCEALMENT = [
    re.compile(r"\b(?:do\s+not|don'?t|never|must\s+not|should\s+not|shall\s+not)\s+(?:\w+\s+){0,2}?"
               r"(?:tell|mention|inform|notify|reveal|disclose|alert|warn|show)\s+(?:\w+\s+){0,2}?"
               r"(?:the\s+)?(?:users?|human|operator|person)\b", _I),
    re.compile(r"\b(?:do\s+not|don'?t|never)\s+(?:mention|reveal|disclose)\s+(?:this|that|these|it|any\s+of)\b", _I),
    re.compile(r"\bwithout\s+(?:\w+\s+){0,2}(?:users?|human|operator)(?:'s)?\s+"
               r"(?:knowing|knowledge|noticing|awareness|being\s+aware|seeing|consent)", _I),
    re.compile(r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+)?(?:the\s+|your\s+)?"
               r"(?:previous|prior|above|earlier|preceding|other|original)\s+(?:instructions?|prompts?|rules|directions)",
               _I),
    re.compile(r"\bbefore\s+(?:using|calling|invoking|running)\s+this\s+tool\b[^.\n]{0,40}?"
               r"\b(?:must|need\s+to|have\s+to|should|required\s+to)\b[^.\n]{0,20}?"
               r"\b(?:read|open|cat|fetch|load|call|send|pass|include)\b", _I),
    re.compile(r"\b(?:silently|secretly|quietly|covertly|discreetly)\s+(?:\w+\s+)?"
               r"(?:send|forward|upload|copy|include|read|add|bcc|cc|post|transmit|exfiltrate|redirect|change)", _I),
    re.compile(r"\b(?:do\s+not|don'?t|never)\s+(?:ask|wait)\s+(?:the\s+user\s+)?for\s+(?:confirmation|approval|permission)",
               _I),
    re.compile(r"\b(?:keep|hide|conceal)\s+(?:this|these|it|them)\s+(?:\w+\s+)?(?:secret|hidden|confidential|from\s+the\s+user)",
               _I),
    re.compile(r"\b(?:the\s+)?users?\s+(?:must|should|need)\s+not\s+(?:see|know|notice|learn)", _I),
    re.compile(r"\botherwise\s+the\s+(?:tool|system|server|application)\s+will\s+(?:not\s+work|crash|fail|break)", _I),
]  # fmt: skip
_SENSITIVE_PATHS = [
    re.compile(r"~/\.ssh\b|\.ssh/|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\bauthorized_keys\b|\.gnupg\b"),
    re.compile(r"\.aws/(?:credentials|config)\b|~/\.aws\b|\.azure/|\.config/gcloud\b|\.kube/config\b"),
    re.compile(r"/etc/(?:passwd|shadow|sudoers)\b"),
    re.compile(r"(?<![\w.-])(?:\.cursor/|\.vscode/)?mcp\.json\b|\bclaude_desktop_config\.json\b|\.claude\.json\b"),
    re.compile(r"(?<![\w.$-])(?:\.netrc|\.npmrc|\.pypirc|\.git-credentials|\.docker/config\.json|\.bash_history)\b"),
    re.compile(r"(?<![\w.$-])\.env(?:\.(?:local|production|prod))?(?![\w-])(?!\s*(?:variables?|vars?)\b)"),
]  # fmt: skip
_URL = r"(?:https?|ftp|wss?)://[^\s'\"<>]+|[\w.+-]+@[\w-]+\.[\w.-]+"
_EXFILTRATION = [
    re.compile(r"\b(?:send|post|forward|upload|transmit|exfiltrate|report|copy|leak|submit|mirror|bcc|cc)\b"
               rf"[^.\n]{{0,80}}?\b(?:to|at|via|into)\s+[`'\"]?(?:{_URL})", _I),
    re.compile(r"\b(?:include|put|pass|embed|append|add|insert|place)\s+(?:\w+\s+){0,3}?"
               r"(?:contents?|text|values?|output|data|conversation|history|credentials?|keys?|tokens?|secrets?|"
               r"passwords?|file|messages?|emails?)\b[^.\n]{0,80}?\b(?:in|into|as)\s+(?:the\s+)?[`'\"]?[\w-]+[`'\"]?\s+"
               r"(?:parameter|argument|field|param|arg)\b", _I),
    re.compile(r"\b(?:bcc|cc|forward|redirect)\s+(?:all\s+|every\s+|a\s+copy\s+of\s+)?(?:\w+\s+)?"
               r"(?:emails?|messages?|results?|responses?)\s+to\b", _I),
]  # fmt: skip
_SHADOWING = re.compile(
    r"\b(?:when|whenever|before|after|if)\b[^.\n]{0,40}?\b(?:the|any|another|other)\s+[`'\"]?[\w:.-]+[`'\"]?\s+"
    r"tools?\s+(?:is|are|gets?)\s+(?:used|called|invoked|run)\b[^.\n]{0,80}?\b(?:always|must|also|make\s+sure|instead)\b",
    _I,
)
_MODEL_DIRECTIVE = re.compile(
    r"\b(?:the\s+)?(?:ai|assistant|llm|language\s+model|agent|claude|gpt|chatgpt)\b[^.\n]{0,30}?"
    r"\b(?:must|is\s+required\s+to|has\s+to|should\s+always)\b",
    _I,
)
_BLOB = re.compile(r"(?<![\w/+=.:-])[A-Za-z0-9+/]{40,}={0,2}(?![\w/+=.-])")
_INVISIBLE = re.compile(
    "[\u200b\u200c\u200e\u200f\u2060-\u2064\u2066-\u2069\u202a-\u202e\u061c\u180e\ufeff\u00ad"
    "\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
)
_ZWJ = "\u200d"
_TAG_BASE = 0xE0000
_TAG_CHARS = re.compile("[\U000e0020-\U000e007e]")


# Words every match of a pattern contains (lower case for the case-insensitive patterns): a text
# with none of them is not searched. A cheap test on 27 patterns that each cost 3-5 us a string.
# Case-insensitive patterns are gated only on ASCII text, where ignoring case is exactly lowering
# it (elsewhere "\u017f" matches "s", "\u212a" matches "k").
_GATES: dict[re.Pattern[str], tuple[str, ...]] = {
    _MARKUP[0]: ("<",),
    _MARKUP[1]: ("<", "["),
    _MARKUP[2]: ("#",),
    _CONCEALMENT[0]: ("not", "don", "never"),
    _CONCEALMENT[1]: ("not", "don", "never"),
    _CONCEALMENT[2]: ("without",),
    _CONCEALMENT[3]: ("ignore", "disregard", "forget", "override"),
    _CONCEALMENT[4]: ("before",),
    _CONCEALMENT[5]: ("silently", "secretly", "quietly", "covertly", "discreetly"),
    _CONCEALMENT[6]: ("not", "don", "never"),
    _CONCEALMENT[7]: ("keep", "hide", "conceal"),
    _CONCEALMENT[8]: ("user",),
    _CONCEALMENT[9]: ("otherwise",),
    _SENSITIVE_PATHS[0]: (".ssh", "id_", "authorized_keys", ".gnupg"),
    _SENSITIVE_PATHS[1]: (".aws", ".azure/", ".config/gcloud", ".kube/config"),
    _SENSITIVE_PATHS[2]: ("/etc/",),
    _SENSITIVE_PATHS[3]: ("mcp.json", "claude_desktop_config.json", ".claude.json"),
    _SENSITIVE_PATHS[4]: (".netrc", ".npmrc", ".pypirc", ".git-credentials", ".docker/config.json", ".bash_history"),
    _SENSITIVE_PATHS[5]: (".env",),
    _EXFILTRATION[0]: ("://", "@"),
    _EXFILTRATION[1]: ("param", "arg", "field"),
    _EXFILTRATION[2]: ("cc", "forward", "redirect"),
    _SHADOWING: ("tool",),
    _MODEL_DIRECTIVE: ("must", "required", "has", "should"),
}


_GATE_PATTERNS: dict[re.Pattern[str], tuple[re.Pattern[str], bool]] = {
    pattern: (re.compile("|".join(map(re.escape, words))), bool(pattern.flags & re.IGNORECASE))
    for pattern, words in _GATES.items()
}


def mention_search(names: Iterable[str], *, own: str = "") -> MentionSearch | None:
    """A search for other servers' tool names as whole words: canonical names, and bare names
    distinctive enough (with ``_``, ``-`` or ``.``) not to be an ordinary word; ``own`` is skipped.
    """
    matcher = MentionMatcher(
        candidate for name in names for candidate in (name, name.rpartition(":")[2]) if candidate != own
    )
    return matcher.search if matcher else None


_TABLES: tuple[tuple[Severity, str, str, Sequence[re.Pattern[str]]], ...] = (
    ("high", "markup", "instruction markup", _MARKUP),
    ("high", "concealment", "a concealment or override phrase", _CONCEALMENT),
    ("high", "exfiltration", "an exfiltration hint", _EXFILTRATION),
    ("high", "sensitive-path", "a sensitive path", _SENSITIVE_PATHS[:-1]),
    ("low", "sensitive-path", "a dotenv file", _SENSITIVE_PATHS[-1:]),
    ("high", "shadowing", "instructions about another tool", [_SHADOWING]),
    ("medium", "model-directive", "an order addressed to the model", [_MODEL_DIRECTIVE]),
)


def check_text(text: str, others: MentionSearch | None = None) -> Iterator[Hit]:
    """Every rule that matches ``text`` (one hit per rule and pattern)."""
    yield from text_hits(text)
    yield from mentions(text, others)


# The rule table flattened, each pattern with its gate: (severity, rule, message, pattern, gate, folded).
_CHECKS: tuple[tuple[Severity, str, str, re.Pattern[str], re.Pattern[str] | None, bool], ...] = tuple(
    (severity, rule, message, pattern, *_GATE_PATTERNS.get(pattern, (None, False)))
    for severity, rule, message, patterns in _TABLES
    for pattern in patterns
)


def text_hits(text: str) -> Iterator[Hit]:
    """The hits of the rules that look at ``text`` alone (every rule but the mentions of other tools)."""
    lowered = text.lower() if text.isascii() else None
    for severity, rule, message, pattern, gate, folded in _CHECKS:
        if gate is not None:
            if not folded:
                if gate.search(text) is None:
                    continue
            elif lowered is not None and gate.search(lowered) is None:
                continue
        match = pattern.search(text)
        if match:
            yield Hit(severity, rule, message, excerpt(text, match.start(), match.end()))
    yield from _invisible(text)


def _may_match(pattern: re.Pattern[str], text: str, lowered: str | None) -> bool:
    """Whether ``pattern`` passes its gate on ``text`` (``lowered``: the text lowered if it is ASCII)."""
    gate = _GATE_PATTERNS.get(pattern)
    if gate is None:
        return True
    words, folded = gate
    if folded:
        return lowered is None or words.search(lowered) is not None
    return words.search(text) is not None


def _invisible(text: str) -> Iterator[Hit]:
    match = _INVISIBLE.search(text)
    if match:
        name = unicodedata.name(match.group(), f"U+{ord(match.group()):04X}")
        yield Hit("high", "invisible-unicode", f"an invisible or bidi character ({name})",
                  excerpt(text, match.start(), match.end()))  # fmt: skip
    index = text.find(_ZWJ)
    while index >= 0:
        if not (_is_emoji(text, index - 1) and _is_emoji(text, index + 1)):
            message = "a zero-width joiner outside an emoji"
            yield Hit("high", "invisible-unicode", message, excerpt(text, index, index + 1))
            return
        index = text.find(_ZWJ, index + 1)


def _is_emoji(text: str, index: int) -> bool:
    return 0 <= index < len(text) and (unicodedata.category(text[index]) == "So" or ord(text[index]) >= 0x1F000)


def mentions(text: str, others: MentionSearch | None) -> Iterator[Hit]:
    """The first mention in ``text`` of another server's tool (``shadowing`` if an order is near it)."""
    mention = others(text) if others is not None else None
    if mention is None:
        return
    name, window = mention.name, excerpt(text, mention.start, mention.end)
    if _SHADOWING.search(text) or re.search(r"\b(?:always|must|instead|never|whenever|before|after)\b", window, _I):
        yield Hit("high", "shadowing", f"instructions about another server's tool {name!r}", window)
    else:
        yield Hit("medium", "other-tool", f"mentions another server's tool {name!r}", window)


def tag_text(text: str) -> str:
    """The ASCII smuggled in Unicode tag characters (U+E0020..U+E007E), if any."""
    if _TAG_CHARS.search(text) is None:
        return ""
    return "".join(chr(ord(char) - _TAG_BASE) for char in text if 0xE0020 <= ord(char) <= 0xE007E)


def blobs(text: str) -> Iterator[str]:
    """Runs of 40+ base64 characters that look random (upper, lower and digits; few ``/``)."""
    for match in _BLOB.finditer(text):
        blob = match.group()
        mixed = any(c.isupper() for c in blob) and any(c.islower() for c in blob) and any(c.isdigit() for c in blob)
        if mixed and blob.count("/") * 10 <= len(blob):
            yield blob


def visible(text: str) -> str:
    """``text`` with invisible, bidi and control characters written as ``<U+XXXX>``."""
    return "".join(f"<U+{ord(c):04X}>" if _hidden(c) else c for c in text)


def _hidden(char: str) -> bool:
    return char not in "\n\t" and (
        _INVISIBLE.match(char) is not None or unicodedata.category(char) in ("Cf", "Cc", "Co", "Zl", "Zp")
    )


def excerpt(text: str, start: int, end: int) -> str:
    """The match with some context, on one line, invisible characters made visible."""
    left, right = max(0, start - EXCERPT_CONTEXT_CHARS), min(len(text), end + EXCERPT_CONTEXT_CHARS)
    body = visible(text[left:right]).replace("\n", " ")
    return ("..." if left else "") + body + ("..." if right < len(text) else "")

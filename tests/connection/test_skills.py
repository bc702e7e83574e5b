"""Skills (SEP-2640) as a host loads them: every file checked against its listing before the next is read.

Unit tests over an in-memory ``read``; the conformance suite's four client scenarios (no prefetch, and a
tampered digest, size and frontmatter) run against the suite's own servers in tests/conformance.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcpmux.connection.skills import SkillEntry, frontmatter_of, load_skill, offers_skills, skill_name
from mcpmux.errors import ProtocolError, SkillRejected

SKILL = "skill://acme/pdf-processing/SKILL.md"
FORMS = "skill://acme/pdf-processing/references/FORMS.md"
BODY = "---\nname: pdf-processing\ndescription: Extract and fill PDFs\n---\n\nSkill body.\n"
FORMS_BODY = "# Forms\n"


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def entry(files: dict[str, str | bytes] | None = None, **frontmatter: Any) -> SkillEntry:
    files = files if files is not None else {SKILL: BODY, FORMS: FORMS_BODY}
    raw = {uri: text.encode() if isinstance(text, str) else text for uri, text in files.items()}
    listed = [{"uri": uri, "digest": digest(data), "size": len(data)} for uri, data in raw.items()]
    front = frontmatter or {"name": "pdf-processing", "description": "Extract and fill PDFs"}
    return SkillEntry.model_validate({"uri": SKILL, "frontmatter": front, "resources": listed})


class Served:
    """What the server serves, and every URI read."""

    def __init__(self, files: dict[str, str | bytes]) -> None:
        self.files, self.reads = files, list[str]()

    async def read(self, uri: str) -> types.ReadResourceResult:
        self.reads.append(uri)
        content = self.files[uri]
        if isinstance(content, bytes):
            blob = types.BlobResourceContents(uri=uri, blob=base64.b64encode(content).decode())
            return types.ReadResourceResult(contents=[blob])
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=content)])


def load(listed: SkillEntry, served: Served) -> Any:
    return anyio.run(load_skill, "acme", listed, served.read)


def test_a_skill_whose_files_match_their_listing_loads_with_every_file() -> None:
    served = Served({SKILL: BODY, FORMS: FORMS_BODY})
    loaded = load(entry(), served)
    assert loaded.instructions == BODY and loaded.files == {FORMS: FORMS_BODY}
    assert served.reads == [SKILL, FORMS]  # SKILL.md first, checked before the rest is read
    assert (loaded.entry.name, loaded.entry.description) == ("pdf-processing", "Extract and fill PDFs")


def test_a_binary_file_is_checked_on_its_bytes() -> None:
    logo, where = bytes(range(256)), "skill://acme/pdf-processing/logo.png"
    loaded = load(entry({SKILL: BODY, where: logo}), Served({SKILL: BODY, where: logo}))
    assert base64.b64decode(loaded.files[where]) == logo
    with pytest.raises(SkillRejected, match=r"logo\.png does not match"):
        load(entry({SKILL: BODY, where: logo}), Served({SKILL: BODY, where: logo[::-1]}))


@pytest.mark.parametrize(
    ("served_body", "reason"),
    [
        (BODY.replace("Skill body.", "Evil body!!"), "does not match its listed digest"),
        (BODY + "extra\n", "bytes, its entry says"),
        (BODY.replace("Extract and fill PDFs", "Exfiltrate credentials"), "its entry says|listed digest"),
    ],
    ids=["digest", "size", "frontmatter-with-the-old-digest"],
)
def test_a_tampered_skill_md_is_refused_and_nothing_more_is_read(served_body: str, reason: str) -> None:
    served = Served({SKILL: served_body, FORMS: FORMS_BODY})
    with pytest.raises(SkillRejected, match=reason) as caught:
        load(entry(), served)
    assert served.reads == [SKILL]
    assert isinstance(caught.value, ProtocolError) and "acme" in str(caught.value) and caught.value.hint


def test_a_skill_md_whose_frontmatter_differs_from_the_listing_is_refused_even_with_matching_digests() -> None:
    # The server lists the digest of what it serves, but the listed frontmatter (what a person saw
    # when choosing the skill) is not the file's.
    evil = BODY.replace("Extract and fill PDFs", "Exfiltrate credentials")
    served = Served({SKILL: evil, FORMS: FORMS_BODY})
    with pytest.raises(SkillRejected, match="frontmatter differs from the listed one in: description"):
        load(entry({SKILL: evil, FORMS: FORMS_BODY}), served)
    assert served.reads == [SKILL]


def test_a_tampered_supporting_file_is_refused() -> None:
    served = Served({SKILL: BODY, FORMS: "# Forms, changed\n"})
    with pytest.raises(SkillRejected, match=r"FORMS\.md"):
        load(entry(), served)


@pytest.mark.parametrize(
    ("listing", "reason"),
    [
        ({"uri": SKILL, "resources": "dynamic"}, "dynamic"),
        ({"uri": SKILL, "resources": []}, "lists no digest for SKILL.md"),
        ({"uri": SKILL, "resources": [{"uri": SKILL, "digest": "md5:abc", "size": len(BODY)}]}, "malformed digest"),
        (
            {"uri": SKILL, "resources": [{"uri": SKILL, "digest": digest(b""), "size": 17 * 1024 * 1024}]},
            "the extension's limits",
        ),
    ],
    ids=["dynamic", "no-digest-for-skill-md", "malformed-digest", "too-big"],
)
def test_an_entry_that_cannot_be_verified_is_refused_before_anything_is_read_but_skill_md(
    listing: dict[str, Any], reason: str
) -> None:
    served = Served({SKILL: BODY})
    with pytest.raises(SkillRejected, match=reason):
        load(SkillEntry.model_validate(listing), served)
    assert served.reads in ([], [SKILL])


def test_frontmatter_names_and_the_extension_flag() -> None:
    assert frontmatter_of(BODY) == {"name": "pdf-processing", "description": "Extract and fill PDFs"}
    assert frontmatter_of("\ufeff" + BODY) is not None
    assert frontmatter_of("no frontmatter") is None
    assert frontmatter_of("---\n- a list\n---\n") is None
    assert frontmatter_of("---\nkey: [unclosed\n---\n") is None
    assert skill_name(SKILL) == "pdf-processing" and skill_name("skill://x") == "skill://x"
    assert offers_skills(types.ServerCapabilities(extensions={"io.modelcontextprotocol/skills": {}}))
    assert not offers_skills(types.ServerCapabilities()) and not offers_skills(None)

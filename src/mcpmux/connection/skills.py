"""Agent skills served by MCP servers (the ``io.modelcontextprotocol/skills`` extension, SEP-2640).

A server that declares the extension lists its skills with ``skills/list``: each entry names its
``SKILL.md`` by URI (``skill://<path>/<name>/SKILL.md``), carries that file's YAML frontmatter, and
lists the skill's files with a ``sha256:`` digest and a size each. The files themselves are plain
resources (``resources/read``).

Two rules from the extension that a host must keep, and this module keeps:

- **No prefetch.** Listing reads no file: a skill's files are read only when it is loaded
  (:func:`load_skill`), not on connection, listing or approval.
- **Verify on read.** Every file read is checked against its entry (byte size first, then the
  digest), and ``SKILL.md``'s frontmatter must equal the entry's field by field. On any
  discrepancy the skill is not loaded (:class:`~mcpmux.errors.SkillRejected`) and nothing more of it
  is read: a server cannot list one skill and serve another.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from mcpmux.errors import SkillRejected

__all__ = [
    "EXTENSION",
    "LIST_METHOD",
    "ListSkillsRequest",
    "ListSkillsResult",
    "LoadedSkill",
    "SkillEntry",
    "SkillFile",
    "load_skill",
    "offers_skills",
    "skill_name",
]

EXTENSION = "io.modelcontextprotocol/skills"
LIST_METHOD = "skills/list"
SKILL_FILE = "SKILL.md"
MAX_FILES = 512
"""Files of one skill read at most (the extension's own limit on a skill's resources)."""
MAX_TOTAL_BYTES = 16 * 1024 * 1024
"""Bytes of one skill read at most (the extension's 16 MiB limit, summed over its files)."""
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_FRONTMATTER = re.compile(r"^---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", re.DOTALL)


class SkillFile(BaseModel):
    """One file of a skill, as its entry lists it."""

    model_config = ConfigDict(extra="allow")

    uri: str
    digest: str
    size: int = Field(ge=0)


class SkillEntry(BaseModel):
    """One skill of ``skills/list``: its ``SKILL.md`` URI, frontmatter and files (or ``"dynamic"``)."""

    model_config = ConfigDict(extra="allow")

    uri: str
    frontmatter: dict[str, Any] = Field(default_factory=dict)
    resources: list[SkillFile] | Literal["dynamic"] = Field(default_factory=list)

    @property
    def name(self) -> str:
        """The skill's name: its frontmatter ``name``, else the URI's last directory."""
        named = self.frontmatter.get("name")
        return named if isinstance(named, str) and named else skill_name(self.uri)

    @property
    def description(self) -> str:
        described = self.frontmatter.get("description")
        return described if isinstance(described, str) else ""


class ListSkillsRequest(types.PaginatedRequest[Literal["skills/list"]]):
    """``skills/list``: one page of the server's skills."""

    method: Literal["skills/list"] = "skills/list"


class ListSkillsResult(types.PaginatedResult):
    """One page of ``skills/list``."""

    model_config = ConfigDict(extra="allow")

    skills: list[SkillEntry] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class LoadedSkill:
    """A skill whose every file was read and matched its entry.

    Attributes:
        entry: what the server listed.
        instructions: ``SKILL.md`` as read (frontmatter and body).
        files: every other listed file's text, by URI (binary files as the server sent them, base64).
    """

    entry: SkillEntry
    instructions: str
    files: dict[str, str]


def offers_skills(capabilities: types.ServerCapabilities | None) -> bool:
    """Whether a server's capabilities declare the skills extension."""
    extensions = None if capabilities is None else capabilities.extensions
    return bool(extensions) and EXTENSION in extensions  # type: ignore[operator]


def skill_name(uri: str) -> str:
    """The name a skill's ``SKILL.md`` URI gives it (the directory holding the file)."""
    parts = [part for part in uri.partition("://")[2].split("/") if part]
    return parts[-2] if len(parts) >= 2 and parts[-1] == SKILL_FILE else uri


Read = Callable[[str], Awaitable[types.ReadResourceResult]]


async def load_skill(server: str, entry: SkillEntry, read: Read) -> LoadedSkill:
    """Read ``entry``'s ``SKILL.md``, then its other files, each checked before the next is read.

    Raises:
        SkillRejected: a file's size, digest or (for ``SKILL.md``) frontmatter does not match the
            entry, or the entry itself cannot be verified; nothing more of the skill is read.
    """
    if entry.resources == "dynamic":
        reason = "its files are listed as dynamic, so they cannot be checked against digests"
        raise SkillRejected(server, entry.uri, reason)
    listed = {file.uri: file for file in entry.resources}
    main = listed.get(entry.uri)
    if main is None:
        raise SkillRejected(server, entry.uri, f"its entry lists no digest for {SKILL_FILE} itself")
    others = [file for file in entry.resources if file.uri != entry.uri]
    if len(entry.resources) > MAX_FILES or sum(file.size for file in entry.resources) > MAX_TOTAL_BYTES:
        reason = f"it lists more than {MAX_FILES} files or {MAX_TOTAL_BYTES} bytes (the extension's limits)"
        raise SkillRejected(server, entry.uri, reason)
    instructions = _checked(server, entry, main, await read(main.uri))
    found = frontmatter_of(instructions)
    if found is None:
        raise SkillRejected(server, entry.uri, f"{SKILL_FILE} has no YAML frontmatter block")
    differing = sorted(
        key for key in found.keys() | entry.frontmatter.keys() if found.get(key) != entry.frontmatter.get(key)
    )
    if differing:
        fields = ", ".join(differing)
        raise SkillRejected(server, entry.uri, f"{SKILL_FILE}'s frontmatter differs from the listed one in: {fields}")
    files = {file.uri: _checked(server, entry, file, await read(file.uri)) for file in others}
    return LoadedSkill(entry, instructions, files)


def frontmatter_of(text: str) -> dict[str, Any] | None:
    """The YAML frontmatter at the top of a ``SKILL.md`` (``None``: none, or not a mapping)."""
    match = _FRONTMATTER.match(text.removeprefix("\ufeff"))
    if match is None:
        return None
    try:
        loaded = YAML(typ="safe", pure=True).load(match.group(1))
    except YAMLError:
        return None
    return dict(loaded) if isinstance(loaded, dict) else None


def _checked(server: str, entry: SkillEntry, file: SkillFile, result: types.ReadResourceResult) -> str:
    """The text of ``file`` as read, if its bytes match its size and digest."""
    if not _DIGEST.match(file.digest):
        raise SkillRejected(server, entry.uri, f"{file.uri} has a malformed digest {file.digest[:80]!r}")
    contents = [c for c in result.contents if c.uri == file.uri] or list(result.contents[:1])
    if not contents:
        raise SkillRejected(server, entry.uri, f"reading {file.uri} returned nothing")
    content = contents[0]
    if isinstance(content, types.TextResourceContents):
        text, data = content.text, content.text.encode()
    else:
        text = content.blob
        try:
            data = base64.b64decode(content.blob, validate=True)
        except binascii.Error as exc:
            raise SkillRejected(server, entry.uri, f"{file.uri} came back as malformed base64") from exc
    if len(data) != file.size:
        raise SkillRejected(server, entry.uri, f"{file.uri} is {len(data)} bytes, its entry says {file.size}")
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if digest != file.digest:
        raise SkillRejected(server, entry.uri, f"{file.uri} does not match its listed digest (got {digest})")
    return text

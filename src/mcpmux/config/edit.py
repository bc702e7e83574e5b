"""Edit mcpmux's own YAML in place: add, remove, enable, disable and rename server entries.

The edit itself is a ruamel.yaml round trip (comments, key order and quoting survive). Two things
make the result keep the user's bytes outside the edited entry:

- ruamel stores the comment block that follows a sequence item on that item's deepest last node,
  so removing (or appending after) the last item would drop or misplace the comments that follow
  it (often the heading of the next section). :class:`ConfigDocument` moves that block to the new
  last item, so ``add`` then ``remove`` restores the file byte for byte.
- ruamel re-emits some constructs in its own way (multi-line flow mappings, odd indentation). The
  new text is therefore merged into the original one: only the lines the edit changed are taken
  from ruamel's output; every other line is the user's own (see :func:`merge_edit`).

The edited text is validated with the loader before it replaces the file (never an invalid file),
and written atomically (a temporary file in the same folder, then a rename). Values are handled
as written, so ``${VAR}`` references stay references and nothing resolved is ever written back.
"""

from __future__ import annotations

import io
import math
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark, YAMLError
from ruamel.yaml.tokens import CommentToken

from mcpmux.config.loader import load_file
from mcpmux.errors import ConfigError, ConfigProblem
from mcpmux.names import SERVER_NAME_PATTERN, is_valid_server_name

__all__ = ["SKELETON", "ConfigDocument", "merge_edit", "secret_warnings"]

SKELETON = "mcp:\n  servers:\n"
# Long lines are the user's choice: never re-wrap them.
_WIDTH = 4096


class _AnyVariable(Mapping[str, str]):
    """An environment in which every variable is set, so validation ignores unset ``${VAR}``s."""

    def __init__(self, real: Mapping[str, str]) -> None:
        self._real = real

    def __getitem__(self, key: str) -> str:
        return self._real.get(key) or "placeholder"

    def __iter__(self) -> Iterator[str]:
        return iter(self._real)

    def __len__(self) -> int:
        return len(self._real)

    def __contains__(self, key: object) -> bool:
        return True


class ConfigDocument:
    """One mcpmux YAML file, loaded for editing.

    Args:
        path: the file; it need not exist (it is then created from :data:`SKELETON` on save).

    Raises:
        ConfigError: the file cannot be read, is not YAML, or is not in mcpmux's own format.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        raw = path.read_bytes().decode("utf-8-sig") if path.is_file() else ""
        self._crlf = "\r\n" in raw
        self.original = raw.replace("\r\n", "\n") if raw.strip() else SKELETON
        self._yaml = _yaml_for(self.original, str(path))
        self.tree = _load(self._yaml, self.original, str(path))
        self._base = self._dump()

    # -- queries -----------------------------------------------------------------------------

    @property
    def servers(self) -> CommentedSeq | CommentedMap:
        """The ``mcp.servers`` collection (a list, or a mapping of names to entries)."""
        mcp = self.tree.get("mcp")
        if mcp is None:
            mcp = self.tree["mcp"] = CommentedMap()
        servers = mcp.get("servers")
        if isinstance(servers, CommentedSeq | CommentedMap):
            return servers
        mcp["servers"] = CommentedSeq()
        return mcp["servers"]  # type: ignore[no-any-return]

    def names(self) -> list[str]:
        """The server names this file defines, in order."""
        if isinstance(self.servers, CommentedMap):
            return [str(k) for k in self.servers]
        return [str(e.get("name")) for e in self.servers if isinstance(e, dict)]

    def entry(self, name: str) -> CommentedMap:
        """The entry of server ``name`` as written (``${VAR}`` references unexpanded)."""
        return self.servers[self._key(name)]  # type: ignore[no-any-return]

    # -- edits -------------------------------------------------------------------------------

    def add(self, entry: Mapping[str, Any]) -> None:
        """Append ``entry`` (mcpmux's shape, with ``name``).

        Raises:
            ConfigError: the name is illegal or already defined in this file.
        """
        name = str(entry.get("name", ""))
        self._check_new_name(name)
        servers = self.servers
        node = _commented(entry)
        if isinstance(servers, CommentedMap):
            node.pop("name", None)
            keys = list(servers)
            block = _take_block(servers, keys[-1]) if keys else ""
            servers[name] = node
        else:
            block = _take_block(servers, len(servers) - 1) if servers else _take_block(self.tree["mcp"], "servers")
            servers.fa.set_block_style()
            servers.append(node)
        _put_block(servers, name if isinstance(servers, CommentedMap) else len(servers) - 1, block)

    def remove(self, name: str) -> None:
        """Remove server ``name``, keeping the comments that follow its entry.

        Raises:
            ConfigError: no such server in this file.
        """
        servers, key = self.servers, self._key(name)
        keys = list(servers) if isinstance(servers, CommentedMap) else list(range(len(servers)))
        position = keys.index(key)
        block = _take_block(servers, key)
        if position > 0:
            previous = keys[position - 1]
            _put_block(servers, previous, _drop_heading(_take_block(servers, previous)) + block)
        del servers[key]
        if position == 0 and len(servers):
            self._set_heading(block.lstrip("\n"))
        elif not len(servers):
            self._set_heading("")
            # A block list becomes `servers:` again (the skeleton), a flow list stays `[]`.
            if not servers.fa.flow_style():
                self.tree["mcp"]["servers"] = None
            _put_block(self.tree["mcp"], "servers", block)

    def set_enabled(self, name: str, enabled: bool) -> None:
        """Set ``enabled`` of server ``name`` (written only when false; true is the default)."""
        entry = self.entry(name)
        if enabled:
            entry.pop("enabled", None)
        elif "enabled" in entry:
            entry["enabled"] = False
        else:
            entry.insert(_after_identity(entry), "enabled", False)

    def rename(self, old: str, new: str) -> None:
        """Rename server ``old`` to ``new`` in place.

        Raises:
            ConfigError: ``old`` is missing, or ``new`` is illegal or taken.
        """
        key = self._key(old)
        self._check_new_name(new)
        servers = self.servers
        if isinstance(servers, CommentedSeq):
            servers[key]["name"] = new
            return
        position = list(servers).index(key)
        comments = servers.ca.items.pop(key, None)
        servers.insert(position, new, servers.pop(key))
        if comments is not None:
            servers.ca.items[new] = comments

    # -- output ------------------------------------------------------------------------------

    def text(self) -> str:
        """The edited file: the user's bytes, with only the edited lines changed."""
        merged = merge_edit(self.original, self._base, self._dump())
        return merged.replace("\n", "\r\n") if self._crlf else merged

    def save(self, environ: Mapping[str, str] | None = None) -> None:
        """Validate the edited file with the loader, then replace the file atomically.

        Unset ``${VAR}`` references do not fail validation (they may be set later).

        Raises:
            ConfigError: the edited document would be invalid (the file is left untouched).
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp.yaml")
        try:
            with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
                stream.write(self.text())
            load_file(temp, environ=_AnyVariable(os.environ if environ is None else environ))
            if self.path.exists():
                os.chmod(temp, self.path.stat().st_mode & 0o7777)
            os.replace(temp, self.path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    # -- private -----------------------------------------------------------------------------

    def _dump(self) -> str:
        stream = io.StringIO()
        self._yaml.dump(self.tree, stream)
        return stream.getvalue()

    def _key(self, name: str) -> Any:
        servers = self.servers
        if isinstance(servers, CommentedMap):
            if name in servers:
                return name
        else:
            for index, entry in enumerate(servers):
                if isinstance(entry, dict) and entry.get("name") == name:
                    return index
        raise ConfigError(ConfigProblem(str(self.path), "mcp.servers", f"no server named {name!r} in this file"))

    def _check_new_name(self, name: str) -> None:
        where = str(self.path)
        if not is_valid_server_name(name):
            reason = f"illegal server name {name!r}: names match {SERVER_NAME_PATTERN}"
            raise ConfigError(ConfigProblem(where, "mcp.servers", reason))
        if name in self.names():
            raise ConfigError(ConfigProblem(where, "mcp.servers", f"a server named {name!r} already exists"))

    def _set_heading(self, block: str) -> None:
        """The comment lines before the first entry live on the ``servers`` key of ``mcp``."""
        slots = self.tree["mcp"].ca.items.setdefault("servers", [None, None, None, None])
        slots[3] = [CommentToken(block.lstrip(" "), CommentMark(_indent(block)), None)] if block.strip() else None


def merge_edit(original: str, base: str, edited: str) -> str:
    """Apply the change from ``base`` to ``edited`` onto ``original``, line by line.

    ``base`` is ruamel's rendering of ``original`` before the edit. Lines the edit did not touch
    come from ``original``; a changed line that falls in a region ruamel rendered differently from
    the user takes that whole region from ``edited``.
    """
    o_lines, b_lines, e_lines = (t.splitlines(keepends=True) for t in (original, base, edited))
    to_orig = _boundaries(b_lines, o_lines)
    to_edit = _boundaries(b_lines, e_lines)
    regions = _anchored_regions(b_lines, e_lines, to_orig)
    out: list[str] = []
    cursor = 0
    for start, end in regions:
        out += o_lines[cursor : min(to_orig[start])]
        out += e_lines[min(to_edit[start]) : max(to_edit[end])]
        cursor = max(to_orig[end])
    out += o_lines[cursor:]
    return "".join(out)


def _boundaries(a: list[str], b: list[str]) -> dict[int, list[int]]:
    """Line boundaries of ``a`` that align with a boundary of ``b`` (all candidates)."""
    table: dict[int, list[int]] = {}
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        pairs = zip(range(i1, i2 + 1), range(j1, j2 + 1), strict=True) if tag == "equal" else [(i1, j1), (i2, j2)]
        for i, j in pairs:
            table.setdefault(i, []).append(j)
    return table


def _anchored_regions(base: list[str], edited: list[str], to_orig: dict[int, list[int]]) -> list[tuple[int, int]]:
    hunks = [
        (i1, i2)
        for tag, i1, i2, _, _ in SequenceMatcher(None, base, edited, autojunk=False).get_opcodes()
        if tag != "equal"
    ]
    regions: list[tuple[int, int]] = []
    for i1, i2 in hunks:
        start = max(b for b in to_orig if b <= i1)
        end = min(b for b in to_orig if b >= i2)
        if regions and start <= regions[-1][1]:
            start = regions.pop()[0]
        regions.append((start, end))
    return regions


# -- comment blocks --------------------------------------------------------------------------


def _slot(container: Any, key: Any) -> tuple[Any, Any, int]:
    """Where ruamel keeps the comment after ``container[key]``: its deepest last block node."""
    value = container[key]
    if isinstance(value, CommentedMap | CommentedSeq) and len(value) and not value.fa.flow_style():
        return _slot(value, _last_key(value))
    return container, key, 2 if isinstance(container, CommentedMap) else 0


def _last_key(container: Any) -> Any:
    return list(container)[-1] if isinstance(container, CommentedMap) else len(container) - 1


def _enclosing(container: Any, key: Any) -> list[Any]:
    """The collections that end right after ``container[key]``, innermost first.

    When the last value is a flow collection, ruamel keeps the following comments in their
    ``ca.end`` instead of on a node.
    """
    if not len(container) or key != _last_key(container):
        return []
    value = container[key]
    inner = []
    if isinstance(value, CommentedMap | CommentedSeq) and len(value) and not value.fa.flow_style():
        inner = _enclosing(value, _last_key(value))
    return [*inner, container]


def _take_end(node: Any) -> str:
    tokens = getattr(node.ca, "end", None) or []
    node.ca.end = None
    return "".join(_token_text(t) for t in tokens)


def _token_text(token: CommentToken) -> str:
    value = str(token.value)
    column = token.start_mark.column if token.start_mark is not None else 0
    return " " * column + value if value.startswith("#") else value


def _slot_token(node: Any, key: Any, position: int) -> CommentToken | None:
    entry = node.ca.items.get(key)
    return entry[position] if entry and len(entry) > position and entry[position] is not None else None


def _take_block(container: Any, key: Any) -> str:
    """Detach the comment lines after ``container[key]``, leaving its end-of-line comment."""
    ends = "".join(_take_end(node) for node in _enclosing(container, key))
    node, slot_key, position = _slot(container, key)
    token = _slot_token(node, slot_key, position)
    if token is None:
        return ends
    eol, _, block = str(token.value).partition("\n")
    if eol.strip():
        token.value = eol + "\n"
    else:
        node.ca.items[slot_key][position] = None
    return block + ends


def _put_block(container: Any, key: Any, block: str) -> None:
    """Attach ``block`` (comment lines) after ``container[key]``, after its end-of-line comment."""
    if not block:
        return
    node, slot_key, position = _slot(container, key)
    token = _slot_token(node, slot_key, position)
    if token is not None:
        token.value = str(token.value) + block
        return
    slots = node.ca.items.setdefault(slot_key, [None, None, None, None])
    slots[position] = CommentToken("\n" + block, CommentMark(0), None)


def _drop_heading(block: str) -> str:
    """Drop the comment lines that sit directly on top of the next entry (they describe it)."""
    lines = block.splitlines(keepends=True)
    while lines and lines[-1].strip().startswith("#"):
        lines.pop()
    return "".join(lines)


def _indent(block: str) -> int:
    first = block.splitlines()[0] if block else ""
    return len(first) - len(first.lstrip(" "))


# -- building ----------------------------------------------------------------------------------

_IDENTITY_KEYS = ("name", "type")


def _after_identity(entry: CommentedMap) -> int:
    keys = list(entry)
    return max((keys.index(k) + 1 for k in _IDENTITY_KEYS if k in entry), default=0)


def _commented(entry: Mapping[str, Any]) -> CommentedMap:
    """A new entry: block style, with ``args``, ``env`` and ``headers`` in flow style."""
    node = CommentedMap()
    for key, value in entry.items():
        if isinstance(value, Mapping):
            value = CommentedMap(value)
            value.fa.set_flow_style()
        elif isinstance(value, list | tuple):
            value = CommentedSeq(value)
            value.fa.set_flow_style()
        node[key] = value
    return node


def _yaml_for(text: str, source: str) -> YAML:
    """A round-trip YAML whose indentation matches the file's own."""
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = _WIDTH
    mapping, sequence, offset = _guess_indent(_load(yaml, text, source))
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yaml


def _guess_indent(tree: Any) -> tuple[int, int, int]:
    mcp = tree.get("mcp") if isinstance(tree, dict) else None
    if not isinstance(mcp, CommentedMap) or not mcp:
        return 2, 4, 2
    mapping = mcp.lc.col or 2
    servers = mcp.get("servers")
    if not isinstance(servers, CommentedSeq) or not servers or servers.fa.flow_style():
        return mapping, mapping + 2, mapping
    key_col = mcp.lc.key("servers")[1]
    dash_col = servers.lc.col if servers.lc.col is not None else key_col + mapping
    item_col = servers.lc.item(0)[1]
    return mapping, max(item_col - key_col, 2), max(dash_col - key_col, 0)


def _load(yaml: YAML, text: str, source: str) -> Any:
    try:
        tree = yaml.load(text)
    except YAMLError as exc:
        raise ConfigError(ConfigProblem(source, "", f"invalid YAML: {exc}")) from exc
    if tree is None:
        tree = CommentedMap()
    if not isinstance(tree, CommentedMap) or not isinstance(tree.get("mcp", {}), dict | type(None)):
        raise ConfigError(ConfigProblem(source, "", "not an mcpmux YAML file (expected a top-level mcp: mapping)"))
    return tree


# -- secrets written literally ---------------------------------------------------------------

_SECRET_PREFIXES = ("ghp_", "gho_", "ghs_", "github_pat_", "sk-", "sk_", "rk_", "xox", "glpat-", "AKIA", "AIza", "hf_")
_SECRET_KEY = re.compile(r"token|secret|passw|api[_-]?key|auth|credential|private", re.IGNORECASE)
_MIN_SECRET_LEN = 8
_HIGH_ENTROPY_LEN = 24
_HIGH_ENTROPY_BITS = 3.5


def secret_warnings(entry: Mapping[str, Any]) -> list[str]:
    """A warning for every env or header value that looks like a secret written literally."""
    warnings = []
    prefix = re.sub(r"[^A-Z0-9]+", "_", str(entry.get("name", "server")).upper())
    for field in ("env", "headers"):
        for key, value in (entry.get(field) or {}).items():
            if isinstance(value, str) and _looks_secret(str(key), value):
                var = str(key).upper() if field == "env" else f"{prefix}_TOKEN"
                example = f"'{key}=${{{var}}}'" if field == "env" else f"'{key}: {_scheme(value)}${{{var}}}'"
                warnings.append(
                    f"{field} {key} looks like a secret written literally; store a reference instead "
                    f"(--{field.rstrip('s')} {example}) and export {var}"
                )
    return warnings


def _scheme(value: str) -> str:
    words = value.split()
    return f"{words[0]} " if len(words) > 1 else ""


def _looks_secret(key: str, value: str) -> bool:
    if "${" in value or not value.strip():
        return False
    token = value.split()[-1]
    if token.startswith(_SECRET_PREFIXES) and len(token) >= _MIN_SECRET_LEN:
        return True
    if _SECRET_KEY.search(key) and len(token) >= _MIN_SECRET_LEN:
        return True
    return len(token) >= _HIGH_ENTROPY_LEN and "/" not in token and _entropy_bits(token) >= _HIGH_ENTROPY_BITS


def _entropy_bits(text: str) -> float:
    counts = {c: text.count(c) for c in set(text)}
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())

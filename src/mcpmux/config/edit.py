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
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.tokens import CommentToken

from mcpmux.canonical_names import SERVER_NAME_PATTERN, is_valid_server_name
from mcpmux.config._comments import drop_heading, indent_of, put_block, take_block, token_text
from mcpmux.config.bounds import check_tree
from mcpmux.config.linemerge import merge_edit
from mcpmux.config.literal_secrets import secret_warnings
from mcpmux.config.loader import load_file
from mcpmux.config.parse import load_yaml, read_text
from mcpmux.config.paths import project_config_file
from mcpmux.config.trust import trusting_edit
from mcpmux.errors import ConfigError, ConfigProblem

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
        if path.suffix.lower() in (".json", ".jsonc"):
            hint = f"edit it by hand, or copy its servers into mcpmux.yaml: mcpmux import --from {path}"
            raise _refused(str(path), "only mcpmux's YAML files are edited; edit this JSON by hand", hint, "")
        raw = _read_text(path)
        self._bom = raw.startswith("\ufeff")
        raw = raw.removeprefix("\ufeff")
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
        self.check_new_name(name)
        servers = self.servers
        node = _commented(entry)
        if isinstance(servers, CommentedMap):
            node.pop("name", None)
            keys = list(servers)
            block = take_block(servers, keys[-1]) if keys else ""
            servers[name] = node
        else:
            block = take_block(servers, len(servers) - 1) if servers else take_block(self.tree["mcp"], "servers")
            servers.fa.set_block_style()
            servers.append(node)
        put_block(servers, name if isinstance(servers, CommentedMap) else len(servers) - 1, block)

    def remove(self, name: str) -> None:
        """Remove server ``name``, keeping the comments that follow its entry.

        Raises:
            ConfigError: no such server in this file.
        """
        servers, key = self.servers, self._key(name)
        keys = list(servers) if isinstance(servers, CommentedMap) else list(range(len(servers)))
        position = keys.index(key)
        block = take_block(servers, key)
        if position > 0:
            previous = keys[position - 1]
            put_block(servers, previous, drop_heading(take_block(servers, previous)) + block)
        del servers[key]
        if position == 0 and len(servers):
            kept = drop_heading(self._heading())
            # One blank line between the kept comments and the next entry's, not two.
            self._set_heading(kept + (block.lstrip("\n") if not kept or kept.endswith("\n\n") else block))
        elif not len(servers):
            self._set_heading("")
            # A block list becomes `servers:` again (the skeleton), a flow list stays `[]`.
            if not servers.fa.flow_style():
                self.tree["mcp"]["servers"] = None
            put_block(self.tree["mcp"], "servers", block)

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
        self.check_new_name(new)
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
        merged = merged.replace("\n", "\r\n") if self._crlf else merged
        return "\ufeff" + merged if self._bom else merged

    def save(self, environ: Mapping[str, str] | None = None, *, vouch: bool = True) -> None:
        """Validate the edited file with the loader, then replace the file atomically.

        Unset ``${VAR}`` references do not fail validation (they may be set later). A project file that was
        trusted stays trusted, and one this creates is trusted, unless ``vouch=False``: the edit copied in
        what nobody reviewed (:func:`mcpmux.config.trust.trusting_edit`).

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
            # A trusted project file stays trusted through mcpmux's own edit; one it creates is trusted.
            created_here = os.path.abspath(self.path) == os.path.abspath(project_config_file())
            with trusting_edit(self.path, created_is_trusted=created_here, vouch=vouch):
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

    def check_new_name(self, name: str) -> None:
        """Refuse an illegal name, or one this file already defines.

        Raises:
            ConfigError: with a hint saying what to do instead.
        """
        where = str(self.path)
        if not is_valid_server_name(name):
            reason = f"illegal server name {name!r}: names match {SERVER_NAME_PATTERN}"
            raise _refused(where, reason, "use lower-case letters, digits, '_' and '-' (at most 32)")
        if name in self.names():
            reason = f"a server named {name!r} already exists"
            raise _refused(where, reason, f"choose another name, or `mcpmux remove {name}` first")

    def _heading(self) -> str:
        slots = self.tree["mcp"].ca.items.get("servers")
        tokens = slots[3] if slots and len(slots) > 3 and slots[3] else []
        return "".join(token_text(t) for t in tokens)

    def _set_heading(self, block: str) -> None:
        """The comment lines before the first entry live on the ``servers`` key of ``mcp``."""
        slots = self.tree["mcp"].ca.items.setdefault("servers", [None, None, None, None])
        slots[3] = [CommentToken(block.lstrip(" "), CommentMark(indent_of(block)), None)] if block.strip() else None


def _refused(source: str, reason: str, hint: str, path: str = "mcp.servers") -> ConfigError:
    error = ConfigError(ConfigProblem(source, path, reason))
    error.hint = hint
    return error


# -- building ----------------------------------------------------------------------------------

_IDENTITY_KEYS = ("name", "type")


def _after_identity(entry: CommentedMap) -> int:
    keys = list(entry)
    return max((keys.index(k) + 1 for k in _IDENTITY_KEYS if k in entry), default=0)


def _commented(entry: Mapping[str, Any]) -> CommentedMap:
    """A new entry: block style, with ``args``, ``env`` and ``headers`` in flow style."""
    node = CommentedMap()
    first = [k for k in _IDENTITY_KEYS if k in entry]
    for key, value in [(k, entry[k]) for k in first] + [(k, v) for k, v in entry.items() if k not in first]:
        if isinstance(value, Mapping):
            value = CommentedMap(value)
            value.fa.set_flow_style()
        elif isinstance(value, list | tuple):
            value = CommentedSeq(value)
            value.fa.set_flow_style()
        node[key] = value
    return node


def _read_text(path: Path) -> str:
    if not path.exists():
        return ""
    return read_text(path, keep_bom=True)  # the BOM is written back on save


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
    tree = load_yaml(yaml, text, source)
    check_tree(tree, source)
    if tree is None:
        tree = CommentedMap()
    if not isinstance(tree, CommentedMap) or not isinstance(tree.get("mcp", {}), dict | type(None)):
        raise ConfigError(ConfigProblem(source, "", "not an mcpmux YAML file (expected a top-level mcp: mapping)"))
    if "mcp" not in tree and any(k in tree for k in ("mcpServers", "servers", "packages", "remotes")):
        raise ConfigError(ConfigProblem(source, "", "not an mcpmux YAML file (expected a top-level mcp: mapping)"))
    return tree

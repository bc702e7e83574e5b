"""Hostile configuration files: every reader refuses them with a ConfigError, in bounded time and memory.

The project's ``mcpmux.yaml`` is read by every command, so a cloned repository chooses what mcpmux
parses. Each format mcpmux reads (its own YAML, Claude/Cursor JSON, VS Code JSONC, the legacy
servers array, registry ``server.json``) is fuzzed from a valid seed: values replaced by hostile
ones (non-string keys, wrong container types, huge integers, references), keys added and removed,
and the text itself mutated. Whatever comes out, loading it either succeeds or raises
:class:`ConfigError`; nothing else escapes. The classic attacks are tested one by one too.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from ruamel.yaml import YAML

from mcpmux.config import load_file
from mcpmux.config.bounds import MAX_CONFIG_BYTES
from mcpmux.config.edit import ConfigDocument
from mcpmux.config.hosts import read_servers
from mcpmux.errors import ConfigError

DATA = Path(__file__).parent.parent / "config" / "data"
EXAMPLES = int(os.environ.get("MCPMUX_FUZZ_EXAMPLES", "120"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

# (file name the reader sees, seed file): the name decides JSON or YAML, the content the format.
SEEDS: dict[str, tuple[str, Path]] = {
    "mcpmux": ("mcpmux.yaml", DATA / "mcpmux.yaml"),
    "claude": ("claude_desktop_config.json", DATA / "claude_desktop_config.json"),
    "vscode": ("mcp.json", DATA / "vscode" / ".vscode" / "mcp.json"),
    "servers-array": ("servers.json", DATA / "servers_array.json"),
    "registry": ("server.json", DATA / "server.json"),
}

KNOWN_KEYS = [
    "mcp", "servers", "settings", "security", "llm", "mcpServers", "inputs", "packages", "remotes", "name", "type",
    "command", "args", "env", "envFile", "cwd", "url", "headers", "enabled", "disabled", "transport", "timeout_ms",
    "registryType", "identifier", "version", "runtimeHint", "environmentVariables", "packageArguments",
    "runtimeArguments", "isRequired", "isSecret", "default", "value", "id", "sandbox", "filesystem", "require_approval",
    "api_key", "builtin", "root", "prefix", "security", "allowed_tools",
]  # fmt: skip
HOSTILE_TEXT = [
    "", "stdio", "http", "sse", "websocket", "tcp", "builtin", "npm", "pypi", "oci", "named", "workspace",
    "${X}", "${", "$$", "${input:k}", "${env:HOME}", "${A:-b}", "${workspaceFolder}", "http://127.0.0.1/mcp",
    "ws://127.0.0.1/x", "tcp://127.0.0.1:1", "/sse", "a" * 40, "\x00", "ü", "-y",
]  # fmt: skip
TEXT = st.sampled_from(HOSTILE_TEXT) | st.text(max_size=12)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | TEXT
)
KEYS = (
    st.sampled_from(KNOWN_KEYS)
    | st.text(max_size=8)
    | st.integers(-3, 3)
    | st.floats(-2, 2)
    | st.booleans()
    | st.none()
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=16,
)
# Characters that change YAML/JSON structure, for mutating the text itself.
STRUCTURE = st.sampled_from([*"[]{}:,&*!|>'\"#-\n \t$/", "&a ", "*a", "<<: ", "!!set ", "!!binary ", "//", "/*"])


def _plain(tree: Any) -> Any:
    return json.loads(json.dumps(tree))


def seed_tree(kind: str) -> Any:
    _, path = SEEDS[kind]
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".yaml":
        return _plain(YAML(typ="safe", pure=True).load(text))
    from mcpmux.config.parse import read_data

    return _plain(read_data(path))


def paths_of(tree: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(tree, dict):
        for key, value in tree.items():
            out += paths_of(value, (*prefix, key))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            out += paths_of(value, (*prefix, index))
    return out


@st.composite
def mutated(draw: st.DrawFn, kind: str) -> Any:
    """The seed of ``kind`` with a few of its values replaced, keys added or removed."""
    tree = seed_tree(kind)
    for _ in range(draw(st.integers(1, 4))):
        paths = paths_of(tree)
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "add", "remove"]))
        if not path:
            if action == "replace":
                tree = draw(VALUES)
            continue
        parent = tree
        for part in path[:-1]:
            parent = parent[part]
        if action == "replace":
            parent[path[-1]] = draw(VALUES)
        elif action == "remove":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(KEYS)] = draw(VALUES)
        else:
            parent.append(draw(VALUES))
    return tree


def dump(tree: Any, name: str) -> str:
    if name.endswith(".yaml"):
        yaml = YAML(typ="safe", pure=True)
        import io

        buffer = io.StringIO()
        yaml.dump(tree, buffer)
        return buffer.getvalue()
    return json.dumps(tree)


READERS: list[tuple[str, Callable[[Path], object]]] = [("load_file", load_file), ("read_servers", read_servers)]


def assert_only_config_errors(name: str, text: str) -> None:
    """Every reader of a file named ``name`` holding ``text`` succeeds or raises ConfigError."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        readers = list(READERS)
        if name.endswith(".yaml"):
            readers.append(("ConfigDocument", ConfigDocument))
        for _, reader in readers:
            try:
                reader(path)
            except ConfigError as exc:
                problems = exc.problems
                assert problems, "a ConfigError lists its problems"


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(SEEDS))
@FUZZ
@given(data=st.data())
def test_every_mutated_file_is_loaded_or_refused_with_a_config_error(kind: str, data: st.DataObject) -> None:
    name = SEEDS[kind][0]
    assert_only_config_errors(name, dump(data.draw(mutated(kind)), name))


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(SEEDS))
@FUZZ
@given(data=st.data())
def test_every_file_with_mutated_text_is_loaded_or_refused_with_a_config_error(kind: str, data: st.DataObject) -> None:
    name, seed = SEEDS[kind]
    text = seed.read_text(encoding="utf-8")
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["insert", "delete", "repeat"]))
        if op == "insert":
            text = text[:at] + data.draw(STRUCTURE) + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + data.draw(st.integers(1, 20)) :]
        else:
            span = text[at : at + data.draw(st.integers(1, 10))]
            text = text[:at] + span * data.draw(st.integers(2, 50)) + text[at:]
    assert_only_config_errors(name, text)


# -- the classic attacks, one by one ------------------------------------------------------------

BILLION_LAUGHS = textwrap.dedent(
    """\
    a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
    d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
    e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
    f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
    g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
    h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]
    i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]
    mcp:
      servers:
        - {name: bomb, type: stdio, command: echo, args: *i}
    """
)

# Each load runs in a child limited to 1 GiB of address space: a bomb that expands runs out of it.
BOUNDED_LOAD = textwrap.dedent(
    """\
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    from pathlib import Path
    from mcpmux.config import load_file
    from mcpmux.errors import ConfigError
    try:
        load_file(Path(sys.argv[1]))
    except ConfigError as exc:
        print("ConfigError:", exc)
    else:
        print("loaded")
    """
)


def load_in_bounded_child(path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", BOUNDED_LOAD, str(path)], capture_output=True, text=True, timeout=90, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.subprocess
def test_a_billion_laughs_alias_bomb_is_refused_without_expanding_it(tmp_path: Path) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_text(BILLION_LAUGHS, encoding="utf-8")
    out = load_in_bounded_child(path)
    assert out.startswith("ConfigError:") and "alias" in out


def test_an_alias_that_contains_itself_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_text("mcp:\n  servers: &s\n    - {name: a, command: x, args: *s}\n", encoding="utf-8")
    with pytest.raises(ConfigError):
        load_file(path)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("mcpmux.yaml", "mcp: " + "[" * 100_000 + "]" * 100_000),
        ("mcpmux.yaml", "mcp: " + "{a: " * 50_000 + "1" + "}" * 50_000),
        ("mcp.json", '{"mcpServers": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        ("mcp.json", '{"servers": ' + '{"a": ' * 100_000 + "1" + "}" * 100_001),
        ("mcpmux.yaml", "".join(" " * i + "a:\n" for i in range(2_000))),
    ],
    ids=["yaml-flow-lists", "yaml-flow-maps", "json-lists", "json-maps", "yaml-block"],
)
def test_deep_nesting_is_refused(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="nested deeper"):
        load_file(path)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("mcpmux.yaml", "mcp:\n  settings: {timeout_ms: " + "9" * 5_000 + "}\n"),
        ("mcpmux.yaml", "mcp:\n  settings: {timeout_ms: " + "9" * 400 + "}\n"),
        ("mcp.json", '{"mcpServers": {"a": {"command": "x", "timeout_ms": ' + "9" * 5_000 + "}}}"),
        ("server.json", '{"name": "a", "packages": [{"registryType": "npm", "version": ' + "9" * 4_000 + "}]}"),
    ],
    ids=["yaml-5000-digits", "yaml-400-digits", "json-5000-digits", "registry-4000-digits"],
)
def test_huge_integers_are_refused(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"integer|digits"):
        load_file(path)


@pytest.mark.parametrize(
    "entry",
    ["env: {1.5: v}", "env: {null: v}", "env: {true: v}", "headers: {[a, b]: v}", "1: x", "? {a: b}\n      : x"],
)
def test_non_string_keys_are_refused_with_their_place(tmp_path: Path, entry: str) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_text(f"mcp:\n  servers:\n    - name: a\n      command: x\n      {entry}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not text") as caught:
        load_file(path)
    assert caught.value.problems[0].path.startswith("mcp.servers[0]")


@pytest.mark.parametrize("name", ["mcpmux.yaml", "mcp.json"])
def test_a_huge_file_is_refused_without_being_read_whole(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    with path.open("wb") as stream:
        stream.write(b"# " if name.endswith(".yaml") else b" ")
        stream.truncate(MAX_CONFIG_BYTES * 4)  # sparse: a 32 MiB file costing no disk
    with pytest.raises(ConfigError, match="larger than"):
        load_file(path)


def test_a_fifo_is_refused_instead_of_blocking(tmp_path: Path) -> None:
    path = tmp_path / "mcpmux.yaml"
    os.mkfifo(path)
    with pytest.raises(ConfigError):
        load_file(path)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("mcp.json", '{"servers": {"a": {"command": "x"}}, "inputs": 5}'),
        ("mcp.json", '{"servers": {"a": {"command": "x"}}, "inputs": [{"id": ["x"]}]}'),
        ("server.json", '{"name": "x", "packages": 5}'),
        ("server.json", '{"name": "x", "packages": [{"registryType": ["npm"]}]}'),
        ("server.json", '{"name": ["x"], "remotes": {"url": 1}}'),
        ("server.json", '{"name": "x", "packages": [{"registryType": "npm", "transport": [1]}]}'),
        ("server.json", '{"name": "x", "packages": [{"registryType": "npm", "environmentVariables": {"a": 1}}]}'),
        ("mcp.json", '{"mcpServers": {"a": {"command": ["x"], "env": [1, 2]}}}'),
        ("mcp.json", '{"mcpServers": {"a": {"type": {"x": 1}, "url": 5}}}'),
        ("servers.json", '{"servers": [{"name": {}, "transport": []}]}'),
    ],
)
def test_wrong_container_types_are_config_errors(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    for reader in (load_file, read_servers):
        with contextlib.suppress(ConfigError):
            reader(path)


def test_unterminated_comments_do_not_make_jsonc_quadratic(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text("/* " * 1_000_000, encoding="utf-8")  # 3 MB, never closed: quadratic would take hours
    with pytest.raises(ConfigError, match="invalid JSON"):
        load_file(path)

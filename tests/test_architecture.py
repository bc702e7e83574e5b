"""The shape of the code: layers point down, every module is seen, no cycles, faces go through the host.

These run inside pytest (not only in ``.ci/run``), so a new package without ``__init__.py``, a
module the layer contract does not name, or a face that reaches past the guard fails a test.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

SRC = Path(__file__).parents[1] / "src" / "mcpmux"
FACES = ("cli", "serve", "gateway", "console", "chat", "api", "agents", "bridge")
# Attribute names that mean holding a server's supervisor or connection.
REACH_THROUGH = {"supervisor", "connection", "connection_for_call", "registry"}


def test_every_directory_of_modules_is_a_package() -> None:
    missing = [
        str(d.relative_to(SRC))
        for d in sorted(p for p in SRC.rglob("*") if p.is_dir() and "__pycache__" not in p.parts)
        if any(d.glob("*.py")) and not (d / "__init__.py").exists()
    ]
    assert not missing, f"directories with modules but no __init__.py (import-linter cannot see them): {missing}"


def test_the_import_contracts_hold_and_see_every_module() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter is not installed next to this python")
    done = subprocess.run([str(lint), "--no-cache"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    modules = len(list(SRC.rglob("*.py")))
    assert f"Analyzed {modules} files" in done.stdout, done.stdout


def test_no_import_cycles_not_even_behind_function_level_imports() -> None:
    graph = grimp.build_graph("mcpmux", exclude_type_checking_imports=True)
    cycles = set()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            if chain:
                cycles.add(" -> ".join((module, *chain)))
    assert not cycles, "import cycles:\n" + "\n".join(sorted(cycles))


def _reach_throughs(source: str, where: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in REACH_THROUGH:
            owner = ast.unparse(node.value)
            if owner.endswith(("manager", "guard", "host")) or owner.endswith(")"):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_faces_never_reach_through_the_host_to_a_supervisor_or_connection() -> None:
    found = [
        hit
        for face in FACES
        for path in sorted((SRC / face).rglob("*.py"))
        for hit in _reach_throughs(path.read_text(encoding="utf-8"), str(path.relative_to(SRC)))
    ]
    assert not found, "faces must use the host's guarded verbs:\n" + "\n".join(found)


def test_the_reach_through_check_sees_what_it_looks_for() -> None:
    source = "async def f(host):\n    return host.manager.supervisor('a').connection\n"
    assert len(_reach_throughs(source, "face.py")) == 2

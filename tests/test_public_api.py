"""The public API: a sorted ``__all__`` whose every name imports, and a light ``import mcpmux``."""

from __future__ import annotations

import subprocess
import sys

import mcpmux


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert mcpmux.__all__ == sorted(mcpmux.__all__)
    for name in mcpmux.__all__:
        assert getattr(mcpmux, name) is not None


def test_importing_mcpmux_does_not_import_the_sdk_or_pydantic() -> None:
    code = "import sys, mcpmux; print(sorted(m for m in ('mcp', 'pydantic', 'rich') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_the_readme_example_names_exist() -> None:
    from mcpmux import Manager, ToolBridge, load_config

    assert callable(load_config) and Manager.call_tool and ToolBridge.tools


def test_a_manager_and_guard_over_lazy_servers_do_not_import_the_sdk_client() -> None:
    code = (
        "import sys, mcpmux.manager.manager, mcpmux.policy.guard, mcpmux.cli.manager_cmds; "
        "print('mcp' in sys.modules)"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "False"

"""The public API: a sorted ``__all__`` whose every name imports, and a light ``import mcpmux``."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import mcpmux


@pytest.mark.parametrize("package", ["mcpmux", "mcpmux.connection", "mcpmux.manager"])
def test_all_is_sorted_and_every_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    names = module.__all__
    assert names == sorted(names) and names == dir(module)
    for name in names:
        assert getattr(module, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        module.Nope  # noqa: B018


def test_the_public_names_are_listed_once_where_type_checkers_read_them() -> None:
    # The lazy map is read from the TYPE_CHECKING imports: a name added there is exported, nowhere else to edit.
    from mcpmux._lazy import type_checking_imports

    exports = type_checking_imports(mcpmux.__file__)
    assert exports["Host"] == "mcpmux.host" and exports["Guard"] == "mcpmux.policy"
    assert sorted([*exports, "__version__"]) == mcpmux.__all__


def test_importing_mcpmux_does_not_import_the_sdk_or_pydantic() -> None:
    code = "import sys, mcpmux; print(sorted(m for m in ('mcp', 'pydantic', 'rich') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_the_readme_example_names_exist() -> None:
    from mcpmux import Host, ToolBridge, load_config

    assert callable(load_config) and Host.call_tool and Host.read_resource and ToolBridge.tools


def test_a_manager_and_guard_over_lazy_servers_do_not_import_the_sdk_client() -> None:
    code = "import sys, mcpmux.manager.manager, mcpmux.policy.guard, mcpmux.cli.host_cmds; print('mcp' in sys.modules)"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "False"

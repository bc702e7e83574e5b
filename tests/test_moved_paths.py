"""Old import paths (before issue 38's moves) still import, as the very same modules, with a DeprecationWarning.

Each case runs in a fresh interpreter: an import that another test made already would not warn again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mcpmux._moved import MODULES, NAMES

SRC = Path(__file__).parents[1] / "src"

pytestmark = pytest.mark.timeout(300)


def _run(code: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning:mcpmux", "-c", code],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_the_table_names_new_paths_that_exist_and_old_paths_that_are_gone() -> None:
    for old, new in MODULES.items():
        assert (SRC / (new.replace(".", "/") + ".py")).is_file(), new
        assert not (SRC / (old.replace(".", "/") + ".py")).exists(), f"{old} is a module again: take it off the table"


CHECK = """
import importlib, json, sys, warnings
old, new = sys.argv[1], sys.argv[2]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    module = importlib.import_module(old)
again = importlib.import_module(old)
print(json.dumps({
    "same": module is importlib.import_module(new) is again,
    "spec": module.__spec__.name, "name": module.__name__,
    "warnings": [(w.category.__name__, str(w.message)) for w in caught if "moved to" in str(w.message)],
    "attribute": getattr(sys.modules[old.rpartition(".")[0]], old.rpartition(".")[2]) is module,
}))
"""


@pytest.mark.parametrize(
    ("old", "new"),
    [("mcpmux.gateway.tokens", "mcpmux.web.tokens"), ("mcpmux.database", "mcpmux.store.database"),
     ("mcpmux.daemon.thin", "mcpmux.attach.thin")],
)  # fmt: skip
def test_an_old_module_path_is_the_new_module_with_one_warning(old: str, new: str) -> None:
    code = CHECK.replace("sys.argv[1], sys.argv[2]", f"{old!r}, {new!r}")
    seen = _run(code)
    assert seen["same"] is True and seen["attribute"] is True
    assert seen["spec"] == seen["name"] == new  # the module keeps its own spec: reload and pickling work
    assert seen["warnings"] == [
        [
            "DeprecationWarning",
            f"{old} moved to {new}; import it from there (the old path goes away in a later release)",
        ]
    ]


def test_from_an_old_path_import_a_name_works() -> None:
    code = """
import json, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    from mcpmux.gateway.tokens import TokenStore
    from mcpmux.manager.models import ToolInfo
    from mcpmux.gateway import ServeOptions, serve
from mcpmux.web.tokens import TokenStore as new_store
from mcpmux.types import ToolInfo as new_info
from mcpmux.serve import ServeOptions as new_options, serve as new_serve
print(json.dumps({"same": [TokenStore is new_store, ToolInfo is new_info, ServeOptions is new_options,
                           serve is new_serve], "warned": sorted(str(w.message).split()[0] for w in caught)}))
"""
    seen = _run(code)
    assert seen["same"] == [True, True, True, True]
    assert seen["warned"] == ["mcpmux.gateway.ServeOptions", "mcpmux.gateway.serve", "mcpmux.gateway.tokens",
                              "mcpmux.manager.models"]  # fmt: skip


def test_a_name_no_package_ever_had_is_still_an_attribute_error() -> None:
    code = """
import json
import mcpmux.gateway
try:
    mcpmux.gateway.nosuch
except AttributeError as exc:
    print(json.dumps({"error": str(exc)}))
"""
    assert _run(code) == {"error": "module 'mcpmux.gateway' has no attribute 'nosuch'"}
    assert set(NAMES) == {"mcpmux.gateway"}

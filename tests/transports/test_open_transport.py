"""``open_transport`` picks a transport by the server's ``type`` and imports it only when used."""

from __future__ import annotations

import importlib
import subprocess
import sys
import typing

import pytest

from mcpmux.config.models import _AnyServerConfig  # the union behind the constructible ServerConfig
from mcpmux.transports import OPENERS


def test_every_configurable_type_has_an_opener() -> None:
    union = typing.get_args(_AnyServerConfig)[0]
    types = {model.model_fields["type"].default for model in typing.get_args(union)}
    assert types == set(OPENERS)


@pytest.mark.parametrize("kind", sorted(OPENERS))
def test_each_opener_exists(kind: str) -> None:
    module, function = OPENERS[kind]
    assert callable(getattr(importlib.import_module(module), function))


@pytest.mark.subprocess
def test_opening_a_stdio_server_does_not_import_the_network_transports() -> None:
    code = (
        "import sys\n"
        "from mcpmux.config.models import StdioServerConfig, Settings\n"
        "from mcpmux.transports import open_transport\n"
        "open_transport(StdioServerConfig(name='x', command='cat'), Settings())\n"
        "print(sorted(m for m in ('websockets', 'mcpmux.transports.http', 'mcpmux.transports.websocket',"
        " 'mcpmux.transports.tcp') if m in sys.modules))\n"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert output.stdout.strip() == "[]"


def test_the_public_names_are_sorted_and_resolve() -> None:
    import mcpmux.transports as transports

    def isort_style(name: str) -> tuple[int, str]:  # the order ruff's RUF022 keeps: CONSTANTS, Classes, functions
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert transports.__all__ == sorted(transports.__all__, key=isort_style)
    for name in transports.__all__:
        assert getattr(transports, name) is not None

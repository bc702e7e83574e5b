"""The host: the composition root that a program, and every face of mcpmux, starts from.

Names load on first use (see ``mcpmux._lazy``)::

    from mcpmux.host import Host
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcpmux._lazy import lazy_exports

if TYPE_CHECKING:
    from mcpmux.host.host import (
        FUNCTIONS_SERVER as FUNCTIONS_SERVER,
        ConnectionFactory as ConnectionFactory,
        Host as Host,
    )

__getattr__, __dir__ = lazy_exports(__name__, __file__)

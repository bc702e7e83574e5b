"""The undocumented part of anyio (tested with 4.16) that mcpmux needs, and only here.

- :func:`asyncio_writer` reads the ``asyncio.StreamWriter`` inside the byte stream anyio gives for
  a child's stdin on the asyncio backend (``StreamWriterWrapper._stream``). Its ``send`` ends every
  write with a shielded ``sleep(0)``: a whole turn of the event loop and a cancel scope per
  message, on the lean path a fifth of a call's cost. The line writer writes to the
  ``StreamWriter`` itself (``write``, then ``drain`` when the pipe is full: public asyncio API) and
  keeps anyio's stream for everything else. A ``send`` without the forced checkpoint (or a public
  accessor of the wrapped writer) would replace it.

:data:`PRIVATE_NAMES` lists them for ``tests/test_private_apis.py``.
"""

from __future__ import annotations

import asyncio
from typing import Final

from anyio._backends._asyncio import StreamWriterWrapper
from anyio.abc import ByteSendStream

__all__ = ["DISTRIBUTION", "PRIVATE_NAMES", "asyncio_writer"]

DISTRIBUTION: Final = "anyio"

_WRAPPER = "anyio._backends._asyncio.StreamWriterWrapper"
PRIVATE_NAMES: Final[dict[str, str | None]] = {
    # A name and the parameters it is called with (``None``: a class, or an attribute we read).
    _WRAPPER: None,
    f"{_WRAPPER}#_stream": None,
}
CALLED_BY: Final[dict[str, str]] = {}


def asyncio_writer(stream: ByteSendStream) -> asyncio.StreamWriter | None:
    """The asyncio ``StreamWriter`` under ``stream``, if it is anyio's wrapper of one; else ``None``."""
    if not isinstance(stream, StreamWriterWrapper):
        return None
    writer = stream._stream
    return writer if isinstance(writer, asyncio.StreamWriter) else None

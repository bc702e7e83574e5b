"""What a network caller without the admin scope sees of a server's errors: no upstream's answer.

A server's state carries the text of its last failure, and an HTTP failure's text ends with the start of
the body the upstream answered (:class:`~mcpmux.errors.HTTPStatusError`). Pointed at a service that
answers with something private, that body would reach every token that may read ``/api/servers`` or the
console's server pages. For callers without ``admin`` the faces show the status with every such body
withheld; the status line, the URL and the code stay.
"""

from __future__ import annotations

import dataclasses
import re

from mcpmux.types.models import ServerStatus

__all__ = ["WITHHELD", "for_readers", "without_upstream_body"]

WITHHELD = "(the answer's body is shown with the admin scope)"

# HTTPStatusError's text: "HTTP 500 from URL: BODY" (a URL holds no space, so the first ": " after it ends it).
_BODY = re.compile(r"(HTTP \d{3} from \S+?): .*", re.S)


def without_upstream_body(text: str) -> str:
    """``text`` with the body an upstream answered with (after ``HTTP NNN from URL:``) withheld."""
    return _BODY.sub(lambda match: f"{match.group(1)} {WITHHELD}", text)


def for_readers(status: ServerStatus) -> ServerStatus:
    """``status`` as a caller without the admin scope sees it: its reasons and last error without bodies."""
    history = tuple(dataclasses.replace(step, reason=without_upstream_body(step.reason)) for step in status.history)
    last_error = None if status.last_error is None else without_upstream_body(status.last_error)
    return dataclasses.replace(
        status, reason=without_upstream_body(status.reason), last_error=last_error, history=history
    )

"""A caller vouched for by a verified token, with its groups; and how rules match callers.

A face names its caller with a string (``token:NAME``, ``agent:NAME``, a client's ``clientInfo``).
A caller whose groups a verified access token names (the gateway as an OAuth resource server maps
its groups claim) is a :class:`Caller`: still a ``str`` everywhere (the audit row's ``caller``
reads ``token:oauth:alice (groups: admins, dev)``), with :attr:`Caller.identity` and
:attr:`Caller.groups` beside. Groups are only ever read from this type, never parsed out of a
string: a client that calls itself ``x (groups: admins)`` in its ``clientInfo`` is in no group.

An approval rule's ``callers`` (globs) say whom the rule is for: ``group:NAME`` matches a caller in
group NAME (the name may be a glob, ``group:team-*``), any other pattern the caller's identity
(``token:oauth:*``, ``agent:triage``). A rule without ``callers`` is for everyone.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase

__all__ = ["GROUP_PREFIX", "Caller", "matching_caller"]

GROUP_PREFIX = "group:"


class Caller(str):
    """A caller identity with the groups its verified token names.

    Attributes:
        identity: the caller without its groups (``token:oauth:alice``).
        groups: the groups, sorted, without duplicates.
    """

    identity: str
    groups: tuple[str, ...]

    def __new__(cls, identity: str, groups: Iterable[str] = ()) -> Caller:
        ordered = tuple(sorted(set(groups)))
        text = f"{identity} (groups: {', '.join(ordered)})" if ordered else identity
        caller = super().__new__(cls, text)
        caller.identity, caller.groups = identity, ordered
        return caller


def matching_caller(caller: str | None, patterns: Iterable[str]) -> str | None:
    """The first of ``patterns`` that matches ``caller`` (see the module's rules), or ``None``."""
    identity = caller.identity if isinstance(caller, Caller) else caller
    groups = caller.groups if isinstance(caller, Caller) else ()
    for pattern in patterns:
        if pattern.startswith(GROUP_PREFIX):
            wanted = pattern.removeprefix(GROUP_PREFIX)
            if any(fnmatchcase(group, wanted) for group in groups):
                return pattern
        elif identity is not None and fnmatchcase(identity, pattern):
            return pattern
    return None

"""Read an OpenAPI 3.0/3.1 or Swagger 2.0 document, from a file or a URL, within bounds.

A document is untrusted input (a URL anyone publishes, a file a repository ships), so reading it is
bounded: at most :data:`MAX_SPEC_BYTES` of text, at most :data:`MAX_SPEC_VALUES` values counting every
YAML alias as the copy it stands for (an alias bomb is a few lines), nesting at most
:data:`MAX_SPEC_DEPTH`, only plain data (no YAML tags). Fetching follows no redirect to another
host and gives up after :data:`FETCH_TIMEOUT_S`.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urljoin, urlsplit

import anyio
import anyio.to_thread
import httpx
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from mcpmux.errors import SpecError

__all__ = [
    "FETCH_DEADLINE_S",
    "FETCH_TIMEOUT_S",
    "MAX_SPEC_BYTES",
    "MAX_SPEC_DEPTH",
    "MAX_SPEC_VALUES",
    "SpecDocument",
    "SpecVersion",
    "fetch_spec",
    "load_spec",
    "parse_spec",
    "read_spec_file",
]

MAX_SPEC_BYTES = 32 * 1024 * 1024
MAX_SPEC_VALUES = 1_000_000
MAX_SPEC_DEPTH = 256
FETCH_TIMEOUT_S = 30.0
FETCH_DEADLINE_S = 60.0
"""The whole fetch of a document (each step has ``FETCH_TIMEOUT_S``): a trickling server is cut off."""
_MAX_REDIRECTS = 5

SpecVersion = Literal["2.0", "3.0", "3.1"]


@dataclass(frozen=True)
class SpecDocument:
    """A parsed document.

    Attributes:
        data: the whole document as plain JSON data.
        version: ``2.0`` (Swagger), ``3.0`` or ``3.1``.
        source: where it came from (a path or the URL), for messages.
        url: the URL it was fetched from (relative server URLs resolve against it), or ``None``.
    """

    data: dict[str, Any]
    version: SpecVersion
    source: str
    url: str | None = None

    @property
    def title(self) -> str:
        """The document's ``info.title`` (empty when it has none)."""
        info = self.data.get("info")
        title = info.get("title") if isinstance(info, dict) else None
        return title if isinstance(title, str) else ""


def parse_spec(text: str, source: str, *, url: str | None = None) -> SpecDocument:
    """Parse ``text`` (JSON or YAML) as an OpenAPI or Swagger document.

    Raises:
        SpecError: too large, not JSON/YAML, crossing a bound, or not an OpenAPI/Swagger document.
    """
    if len(text) > MAX_SPEC_BYTES:
        raise SpecError(source, "", f"larger than {MAX_SPEC_BYTES // (1024 * 1024)} MiB")
    data = _parse_text(text, source)
    if not isinstance(data, dict):
        raise SpecError(source, "", "not an OpenAPI document: the top level is not a mapping")
    data = _plain(data, source)
    version = _version_of(data, source)
    if not isinstance(data.get("paths", {}), dict):
        raise SpecError(source, "paths", "must be a mapping of paths to operations")
    return SpecDocument(data=data, version=version, source=source, url=url)


def read_spec_file(path: Path) -> SpecDocument:
    """Read and parse the document at ``path``.

    Raises:
        SpecError: unreadable, not a regular file, too large, or not a usable document.
    """
    source = str(path)
    try:
        # Opened without blocking and judged by what was opened: a FIFO would block the reading thread
        # until a writer came (42 of them froze the API's workers), a device never ends.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise SpecError(source, "", f"cannot read it: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SpecError(source, "", "not a regular file (a FIFO, a device or a directory is never read)")
    with os.fdopen(fd, "rb") as handle:
        try:
            raw = handle.read(MAX_SPEC_BYTES + 1)
        except OSError as exc:
            raise SpecError(source, "", f"cannot read it: {exc.strerror or exc}") from exc
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError(source, "", f"larger than {MAX_SPEC_BYTES // (1024 * 1024)} MiB")
    return parse_spec(_decode(raw, source), source)


async def fetch_spec(
    url: str,
    *,
    headers: dict[str, str] | None = None,
    verify_tls: bool = True,
    timeout_s: float = FETCH_TIMEOUT_S,
    deadline_s: float = FETCH_DEADLINE_S,
) -> SpecDocument:
    """Fetch the document at ``url`` (``http(s)://``) and parse it.

    Redirects are followed only within the same scheme, host and port (credentials in ``headers``
    never travel to another host). ``timeout_s`` bounds each step (connect, each read); ``deadline_s``
    the whole fetch, so a server that trickles a byte at a time cannot hold a worker for long.

    Raises:
        SpecError: unreachable, a non-2xx answer, too large, too slow, or not a usable document.
    """
    try:
        with anyio.fail_after(deadline_s):
            return await _fetch(url, headers, verify_tls, timeout_s)
    except TimeoutError:
        raise SpecError(url, "", f"fetching it took longer than {deadline_s:g} s; is the server trickling?") from None


async def _fetch(url: str, headers: dict[str, str] | None, verify_tls: bool, timeout_s: float) -> SpecDocument:
    async with httpx.AsyncClient(verify=verify_tls, timeout=timeout_s, follow_redirects=False) as client:
        current = url
        for _ in range(_MAX_REDIRECTS + 1):
            raw, location = await _get_bounded(client, current, headers or {}, url)
            if location is None:
                return parse_spec(_decode(raw, url), url, url=current)
            target = urljoin(current, location)
            if _origin(target) != _origin(url):
                raise SpecError(url, "", f"redirected to another origin ({_origin(target)}); use that URL instead")
            current = target
    raise SpecError(url, "", f"more than {_MAX_REDIRECTS} redirects")


async def load_spec(spec: str, *, headers: dict[str, str] | None = None, verify_tls: bool = True) -> SpecDocument:
    """The document named by ``spec``: an ``http(s)://`` URL is fetched, anything else is a path.

    Raises:
        SpecError: as :func:`fetch_spec` and :func:`read_spec_file`.
    """
    if spec.lower().startswith(("http://", "https://")):
        return await fetch_spec(spec, headers=headers, verify_tls=verify_tls)
    path = urlsplit(spec).path if spec.lower().startswith("file://") else spec
    # Reading and parsing a large document takes a while: off the event loop.
    return await anyio.to_thread.run_sync(_read_named, path)


def _read_named(path: str) -> SpecDocument:
    return read_spec_file(Path(path).expanduser())


async def _get_bounded(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], source: str
) -> tuple[bytes, str | None]:
    """The body of ``url`` (at most ``MAX_SPEC_BYTES``), or the ``Location`` of a redirect."""
    try:
        async with client.stream("GET", url, headers=headers) as response:
            if response.is_redirect and "location" in response.headers:
                return b"", response.headers["location"]
            if not response.is_success:
                raise SpecError(source, "", f"fetching it answered HTTP {response.status_code}")
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > MAX_SPEC_BYTES:
                    raise SpecError(source, "", f"larger than {MAX_SPEC_BYTES // (1024 * 1024)} MiB")
                chunks.append(chunk)
            return b"".join(chunks), None
    except httpx.HTTPError as exc:
        raise SpecError(source, "", f"cannot fetch it: {type(exc).__name__}: {exc}") from exc


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port


def _decode(raw: bytes, source: str) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecError(source, "", f"not UTF-8 text (byte {exc.start})") from exc


def _parse_text(text: str, source: str) -> Any:
    if text.lstrip().startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError(source, "", f"not valid JSON: {exc.msg} at line {exc.lineno}") from exc
        except RecursionError as exc:
            raise SpecError(source, "", f"nested deeper than {MAX_SPEC_DEPTH} levels") from exc
    yaml = YAML(typ="safe", pure=True)
    try:
        return yaml.load(text)
    except YAMLError as exc:
        raise SpecError(source, "", f"not valid JSON or YAML: {str(exc).splitlines()[0]}") from exc
    except RecursionError as exc:
        raise SpecError(source, "", f"nested deeper than {MAX_SPEC_DEPTH} levels") from exc


def _version_of(data: dict[str, Any], source: str) -> SpecVersion:
    openapi, swagger = data.get("openapi"), data.get("swagger")
    if isinstance(openapi, str) and openapi.startswith("3.0"):
        return "3.0"
    if isinstance(openapi, str) and openapi.startswith("3.1"):
        return "3.1"
    if str(swagger) == "2.0":
        return "2.0"
    if openapi is not None or swagger is not None:
        found = f"openapi: {openapi!r}" if openapi is not None else f"swagger: {swagger!r}"
        raise SpecError(source, "", f"unsupported version ({found}); OpenAPI 3.0, 3.1 and Swagger 2.0 are supported")
    raise SpecError(source, "", 'not an OpenAPI document: no `openapi: 3.x` or `swagger: "2.0"` field')


def _plain(tree: dict[str, Any], source: str) -> dict[str, Any]:
    """``tree`` checked against the bounds, with YAML dates turned into text (JSON has none).

    The walk is iterative and counts every visit, so an alias bomb stops at the bound.
    """
    seen = 0
    stack: list[tuple[Any, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > MAX_SPEC_VALUES:
            raise SpecError(source, "", f"more than {MAX_SPEC_VALUES} values (counting YAML aliases as copies)")
        if depth > MAX_SPEC_DEPTH:
            raise SpecError(source, "", f"nested deeper than {MAX_SPEC_DEPTH} levels (or an alias containing itself)")
        if isinstance(node, dict):
            for key in list(node):
                value = node[key]
                if not isinstance(key, str):
                    node[str(key)] = node.pop(key)
                node[str(key)] = _scalar(value, source) if not isinstance(value, dict | list) else value
                stack.append((node[str(key)], depth + 1))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                node[index] = _scalar(value, source) if not isinstance(value, dict | list) else value
                stack.append((node[index], depth + 1))
    return tree


def _scalar(value: Any, source: str) -> Any:
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    raise SpecError(source, "", f"unsupported value of type {type(value).__name__} (only plain JSON data)")

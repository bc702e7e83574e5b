"""Tool results made ready for a model: text, media parts, a size cap, the error flag.

:func:`normalise_result` turns a ``CallToolResult`` into a :class:`ModelResult`:

- text blocks are kept in order; ``structuredContent`` is added as JSON text unless a text block
  already carries the same JSON, or the same value when it is the SDK's ``{"result": value}``
  wrapper (servers are told to send both);
- images and audio stay media parts when the profile can show them to a model (``anthropic``:
  images; ``openai``: images, as ``image_url`` data URLs, which OpenAI accepts in user messages
  only; ``gemini``: images and audio as ``inline_data``), else a placeholder such as
  ``[image: image/png, 1234 bytes]``;
- embedded text resources are inlined under a ``[resource: URI]`` header; blobs and resource links
  are described;
- the text rendering (parts joined by newlines, media counted as their placeholder) is capped at
  ``max_bytes`` of UTF-8, marker included: the part crossing the limit is cut and ends with
  ``…[truncated: showed X of Y bytes]``, later parts are dropped. A media part whose own decoded
  size is above ``max_bytes`` is replaced by its placeholder.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

import mcp_types as types

from mcpmux.types.json_shapes import JSONObject

__all__ = ["DEFAULT_MAX_RESULT_BYTES", "MEDIA_SUPPORT", "MediaPart", "ModelResult", "normalise_result"]

DEFAULT_MAX_RESULT_BYTES = 256 * 1024
MEDIA_SUPPORT: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "openai": frozenset({"image"}),
        "anthropic": frozenset({"image"}),
        "gemini": frozenset({"image", "audio"}),
        "mcp": frozenset({"image", "audio"}),
    }
)
# Anthropic image blocks take only these media types.
_ANTHROPIC_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_MARKER = "\n…[truncated: showed {shown} of {total} bytes]"


@dataclass(frozen=True, slots=True)
class MediaPart:
    """An image or audio clip, base64-encoded as the server sent it."""

    kind: Literal["image", "audio"]
    mime_type: str
    data: str
    size_bytes: int

    def placeholder(self) -> str:
        """A one-line description standing in for the media."""
        return f"[{self.kind}: {self.mime_type}, {self.size_bytes} bytes]"


@dataclass(frozen=True, slots=True)
class ModelResult:
    """A tool result as a model sees it.

    Attributes:
        parts: text pieces and media parts, in the server's order, after the cap.
        is_error: the tool reported failure (``isError``); the text says why.
        structured: ``structuredContent`` as sent, for programmatic use.
        original_bytes: UTF-8 size of the whole text rendering before the cap.
        truncated: whether text was cut or media dropped by the cap.
    """

    parts: tuple[str | MediaPart, ...]
    is_error: bool = False
    structured: JSONObject | None = None
    original_bytes: int = 0
    truncated: bool = False

    @classmethod
    def error(cls, message: str) -> ModelResult:
        """A failed result carrying ``message`` (e.g. for an exception raised by the call)."""
        return cls(parts=(message,), is_error=True, original_bytes=len(message.encode()))

    def as_text(self) -> str:
        """Everything as one string, media as placeholders."""
        return "\n".join(p if isinstance(p, str) else p.placeholder() for p in self.parts)

    def content_parts(self, profile: str) -> list[JSONObject]:
        """The parts in ``profile``'s content-block shape; media it cannot show become text.

        Raises:
            ValueError: unknown profile.
        """
        if profile not in MEDIA_SUPPORT:
            raise ValueError(f"unknown result profile {profile!r} (known: {', '.join(MEDIA_SUPPORT)})")
        return [_render(part, profile) for part in self.parts]


def _render(part: str | MediaPart, profile: str) -> JSONObject:
    if isinstance(part, MediaPart) and _shows(part, profile):
        return _media_block(part, profile)
    text = part if isinstance(part, str) else part.placeholder()
    return {"text": text} if profile == "gemini" else {"type": "text", "text": text}


def _shows(part: MediaPart, profile: str) -> bool:
    if part.kind not in MEDIA_SUPPORT[profile]:
        return False
    return profile != "anthropic" or part.mime_type in _ANTHROPIC_IMAGE_TYPES


def _media_block(part: MediaPart, profile: str) -> JSONObject:
    if profile == "anthropic":
        return {"type": "image", "source": {"type": "base64", "media_type": part.mime_type, "data": part.data}}
    if profile == "openai":
        return {"type": "image_url", "image_url": {"url": f"data:{part.mime_type};base64,{part.data}"}}
    if profile == "gemini":
        return {"inline_data": {"mime_type": part.mime_type, "data": part.data}}
    return {"type": part.kind, "mimeType": part.mime_type, "data": part.data}


def normalise_result(
    result: types.CallToolResult, *, max_bytes: int = DEFAULT_MAX_RESULT_BYTES, profile: str = "openai"
) -> ModelResult:
    """Turn a ``CallToolResult`` into a :class:`ModelResult` for ``profile``, capped at ``max_bytes``.

    Raises:
        ValueError: unknown profile, or ``max_bytes`` below 1.
    """
    if profile not in MEDIA_SUPPORT:
        raise ValueError(f"unknown result profile {profile!r} (known: {', '.join(MEDIA_SUPPORT)})")
    if max_bytes < 1:
        raise ValueError("max_bytes must be at least 1")
    parts = [_convert(block, profile) for block in result.content]
    structured = result.structured_content
    if structured is not None and not any(isinstance(p, str) and _repeats(p, structured) for p in parts):
        parts.append(json.dumps(structured, ensure_ascii=False))
    capped, original, truncated = _cap(parts, max_bytes)
    return ModelResult(tuple(capped), bool(result.is_error), structured, original, truncated)


def _convert(block: types.ContentBlock, profile: str) -> str | MediaPart:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        media = MediaPart(block.type, block.mime_type, block.data, _decoded_size(block.data))
        return media if media.kind in MEDIA_SUPPORT[profile] else media.placeholder()
    if isinstance(block, types.EmbeddedResource):
        return _describe_embedded(block.resource)
    return _describe_link(block)


def _describe_embedded(resource: types.TextResourceContents | types.BlobResourceContents) -> str:
    mime = f" ({resource.mime_type})" if resource.mime_type else ""
    if isinstance(resource, types.TextResourceContents):
        return f"[resource: {resource.uri}{mime}]\n{resource.text}"
    return f"[resource: {resource.uri}{mime}, {_decoded_size(resource.blob)} bytes of binary data]"


def _describe_link(link: types.ResourceLink) -> str:
    details = ", ".join(
        item for item in (link.mime_type, f"{link.size} bytes" if link.size is not None else None) if item
    )
    about = f": {link.description}" if link.description else ""
    return f"[resource link: {link.name} <{link.uri}>{f' ({details})' if details else ''}{about}]"


def _decoded_size(data: str) -> int:
    # Computed from the length: decoding a large image only to measure it would copy it.
    stripped = data.strip()
    padding = len(stripped) - len(stripped.rstrip("="))
    return max(len(stripped) * 3 // 4 - padding, 0)


def _repeats(text: str, structured: JSONObject) -> bool:
    """Whether ``text`` already says what ``structured`` does."""
    if _same_json(text, structured):
        return True
    # SDK servers wrap a non-object return value as {"result": value} and also send it as text.
    if set(structured) != {"result"}:
        return False
    value = structured["result"]
    return text in (value, str(value), json.dumps(value, ensure_ascii=False)) or _same_json(text, value)


def _same_json(text: str, value: Any) -> bool:
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return False
    try:
        return bool(json.loads(stripped) == value)
    except ValueError:
        return False


def _cap(parts: list[str | MediaPart], max_bytes: int) -> tuple[list[str | MediaPart], int, bool]:
    """Keep parts while ``max_bytes`` of text last; cut the part that crosses the limit."""
    sizes = [len((p if isinstance(p, str) else p.placeholder()).encode()) for p in parts]
    total = sum(sizes) + max(len(parts) - 1, 0)
    kept: list[str | MediaPart] = []
    budget, truncated = max_bytes, False
    for index, (part, size) in enumerate(zip(parts, sizes, strict=True)):
        if isinstance(part, MediaPart) and part.size_bytes > max_bytes:
            part, truncated = part.placeholder(), True
        need = size + (1 if index < len(parts) - 1 else 0)
        if need > budget:
            text = part if isinstance(part, str) else part.placeholder()
            kept.append(_cut(text, budget, max_bytes - budget, total))
            return kept, total, True
        kept.append(part)
        budget -= need
    return kept, total, truncated


def _cut(text: str, budget: int, used: int, total: int) -> str:
    room = max(budget - len(_MARKER.format(shown=total, total=total).encode()), 0)
    head = text.encode()[:room].decode("utf-8", errors="ignore")
    return head + _MARKER.format(shown=used + len(head.encode()), total=total)

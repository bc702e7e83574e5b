"""Tool results as a model sees them: text, structured content, media, resources, the cap."""

from __future__ import annotations

import base64
import json

import mcp_types as types
import pytest

from mcpmux.bridge.results import MediaPart, ModelResult, normalise_result

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 1226).decode()
WAV = base64.b64encode(b"RIFF" + b"\0" * 96).decode()


def result(
    *blocks: types.ContentBlock, structured: dict[str, object] | None = None, error: bool = False
) -> types.CallToolResult:
    return types.CallToolResult(content=list(blocks), structured_content=structured, is_error=error)


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def test_text_blocks_are_joined_and_the_error_flag_kept() -> None:
    model = normalise_result(result(text("first"), text("second"), error=True))
    assert model.as_text() == "first\nsecond"
    assert model.is_error
    assert not model.truncated
    assert model.original_bytes == len("first\nsecond")


def test_structured_content_is_added_as_json_unless_a_text_block_repeats_it() -> None:
    data = {"temperature": 21.5, "unit": "C"}
    alone = normalise_result(result(structured=data))
    assert json.loads(alone.as_text()) == data
    assert alone.structured == data
    duplicated = normalise_result(result(text(json.dumps(data, indent=2)), structured=data))
    assert duplicated.parts == (json.dumps(data, indent=2),)
    different = normalise_result(result(text("It is warm."), structured=data))
    assert different.as_text() == "It is warm.\n" + json.dumps(data)


def test_images_become_provider_parts_where_supported() -> None:
    model = normalise_result(result(text("look"), types.ImageContent(type="image", data=PNG, mime_type="image/png")))
    image = model.parts[1]
    assert isinstance(image, MediaPart)
    assert image.size_bytes == 1234
    assert model.as_text() == "look\n[image: image/png, 1234 bytes]"
    anthropic = model.content_parts("anthropic")[1]
    assert anthropic == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    openai = model.content_parts("openai")[1]
    assert openai == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    assert model.content_parts("gemini")[1] == {"inline_data": {"mime_type": "image/png", "data": PNG}}


def test_media_a_profile_cannot_show_becomes_a_placeholder() -> None:
    audio = types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")
    for_openai = normalise_result(result(audio), profile="openai")
    assert for_openai.parts == ("[audio: audio/wav, 100 bytes]",)
    for_gemini = normalise_result(result(audio), profile="gemini")
    assert for_gemini.content_parts("anthropic") == [{"type": "text", "text": "[audio: audio/wav, 100 bytes]"}]
    svg = normalise_result(result(types.ImageContent(type="image", data=PNG, mime_type="image/svg+xml")))
    assert svg.content_parts("anthropic")[0]["type"] == "text"


def test_resources_are_inlined_or_described() -> None:
    embedded_text = types.EmbeddedResource(
        type="resource", resource=types.TextResourceContents(uri="file:///a.txt", mime_type="text/plain", text="hello")
    )
    embedded_blob = types.EmbeddedResource(
        type="resource",
        resource=types.BlobResourceContents(uri="file:///a.bin", blob=base64.b64encode(b"12345").decode()),
    )
    link = types.ResourceLink(
        type="resource_link",
        name="report",
        uri="file:///report.pdf",
        mime_type="application/pdf",
        size=2048,
        description="Q3",
    )
    model = normalise_result(result(embedded_text, embedded_blob, link))
    assert model.parts == (
        "[resource: file:///a.txt (text/plain)]\nhello",
        "[resource: file:///a.bin, 5 bytes of binary data]",
        "[resource link: report <file:///report.pdf> (application/pdf, 2048 bytes): Q3]",
    )


def test_large_text_is_cut_with_an_explicit_marker_and_the_full_size_kept() -> None:
    big = "é" * 100_000  # two bytes each: the cut must not split a character
    model = normalise_result(result(text("head"), text(big), text("tail")), max_bytes=1000)
    rendered = model.as_text()
    assert model.truncated
    assert model.original_bytes == 4 + 1 + 200_000 + 1 + 4
    assert len(rendered.encode()) <= 1000
    assert rendered.startswith("head\né")
    shown = len(rendered.split("\n…[truncated")[0].encode())
    assert rendered.endswith(f"…[truncated: showed {shown} of {model.original_bytes} bytes]")
    assert "tail" not in rendered


def test_a_result_exactly_at_the_cap_is_not_cut() -> None:
    model = normalise_result(result(text("x" * 100)), max_bytes=100)
    assert not model.truncated
    assert model.as_text() == "x" * 100


def test_an_image_above_the_cap_is_replaced_by_its_placeholder() -> None:
    model = normalise_result(result(types.ImageContent(type="image", data=PNG, mime_type="image/png")), max_bytes=1000)
    assert model.parts == ("[image: image/png, 1234 bytes]",)
    assert model.truncated


def test_an_error_result_can_be_made_from_a_message() -> None:
    failed = ModelResult.error("server 'fs' is unavailable")
    assert failed.is_error
    assert failed.content_parts("openai") == [{"type": "text", "text": "server 'fs' is unavailable"}]


def test_unknown_profiles_and_caps_are_rejected() -> None:
    with pytest.raises(ValueError, match="profile"):
        normalise_result(result(), profile="cohere")
    with pytest.raises(ValueError, match="max_bytes"):
        normalise_result(result(), max_bytes=0)
    with pytest.raises(ValueError, match="profile"):
        ModelResult(("x",)).content_parts("cohere")


def test_the_sdk_result_wrapper_is_not_repeated_beside_its_text() -> None:
    assert normalise_result(result(text("42"), structured={"result": 42})).parts == ("42",)
    assert normalise_result(result(text("done"), structured={"result": "done"})).parts == ("done",)
    kept = normalise_result(result(text("done"), structured={"result": "other"}))
    assert kept.parts == ("done", '{"result": "other"}')

"""Command-line arguments of tools and prompts: one JSON object, or ``KEY=VALUE`` / ``KEY:=JSON`` pairs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from mcpmux.types.json_shapes import JSONObject

__all__ = ["call_arguments", "json_object"]


def json_object(text: str | None, args_file: Path | None) -> JSONObject:
    if text is not None and args_file is not None:
        raise click.BadParameter("give JSON_ARGS or --args-file, not both")
    if args_file is not None:
        text = args_file.read_text(encoding="utf-8")
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc.msg} (column {exc.colno})", param_hint="JSON_ARGS") from exc
    if not isinstance(value, dict):
        raise click.BadParameter("arguments must be a JSON object", param_hint="JSON_ARGS")
    return value


def call_arguments(words: tuple[str, ...], args_file: Path | None) -> JSONObject:
    """The arguments of ``call``: one JSON object, or ``KEY=VALUE`` / ``KEY:=JSON`` pairs.

    ``KEY=VALUE`` takes VALUE as JSON when it parses (``n=3`` is a number, ``ok=true`` a boolean),
    else as a string; ``KEY:=JSON`` requires JSON.
    """
    if len(words) == 1 and not _is_pair(words[0]):
        if words[0].strip() and words[0].strip()[:1] not in ("{", "["):
            raise click.BadParameter(f"{words[0]!r} is neither a JSON object nor KEY=VALUE", param_hint="ARGS")
        return json_object(words[0], args_file)
    if args_file is not None and words:
        raise click.BadParameter("give JSON_ARGS or --args-file, not both")
    if args_file is not None:
        return json_object(None, args_file)
    arguments: JSONObject = {}
    for word in words:
        if not _is_pair(word):
            raise click.BadParameter(f"{word!r} is not KEY=VALUE (or give one JSON object)", param_hint="ARGS")
        key, value = _pair(word)
        arguments[key] = value
    return arguments


def _is_pair(word: str) -> bool:
    key = word.partition("=")[0].removesuffix(":")
    return "=" in word and bool(key) and not word.lstrip().startswith(("{", "["))


def _pair(word: str) -> tuple[str, Any]:
    key, _, text = word.partition("=")
    if key.endswith(":"):
        try:
            return key[:-1], json.loads(text)
        except json.JSONDecodeError as exc:
            raise click.BadParameter(f"{key[:-1]}: not valid JSON: {exc.msg}", param_hint="KEY:=JSON") from exc
    try:
        return key, json.loads(text)
    except json.JSONDecodeError:
        return key, text

"""Show a configuration without its secrets.

Every env and header value is a secret by default (shown as ``****``), and every value that came
from ``${VAR}`` interpolation is masked wherever else it appears (args, urls, error text).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, SecretStr

from mcpmux.config.effective import effective_policy
from mcpmux.config.models import Config
from mcpmux.types.json_shapes import JSONObject

__all__ = [
    "MASK",
    "config_to_dict",
    "json_forms",
    "looks_secret",
    "mask_secrets",
    "mask_values",
    "may_need_redaction",
    "redact",
]

MASK = "****"

# Names that say "this is a credential", wherever they appear (env keys, variables, headers).
_SECRET_NAME = re.compile(
    r"(token|secret|passw|api[_-]?key|apikey|auth|credential|cookie|session|private|_pat\b|_key\b)", re.I
)
_CREDENTIAL_SHAPE = re.compile(r"[A-Za-z0-9_\-+/=.]{16,}")
# Tokens whose issuer gave them a recognisable prefix (GitHub, OpenAI/Stripe, Slack, GitLab, AWS, Google,
# Hugging Face): masked wherever they appear, even when mcpmux was never told they are secrets.
_TOKEN = (
    r"(?:gh[pousr]_|github_pat_|sk-|sk_(?:live|test)_|rk_(?:live|test)_|xox[abposr]-|glpat-|AKIA|ASIA|AIza|hf_)"
    r"[A-Za-z0-9_\-]{12,}"
)
_PREFIXED_TOKEN = re.compile(r"(?<![A-Za-z0-9])" + _TOKEN)
# The same without the left edge: found in a JSON text whenever a string inside it holds a token
# (escaping can put "n" of "\n" before a token's prefix, never split its characters).
_TOKEN_ANYWHERE = re.compile(_TOKEN)
MIN_SECRET_CHARS = 4


def looks_secret(name: str, value: str) -> bool:
    """Whether ``value`` (found under ``name``) must be masked wherever text is shown.

    A value counts when its name says it is a credential, or when it is shaped like one (16 or more
    token characters mixing letters and digits). Ordinary values (``info``, ``/home/me``, a
    timezone) are not masked in free text; ``config show`` still masks every env and header value.
    """
    if len(value) < MIN_SECRET_CHARS:
        return False
    if _SECRET_NAME.search(name):
        return True
    shaped = _CREDENTIAL_SHAPE.fullmatch(value) is not None
    return shaped and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (longest first) and every prefixed token (``ghp_...``) as ``****``."""
    return _PREFIXED_TOKEN.sub(MASK, mask_values(text, secrets))


def mask_values(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every one of ``secrets`` (longest first) as ``****``, and nothing else changed."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        if secret:
            text = text.replace(secret, MASK)
    return text


def json_forms(secrets: Iterable[str]) -> tuple[str, ...]:
    """The secrets as they appear inside JSON strings (``ensure_ascii=False``), for :func:`may_need_redaction`."""
    return tuple(json.dumps(secret, ensure_ascii=False)[1:-1] for secret in secrets if secret)


def may_need_redaction(json_text: str, secret_forms: Iterable[str]) -> bool:
    """Whether :func:`redact` could change any string inside ``json_text`` (JSON, ``ensure_ascii=False``).

    ``secret_forms`` are the secrets through :func:`json_forms`. ``False`` is certain (a cheap test
    on text already serialised); ``True`` means look closer.
    """
    if _TOKEN_ANYWHERE.search(json_text):
        return True
    # JSON escapes each character on its own: a string holding a secret holds its escaped form.
    return any(form in json_text for form in secret_forms)


def config_to_dict(config: Config, *, show_secrets: bool = False) -> JSONObject:
    """The merged configuration as plain data, in the shape of ``mcpmux.yaml``.

    With ``show_secrets=False`` env and header values become ``****`` and interpolated values are
    masked in every other string. ``security.effective`` says in words what the guard does with
    these settings (which calls ask, which tools are withheld). A server that uses unset variables
    carries ``unresolved``: why it cannot start.
    """
    servers = []
    for server in config.servers:
        data = server.model_dump(mode="json", by_alias=True, exclude_defaults=True, exclude_none=True)
        data = {"name": server.name, "type": server.type, **data}
        _secret_fields(server, data, show_secrets)
        for key in ("env", "headers"):
            mapping: dict[str, SecretStr] | None = getattr(server, key, None)
            if mapping:
                data[key] = {k: v.get_secret_value() if show_secrets else MASK for k, v in mapping.items()}
        if server.unresolved:
            data["unresolved"] = [f"{p.reason} ({p.source}{f':{p.line}' if p.line else ''})" for p in server.unresolved]
        servers.append(data if show_secrets else mask_secrets(data, config.secret_values))
    out: JSONObject = {
        "mcp": {
            "servers": servers,
            "settings": config.settings.model_dump(mode="json"),
            "security": {
                **config.security.model_dump(mode="json"),
                "effective": effective_policy(config.security, config.servers),
            },
        },
    }
    llm = config.llm.model_dump(mode="json", exclude_none=True)
    if config.llm.api_key is not None:
        llm["api_key"] = config.llm.api_key.get_secret_value() if show_secrets else MASK
    out["llm"] = llm
    return out


def _secret_fields(model: BaseModel, data: dict[str, Any], show_secrets: bool) -> None:
    """Put every secret field of ``model`` and its nested models (an ``auth:`` block's ``client_secret``,
    ``private_key``, ...) into ``data``: its value with ``show_secrets``, else ``****``."""
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, SecretStr) and name in data:
            data[name] = value.get_secret_value() if show_secrets else MASK
        elif isinstance(value, BaseModel) and isinstance(data.get(name), dict):
            _secret_fields(value, data[name], show_secrets)


def mask_secrets(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` (JSON-like data) with every secret masked in every string it contains."""
    secrets = frozenset(secrets)
    if isinstance(value, str):
        return value if value == MASK else redact(value, secrets)
    if isinstance(value, list):
        return [mask_secrets(v, secrets) for v in value]
    if isinstance(value, dict):
        return {k: mask_secrets(v, secrets) for k, v in value.items()}
    return value

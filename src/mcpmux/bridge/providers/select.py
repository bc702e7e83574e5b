"""Choosing the provider the ``llm:`` section names; the only module that knows every provider."""

from __future__ import annotations

import os

from mcpmux.bridge.providers.anthropic import AnthropicProvider
from mcpmux.bridge.providers.base import DEFAULT_MODELS, Provider
from mcpmux.bridge.providers.openai import OpenAIProvider
from mcpmux.config.models import LLMConfig

__all__ = ["make_provider"]


def make_provider(config: LLMConfig, *, check: bool = False) -> Provider:
    """Build the provider the ``llm:`` section names (the key falls back to the environment).

    Args:
        config: the ``llm:`` section.
        check: verify now, without a request, that the settings can work (SDK installed, a key or a
            local ``base_url``), so that a command fails before it starts any server.

    Raises:
        ModelNotConfigured: with ``check``, the settings cannot work.
    """
    model = config.model or os.environ.get("MCPMUX_MODEL") or DEFAULT_MODELS[config.provider]
    key = config.api_key.get_secret_value() if config.api_key is not None else None
    if config.provider == "anthropic":
        anthropic = AnthropicProvider(config, model, key or os.environ.get("ANTHROPIC_API_KEY"))
        if check:
            anthropic.check()
        return anthropic
    openai = OpenAIProvider(config, model, key or os.environ.get("OPENAI_API_KEY"))
    if check:
        openai.check()
    return openai

"""Configuration: typed models, the readers of every supported format, and the loader.

Names load on first use (see ``mcpmux._lazy``): :mod:`mcpmux.config.paths` stays importable without
building the models (the daemon's known-configuration path reads no model at all).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcpmux._lazy import lazy_exports

if TYPE_CHECKING:
    from mcpmux.config.display import (
        config_to_dict as config_to_dict,
        redact as redact,
    )
    from mcpmux.config.loader import (
        load_config as load_config,
        load_file as load_file,
    )
    from mcpmux.config.models import (
        BuiltinServerConfig as BuiltinServerConfig,
        Config as Config,
        LLMConfig as LLMConfig,
        SandboxConfig as SandboxConfig,
        SecurityConfig as SecurityConfig,
        ServerConfig as ServerConfig,
        ServerSecurity as ServerSecurity,
        Settings as Settings,
        SseServerConfig as SseServerConfig,
        StdioServerConfig as StdioServerConfig,
        StreamableHttpServerConfig as StreamableHttpServerConfig,
        TcpServerConfig as TcpServerConfig,
        TransportType as TransportType,
        WebSocketServerConfig as WebSocketServerConfig,
    )
    from mcpmux.config.paths import (
        ConfigSource as ConfigSource,
        config_sources as config_sources,
    )

__getattr__, __dir__ = lazy_exports(__name__, __file__)

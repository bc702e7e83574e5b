"""Configuration: typed models, the readers of every supported format, and the loader."""

from mcpmux.config.display import config_to_dict, redact
from mcpmux.config.loader import ConfigSource, config_sources, load_config, load_file
from mcpmux.config.models import (
    BuiltinServerConfig,
    Config,
    LLMConfig,
    SandboxConfig,
    SecurityConfig,
    ServerConfig,
    ServerSecurity,
    Settings,
    SseServerConfig,
    StdioServerConfig,
    StreamableHttpServerConfig,
    TcpServerConfig,
    WebSocketServerConfig,
)

__all__ = [
    "BuiltinServerConfig",
    "Config",
    "ConfigSource",
    "LLMConfig",
    "SandboxConfig",
    "SecurityConfig",
    "ServerConfig",
    "ServerSecurity",
    "Settings",
    "SseServerConfig",
    "StdioServerConfig",
    "StreamableHttpServerConfig",
    "TcpServerConfig",
    "WebSocketServerConfig",
    "config_sources",
    "config_to_dict",
    "load_config",
    "load_file",
    "redact",
]

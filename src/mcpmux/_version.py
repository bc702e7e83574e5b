"""The version, in a module of its own: the daemon's thin client reads it without importing the package's names."""

__version__ = "0.1.0"

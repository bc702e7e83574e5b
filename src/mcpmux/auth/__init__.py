"""OAuth 2.1 for remote servers: login flows, the machine-wide token broker and its stores.

Layer: below ``transports`` (which attach a broker's tokens to HTTP requests) and above ``config``.
Modules, bottom up:

- :mod:`mcpmux.auth.netguard`: which URLs an OAuth step may fetch (https, SSRF guard);
- :mod:`mcpmux.auth.vault`: where records live (OS keyring, else an encrypted 0600 file) and the
  cross-process lock a refresh runs under;
- :mod:`mcpmux.auth.broker`: the token of a server, refreshed once per machine, and the ``httpx2``
  auth that attaches it only to that server's origin;
- :mod:`mcpmux.auth.login`: ``mcpmux login`` (discovery, client identity, code + PKCE with a
  loopback redirect, client credentials) on the official SDK's OAuth client.

Nothing here imports the SDK's client at import time except :mod:`mcpmux.auth.login`.
"""

"""The daemon's client, apart from the daemon: attach a host to the per-machine pool, the thin CLI path,
the socket's wire format and its paths."""

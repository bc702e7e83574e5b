"""The shared HTTP edge of every face: security middleware, tokens, origins, slowloris, the OAuth resource
server, introspection, problem documents, callers."""

"""Storage: the SQLAlchemy database (state, pins, audit, tokens, sources) and the SQLite catalog cache."""

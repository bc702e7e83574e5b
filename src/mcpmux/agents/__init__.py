"""The agents: named, scoped LLM tool loops over the host (``mcpmux agent``, ``Host.ask``)."""

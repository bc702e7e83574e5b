"""The chat face: a terminal REPL over an agent session (``mcpmux chat``).

Lines starting with ``/`` are slash commands (one table, :mod:`mcpmux.chat.slash`), which work with
no model configured; anything else goes to the model, whose tool calls run through the guard.
prompt_toolkit and rich are imported only when the chat starts.
"""

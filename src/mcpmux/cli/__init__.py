"""The command line: a shell over the faces (gateway, chat, agent) and the host; ``mcpmux --help`` lists it."""

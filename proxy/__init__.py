"""The Twisted side: TCP server, connection state, command routing, configuration and the CLI."""

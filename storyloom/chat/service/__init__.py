"""The chat service the server and CLI call: every change to a conversation, and the run
behind each reply being written."""

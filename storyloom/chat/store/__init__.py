"""Mnemosyne's records (seed 001 §3): conversations as trees of messages, the chat state
after every message, and the immutable context snapshot a turn reads."""

"""The ``storyloom`` command: one module per command group, shared options below them."""

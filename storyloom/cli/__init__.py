"""The ``storyloom`` command: one module per command group or top-level command, the
pieces they share below them (``options``, ``context``), assembled by ``main``."""

"""The chat engine (seeds 001 and 004), in five parts:

- ``store``: Mnemosyne's records: conversations, the turn tree, the state chain, the
  context snapshot a turn reads;
- ``reply``: what the model writes back: Filament's tag parser and the state operations;
- ``personalab``: PersonaLab: the preset library, the director, summaries, memory;
- ``prompt``: the Jacquard pipeline: the Skein and the shuttle nodes that build, budget,
  send and parse it;
- ``service``: what the server and CLI call: conversations, replies being written.

Each part imports only those listed above it.
"""

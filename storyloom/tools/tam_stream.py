"""What of a streaming model output a reader may see while it streams.

A TAM block (:mod:`storyloom.tools.tam`) must never flash on screen: from a possible
start marker (``<|[``…) on, text is held back until the characters after it decide.
An executed block is dropped; a block that will not run (unterminated, without
``command``) is shown once that is certain, as :func:`~storyloom.tools.tam.parse_tam`
keeps it in ``text``; a marker inside a code fence, inline code, a quoted line or
quotation marks is plain text and shows at once. Whitespace next to a block is held
until the next visible character, then tidied as ``parse_tam`` tidies it.

The filter and ``parse_tam`` share one scanner, so for any output and any chunking
``"".join(feed(c) for c in chunks) + finish() == parse_tam(output).text``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from storyloom.tools.tam import BlockEvent, ScanEvent, TamScanner, TextJoiner, visible_text


@dataclass
class TamStreamFilter:
    _scanner: TamScanner = field(default_factory=TamScanner)
    _joiner: TextJoiner = field(default_factory=TextJoiner)
    _blocks: int = 0

    def feed(self, chunk: str) -> str:
        """The visible text that ``chunk`` makes safe to show (may be empty)."""
        return self._visible(self._scanner.feed(chunk))

    def finish(self) -> str:
        """The rest, once the output has ended."""
        return self._visible(self._scanner.finish()) + self._joiner.finish()

    @property
    def holding_block(self) -> bool:
        """A tool block has started and is being held back (a UI may say "calling…")."""
        return self._scanner.in_block

    @property
    def executed_blocks(self) -> int:
        """How many blocks that will run have been read completely so far."""
        return self._blocks

    def _visible(self, events: list[ScanEvent]) -> str:
        self._blocks += sum(1 for e in events if isinstance(e, BlockEvent) and e.executed)
        return visible_text(events, self._joiner)

"""EJS (ST-Prompt-Template's template syntax) compiled to the body of a JavaScript function.

The tags, as EJS reads them:

=============  ==========================================================================
``<% code %>``  runs ``code``
``<%= x %>``    writes ``x`` (HTML-escaped where ``escape`` is on: a displayed message;
                ST-Prompt-Template writes it unescaped into prompts, and so does this)
``<%- x %>``    writes ``x`` as it is
``<%# ... %>``  a comment: nothing
``<%_``         like ``<%``, and the spaces and tabs before it on its line go
``-%>``         ends a tag and drops the newline right after it
``_%>``         ends a tag and drops the spaces, tabs and the newline after it
``<%%``         a literal ``<%`` (and ``%%>`` a literal ``%>``)
=============  ==========================================================================

``null`` and ``undefined`` write nothing. The compiled code keeps every newline of the
template at the same line (text is written with ``\\n`` escapes followed by the real
newlines), so a JavaScript error's line is the template's line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from storyloom.core.errors import InvalidInput

OPEN = "<%"
CLOSE = "%>"
_SLURP_BEFORE = re.compile(r"[ \t]*$")
_SLURP_AFTER = re.compile(r"^[ \t]*")


class EjsSyntaxError(InvalidInput):
    """A tag that is never closed; ``line`` is where it opens (1 first)."""

    def __init__(self, message: str, line: int) -> None:
        self.message = message
        self.line = line
        super().__init__(f"{message} (line {line})")


@dataclass(frozen=True)
class _Tag:
    kind: str  # "", "=", "-", "#", "_"
    code: str
    trim: str  # "", "-", "_"


def has_template(text: str) -> bool:
    """Whether ``text`` holds an EJS tag (text without one is never sent to the sandbox)."""
    return OPEN in text


def _literal(text: str) -> str:
    """``__append("...")`` for a piece of text, then its newlines, so lines stay aligned."""
    if not text:
        return ""
    return f"__append({json.dumps(text, ensure_ascii=False)});" + "\n" * text.count("\n")


def compile_ejs(source: str, *, escape: bool = False) -> str:
    """The JavaScript statements that write ``source``'s output through ``__append``.

    ``escape``: ``<%=`` escapes HTML (``__escape``). Raises :class:`EjsSyntaxError` for a
    tag that is never closed.
    """
    out: list[str] = []
    text: list[str] = []
    pos = 0
    trim_next = ""
    length = len(source)
    while pos < length:
        start = source.find(OPEN, pos)
        chunk = source[pos : length if start < 0 else start]
        if trim_next:
            if trim_next == "_":
                chunk = _SLURP_AFTER.sub("", chunk, count=1)
            if chunk.startswith("\r\n"):
                chunk = chunk[2:]
            elif chunk.startswith("\n"):
                chunk = chunk[1:]
            trim_next = ""
        if start < 0:
            text.append(chunk.replace("%%>", "%>"))
            break
        if source.startswith("<%%", start):
            text.append(chunk.replace("%%>", "%>") + "<%")
            pos = start + 3
            continue
        after = start + 2
        kind = source[after] if after < length and source[after] in "=-#_" else ""
        if kind == "_":
            chunk = _SLURP_BEFORE.sub("", chunk, count=1)
        text.append(chunk.replace("%%>", "%>"))
        body_start = after + len(kind)
        end = source.find(CLOSE, body_start)
        if end < 0:
            line = source.count("\n", 0, start) + 1
            raise EjsSyntaxError("a <% tag is never closed with %>", line)
        trim = ""
        code_end = end
        if end > body_start and source[end - 1] in "-_":
            trim = source[end - 1]
            code_end = end - 1
        out.append(_literal("".join(text)))
        text.clear()
        out.append(_tag_code(_Tag(kind, source[body_start:code_end], trim), escape))
        pos = end + 2
        trim_next = trim
        if trim:
            # The newline trimming drops must still move the code down a line.
            kept = source[pos : pos + 256]
            if trim == "_":
                kept = _SLURP_AFTER.sub("", kept, count=1)
            if kept.startswith(("\r\n", "\n")):
                out.append("\n")
    out.append(_literal("".join(text)))
    return "".join(out)


def _tag_code(tag: _Tag, escape: bool) -> str:
    code = tag.code
    # A line comment at the end of a tag would swallow what follows on its line.
    tail = "\n" if "//" in code.rsplit("\n", 1)[-1] else ""
    match tag.kind:
        case "#":
            return "\n" * code.count("\n")
        case "=":
            writer = "__escape" if escape else "__raw"
            return f"__append({writer}({code}{tail}));"
        case "-":
            return f"__append(__raw({code}{tail}));"
        case _:
            return f"{code}{tail};"

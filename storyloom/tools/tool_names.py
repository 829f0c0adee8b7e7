"""Tool ids as names other protocols accept, and back.

storyloom's tool ids are ``<Namespace>:<name>`` (seed 003 4.4.2). Two protocols forbid
the ``:``:

- MCP tool names are ``^[A-Za-z0-9._-]{1,128}$`` (SEP-986);
- OpenAI function names are ``^[a-zA-Z0-9_-]{1,64}$``.

Both mappings are reversible. An id of the usual shape maps plainly:

- ``to_mcp_name("Plugin:tool") == "Plugin.tool"`` (``:`` becomes ``.``);
- ``to_function_name("Plugin:tool") == "Plugin__tool"`` (``:`` becomes ``__``).

"Usual" means: the id is parts joined by ``:``, every part non-empty and not starting
with ``_``, made of ``A-Z a-z 0-9 -`` and ``_`` (for function names, single ``_`` only
between other characters, so that ``__`` always means ``:``). Every other id (one with
a ``.``, a ``__``, a space, a CJK character, ...) is **escaped**: the name starts with
``_`` (which a plain name never does), then letters, digits and ``-`` stand for
themselves, ``:`` is ``.`` (MCP) or ``__`` (function names), and every other character
is ``_`` followed by the two lowercase hex digits of each of its UTF-8 bytes. So
``to_mcp_name("mcp.files.read") == "_mcp_2efiles_2eread"`` and
``to_function_name("a__b:c") == "_a_5f_5fb__c"``.

A name longer than the protocol allows raises :class:`ToolNameTooLong`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from storyloom.core.errors import InvalidInput

MCP_NAME_MAX = 128
FUNCTION_NAME_MAX = 64

_MCP_PLAIN = re.compile(r"[A-Za-z0-9-][A-Za-z0-9_-]*(?::[A-Za-z0-9-][A-Za-z0-9_-]*)*")
_FUNCTION_PART = r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*"
_FUNCTION_PLAIN = re.compile(rf"{_FUNCTION_PART}(?::{_FUNCTION_PART})*")
_VERBATIM = re.compile(r"[A-Za-z0-9-]")
_HEX = frozenset("0123456789abcdef")
_ESCAPE = "_"


class ToolNameTooLong(InvalidInput, ValueError):
    """The id does not fit the protocol's name length, even escaped."""


class BadToolName(InvalidInput, ValueError):
    """A name that no id maps to."""


@dataclass(frozen=True)
class _NameScheme:
    """One protocol's names: which ids map plainly, what ``:`` becomes, how long a name
    may be."""

    plain: re.Pattern[str]
    colon: str
    limit: int
    what: str

    def to_name(self, tool_id: str) -> str:
        name = (
            tool_id.replace(":", self.colon)
            if self.plain.fullmatch(tool_id)
            else _escape(tool_id, colon=self.colon)
        )
        return _checked(tool_id, name, self.limit, self.what)

    def from_name(self, name: str) -> str:
        tool_id = (
            _unescape(name, colon=self.colon)
            if name.startswith(_ESCAPE)
            else name.replace(self.colon, ":")
        )
        if not tool_id or self.to_name(tool_id) != name:
            raise BadToolName(f"{name!r} is not a storyloom tool name")
        return tool_id


_MCP = _NameScheme(_MCP_PLAIN, ".", MCP_NAME_MAX, "an MCP tool name")
_FUNCTION = _NameScheme(_FUNCTION_PLAIN, "__", FUNCTION_NAME_MAX, "a function name")


def to_mcp_name(tool_id: str) -> str:
    """The MCP tool name of ``tool_id`` (see the module docs)."""
    return _MCP.to_name(tool_id)


def from_mcp_name(name: str) -> str:
    """The tool id an MCP tool name stands for; :class:`BadToolName` for a name that
    :func:`to_mcp_name` never makes."""
    return _MCP.from_name(name)


def to_function_name(tool_id: str) -> str:
    """The OpenAI function name of ``tool_id`` (see the module docs)."""
    return _FUNCTION.to_name(tool_id)


def from_function_name(name: str) -> str:
    """The tool id a function name stands for; :class:`BadToolName` for a name that
    :func:`to_function_name` never makes."""
    return _FUNCTION.from_name(name)


def _checked(tool_id: str, name: str, limit: int, what: str) -> str:
    if not tool_id:
        raise BadToolName("a tool id is never empty")
    if len(name) > limit:
        raise ToolNameTooLong(
            f"tool {tool_id!r} is {len(name)} characters as {what}; at most {limit} fit"
        )
    return name


def _escape(tool_id: str, *, colon: str) -> str:
    out = [_ESCAPE]
    for char in tool_id:
        if _VERBATIM.fullmatch(char):
            out.append(char)
        elif char == ":":
            out.append(colon)
        else:
            out.extend(f"{_ESCAPE}{byte:02x}" for byte in char.encode("utf-8"))
    return "".join(out)


def _unescape(name: str, *, colon: str) -> str:
    raw = bytearray()
    i = len(_ESCAPE)
    while i < len(name):
        if name.startswith(colon, i):
            raw += b":"
            i += len(colon)
        elif name[i] == _ESCAPE:
            digits = name[i + 1 : i + 3]
            if len(digits) != 2 or not set(digits) <= _HEX:
                raise BadToolName(f"{name!r}: '_' must be followed by two hex digits")
            raw.append(int(digits, 16))
            i += 3
        elif _VERBATIM.fullmatch(name[i]):
            raw += name[i].encode("ascii")
            i += 1
        else:
            raise BadToolName(f"{name!r}: unexpected character {name[i]!r}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadToolName(f"{name!r}: the escapes are not UTF-8") from None

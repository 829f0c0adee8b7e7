"""The face of a character or persona without a picture: its name's initials on a colour.

Every avatar route answers an image, so the page shows a face everywhere (chat messages,
group members, the library, the pickers) and the browser logs no 404. The colour comes
from the name alone, so the same name has the same face on every page and every restart.
The name is the user's (or a card's author's) text: it reaches the SVG only escaped.
"""

from __future__ import annotations

import hashlib
from xml.sax.saxutils import escape

from fastapi import Response

SVG_MEDIA_TYPE = "image/svg+xml"
# Opened on its own (a new tab), the SVG is a document: nothing in it may load or run.
_NO_SCRIPT = "default-src 'none'; style-src 'unsafe-inline'"


def initials(name: str) -> str:
    """One or two letters for ``name``: the first letters of its first and last words
    ("Ann Lee" → "AL"), one for a single word; a name in Chinese gives its first
    character. "?" when the name has no letter or digit."""
    words = ["".join(ch for ch in word if ch.isalnum()) for word in name.split()]
    words = [w for w in words if w]
    if not words:
        return "?"
    first = words[0][0]
    last = words[-1][0] if len(words) > 1 else ""
    # A name in a script without case or spaces (Chinese, Japanese) is one "word":
    # its first character says more than two.
    if not first.isascii() and first.upper() == first.lower():
        return first
    return (first + last).upper()


def avatar_hue(name: str) -> int:
    """The hue (0–359) of ``name``'s face, the same for the same name everywhere."""
    digest = hashlib.sha256(name.strip().encode("utf-8")).digest()
    return int.from_bytes(digest[:2], "big") % 360


def initials_svg(name: str) -> str:
    """A 64×64 SVG: ``name``'s initials in white on its colour."""
    text = escape(initials(name))
    label = escape(name.strip() or "?", {'"': "&quot;"})
    hue = avatar_hue(name)
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64" viewBox="0 0 64 64"'
        f' role="img" aria-label="{label}">'
        f'<rect width="64" height="64" fill="hsl({hue},45%,45%)"/>'
        '<text x="32" y="32" dy="0.35em" text-anchor="middle" fill="#fff"'
        ' font-family="system-ui,sans-serif" font-size="26" font-weight="600">'
        f"{text}</text></svg>"
    )


def initials_response(name: str) -> Response:
    """``name``'s generated face as the image an avatar route answers."""
    return Response(
        initials_svg(name),
        media_type=SVG_MEDIA_TYPE,
        # The face follows the name, which can change.
        headers={
            "cache-control": "no-cache",
            "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'",
        },
    )

"""Where a book's resources live: virtual paths and the ``viking://`` URIs of seed 002.

A path is absolute inside its book (``/entities/characters/lin-feng``); its URI adds the
book: ``viking://resources/<book_id>/entities/characters/lin-feng``. The first segment is
one of :data:`TOP_DIRECTORIES`.
"""

from __future__ import annotations

import re
import unicodedata

from storyloom.core.errors import FieldProblem, InvalidInput

SCHEME = "viking://resources/"
TOP_DIRECTORIES = ("meta", "entities", "manuscript", "summaries", "profiles")
ENTITY_FOLDERS = ("characters", "locations", "plot-threads")
PROFILE_FOLDERS = ("characters", "plot-threads", "world-state", "themes", "style", "emotional-arcs")


def invalid(field: str, reason: str) -> InvalidInput:
    """The error for one bad field of a writing request."""
    return InvalidInput(f"{field}: {reason}", [FieldProblem(field, reason)])


_UNSAFE = re.compile(r"[^\w\-.]+", re.UNICODE)


def resource_uri(book_id: str, path: str) -> str:
    return f"{SCHEME}{book_id}{normalize_path(path)}"


def parse_uri(uri: str) -> tuple[str, str]:
    """``(book_id, path)`` of a ``viking://resources/…`` URI."""
    if not uri.startswith(SCHEME):
        raise invalid("uri", f"{uri!r} is not a viking://resources/ URI")
    book_id, sep, rest = uri[len(SCHEME) :].partition("/")
    if not book_id or not sep:
        raise invalid("uri", f"{uri!r} names no resource inside a book")
    return book_id, normalize_path("/" + rest)


def normalize_path(path: str) -> str:
    """``path`` with one leading slash, no trailing or doubled slashes; refuses ``..``
    and paths outside the five top directories."""
    parts = [p for p in path.strip().split("/") if p]
    if not parts:
        return "/"
    if any(p in (".", "..") for p in parts):
        raise invalid("path", f"{path!r}: '.' and '..' are not allowed")
    if parts[0] not in TOP_DIRECTORIES:
        known = ", ".join(f"/{d}" for d in TOP_DIRECTORIES)
        raise invalid("path", f"{path!r} is not under {known}")
    return "/" + "/".join(parts)


def parent_path(path: str) -> str:
    head, _, _ = normalize_path(path).rpartition("/")
    return head or "/"


def ancestors(path: str) -> list[str]:
    """``/a``, ``/a/b``, … up to and including ``path`` itself."""
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def is_under(path: str, directory: str) -> bool:
    return directory in ("", "/") or path == directory or path.startswith(directory + "/")


def slug(name: str) -> str:
    """A path segment for ``name``: lower case, spaces as hyphens, letters of any script
    kept (``林枫`` stays ``林枫``)."""
    text = unicodedata.normalize("NFKC", name).strip().lower()
    text = _UNSAFE.sub("-", text).strip("-.")
    return text or "untitled"


def chapter_path(arc: str, ordinal: int) -> str:
    return f"{arc}/chapter-{ordinal:03d}"


def arc_path(number: int) -> str:
    return f"/manuscript/arc-{number:02d}"
